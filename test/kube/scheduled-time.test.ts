/** The run's occurrence from the Job's cronjob-scheduled-timestamp annotation, through the fake API server. */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/types.js';
import { MANUAL_ANNOTATION, SCHEDULED_TIMESTAMP_ANNOTATION, scheduledTimeFromJob } from '../../src/kube/scheduled-time.js';
import { FakeApiServer, startFakeApiServer } from '../helpers/fake-apiserver.js';
import { memoryLogger } from '../helpers/log.js';

let fake: FakeApiServer;
beforeEach(async () => {
  fake = await startFakeApiServer('batch');
});
afterEach(async () => {
  await fake.close();
});

const config = { drain: { gracePeriodSeconds: 30, marginSeconds: 5 }, scheduledTimestamp: { enabled: true } } as Config;
const env = () => ({ KUBECONFIG: fake.kubeconfig, CRONSAFE_JOB_NAME: 'qc-29000000', CRONSAFE_POD_NAMESPACE: 'batch' });
const job = (annotations?: Record<string, string>) => fake.seed('jobs', { metadata: { name: 'qc-29000000', ...(annotations ? { annotations } : {}) } });

describe('scheduled time from the Job annotation', () => {
  it('reads the annotation (RFC 3339 with offset) as the exact instant', async () => {
    job({ [SCHEDULED_TIMESTAMP_ANNOTATION]: '2026-10-25T01:30:00+01:00' });
    const { log, lines } = memoryLogger();
    const at = await scheduledTimeFromJob(config, log, env());
    expect(at.scheduledTime?.toISOString()).toBe('2026-10-25T00:30:00.000Z');
    expect(at.manual).toBeUndefined();
    expect(lines.map((l) => l.msg)).toEqual(['scheduled time read from the Job annotation']);
  });

  it('finds the Job through the pod when the env does not name it', async () => {
    const j = job({ [SCHEDULED_TIMESTAMP_ANNOTATION]: '2026-11-30T10:15:00Z' });
    fake.seed('pods', { metadata: { name: 'p1', ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'qc-29000000', uid: j.metadata.uid, controller: true }] } });
    const at = await scheduledTimeFromJob(config, memoryLogger().log, { KUBECONFIG: fake.kubeconfig, CRONSAFE_POD_NAME: 'p1' });
    expect(at.scheduledTime?.toISOString()).toBe('2026-11-30T10:15:00.000Z');
  });

  it('finds the Job through the pod when the pod read is first answered 429: tried again', async () => {
    const j = job({ [SCHEDULED_TIMESTAMP_ANNOTATION]: '2026-11-30T10:15:00Z' });
    fake.seed('pods', { metadata: { name: 'p1', ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'qc-29000000', uid: j.metadata.uid, controller: true }] } });
    let podReads = 0;
    fake.throttled = (_verb, resource) => resource === 'pods' && ++podReads === 1;
    const at = await scheduledTimeFromJob(config, memoryLogger().log, { KUBECONFIG: fake.kubeconfig, CRONSAFE_POD_NAME: 'p1' });
    expect(at.scheduledTime?.toISOString()).toBe('2026-11-30T10:15:00.000Z');
    expect(fake.requests.map((q) => `${q.resource} ${q.status}`)).toEqual(['pods 429', 'pods 200', 'jobs 200']);
  });

  it.each([
    ['no annotation (a Job made by hand)', () => job(), 'has no batch.kubernetes.io/cronjob-scheduled-timestamp annotation', 'info'],
    ['a malformed annotation', () => job({ [SCHEDULED_TIMESTAMP_ANNOTATION]: 'yesterday' }), 'expected an RFC 3339 time', 'warn'],
    ['an annotation far ahead of this clock', () => job({ [SCHEDULED_TIMESTAMP_ANNOTATION]: '2099-01-01T00:00:00Z' }), '2099-01-01T00:00:00.000Z is in the future', 'warn'],
    ['no `get jobs` (403)', () => (job(), fake.deny('get', 'jobs')), 'HTTP 403', 'warn'],
    ['a missing Job (404)', () => undefined, 'HTTP 404', 'warn'],
  ])('%s: undefined, with one log line', async (_name, setup, reason, level) => {
    setup();
    const { log, lines } = memoryLogger();
    expect(await scheduledTimeFromJob(config, log, env())).toEqual({});
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: level === 'info' ? 30 : 40, msg: 'scheduled time: not read from the Job annotation; using the latest occurrence at start' });
    expect(String(lines[0]!.reason)).toContain(reason);
  });

  // `kubectl create job --from=cronjob/...` (NOTES' "watch a first run now") marks its Job
  // so. It has no scheduled time, and with graceSeconds it was judged against the latest
  // occurrence and skipped as a stale fire.
  it('a Job made by hand (kubectl create job --from): manual, with one info line', async () => {
    job({ [MANUAL_ANNOTATION]: 'manual' });
    const { log, lines } = memoryLogger();
    expect(await scheduledTimeFromJob(config, log, env())).toEqual({ manual: true });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 30, job: 'qc-29000000' });
    expect(String(lines[0]!.msg)).toContain('made by hand');
    // Another value of the annotation is not kubectl's mark.
    await fake.close();
    fake = await startFakeApiServer('batch');
    job({ [MANUAL_ANNOTATION]: 'other' });
    expect(await scheduledTimeFromJob(config, memoryLogger().log, env())).toEqual({});
  });

  // API Priority and Fairness answers 429 under load (client-go tries again on its own), an
  // API server restarting behind its load balancer 503. Taken at once for "cannot read", one
  // such answer lost the run its scheduled time, and a manual Job its mark: with
  // schedule.graceSeconds it was then judged a stale fire and skipped (exit 0, nothing done).
  it.each([429, 503])('a Job read answered %i once is tried again: the annotation is still read', async (code) => {
    job({ [MANUAL_ANNOTATION]: 'manual' });
    let jobReads = 0;
    const first = (resource: string) => resource === 'jobs' && ++jobReads === 1;
    if (code === 429) fake.throttled = (_verb, resource) => first(resource);
    else fake.onRequest = (_verb, resource) => (fake.down = first(resource));
    const { log } = memoryLogger();
    expect(await scheduledTimeFromJob(config, log, env())).toEqual({ manual: true });
    expect(fake.requests.filter((q) => q.resource === 'jobs').map((q) => q.status)).toEqual([code, 200]);
  });

  it('an unreachable API server: undefined, one line', async () => {
    await fake.close();
    const { log, lines } = memoryLogger();
    expect(await scheduledTimeFromJob(config, log, env())).toEqual({});
    expect(lines).toHaveLength(1);
    expect(String(lines[0]!.reason)).toContain('ECONNREFUSED');
    fake = await startFakeApiServer();
  });

  it('off by default: no API call', async () => {
    job({ [SCHEDULED_TIMESTAMP_ANNOTATION]: '2026-11-30T10:15:00Z' });
    expect(await scheduledTimeFromJob({ ...config, scheduledTimestamp: undefined }, memoryLogger().log, env())).toEqual({});
    expect(await scheduledTimeFromJob({ ...config, scheduledTimestamp: { enabled: false } }, memoryLogger().log, env())).toEqual({});
    expect(fake.requests).toHaveLength(0);
  });
});
