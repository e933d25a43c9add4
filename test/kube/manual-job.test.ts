/**
 * `kubectl create job --from=cronjob/...` (what the chart's NOTES suggest for a first run):
 * the Job has no scheduled time, only kubectl's `cronjob.kubernetes.io/instantiate: manual`.
 * With `schedule.graceSeconds` set it was judged against the latest occurrence and skipped
 * as a stale fire (exit 0, nothing done). `cronsafe run` against the fake API server, as a
 * pod of the chart would run it (scheduledTimestamp.enabled: it may read its Job).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { finished, runCli, statusJson, workspace } from '../helpers/cli.js';
import { FakeApiServer, startFakeApiServer } from '../helpers/fake-apiserver.js';

let fake: FakeApiServer;
beforeEach(async () => {
  fake = await startFakeApiServer('batch');
});
afterEach(async () => {
  await fake.close();
});

const podEnv = () => ({ KUBECONFIG: fake.kubeconfig, CRONSAFE_POD_NAME: 'p1', CRONSAFE_POD_NAMESPACE: 'batch', CRONSAFE_JOB_NAME: 'qc-1' });

/** Once a year, an hour of grace: now is always long after the latest occurrence. */
const yearly = () =>
  workspace(
    { handler: { command: ['true'] }, schedule: { cron: '0 0 1 1 *', timeZone: 'UTC', graceSeconds: 3600 }, scheduledTimestamp: { enabled: true } },
    { 'a.txt': 'a', 'b.txt': 'b' },
  );

describe('a Job made by hand on a schedule with graceSeconds', () => {
  it('runs (it is not a fire of the schedule): every item done, exit 0', async () => {
    fake.seed('jobs', { metadata: { name: 'qc-1', annotations: { 'cronjob.kubernetes.io/instantiate': 'manual' } } });
    const ws = yearly();
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv() });
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)?.outcome).toBe('completed');
    expect(r.lines.some((l) => String(l.msg).includes('made by hand'))).toBe(true);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
  });

  // API Priority and Fairness throttles a busy API server's clients with 429 (client-go tries
  // again by itself). The Job read took one such answer for "cannot read": the mark unseen,
  // the manual Job was skipped as a stale fire, exit 0 with nothing done.
  it('runs when its Job read is first answered 429 (API Priority and Fairness): tried again, the mark seen', async () => {
    fake.seed('jobs', { metadata: { name: 'qc-1', annotations: { 'cronjob.kubernetes.io/instantiate': 'manual' } } });
    let jobReads = 0;
    fake.throttled = (_verb, resource) => resource === 'jobs' && ++jobReads === 1;
    const ws = yearly();
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv() });
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)?.outcome).toBe('completed');
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
  });

  // A restarting API server (a control plane upgrade) refuses or resets connections; client-go
  // tries such a GET again by itself. The read took it for "cannot read": the mark unseen,
  // the manual Job was skipped as a stale fire, exit 0 with nothing done.
  it('runs when its Job read meets a connection cut (the API server restarting): tried again, the mark seen', async () => {
    fake.seed('jobs', { metadata: { name: 'qc-1', annotations: { 'cronjob.kubernetes.io/instantiate': 'manual' } } });
    let jobReads = 0;
    fake.cut = (_verb, resource) => resource === 'jobs' && ++jobReads === 1;
    const ws = yearly();
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv() });
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)?.outcome).toBe('completed');
    expect(fake.requests.filter((q) => q.resource === 'jobs').map((q) => q.status)).toEqual([0, 200]);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
  });

  it('a Job without the mark (or its scheduled time) is still judged as a fire: stale', async () => {
    fake.seed('jobs', { metadata: { name: 'qc-1' } });
    const ws = yearly();
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv() });
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)?.outcome).toBe('stale');
    expect((await statusJson(ws.configPath)).items.done).toBe(0);
  });
});
