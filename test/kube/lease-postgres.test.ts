/**
 * The Kubernetes Lease with the PostgreSQL ledger and `parallelism` (docs/postgres.md): the
 * pod that starts the pass takes the Lease; the pods of the same Job join the pass without
 * it, so all of them work. Real `cronsafe run` processes, a real PostgreSQL, the fake API
 * server (KUBECONFIG in their env), as three pods of one Job would run.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FIXTURES, spawnCli, workspace, type LogLine } from '../helpers/cli.js';
import { FakeApiServer, startFakeApiServer } from '../helpers/fake-apiserver.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';
import { filesIn, until } from '../helpers/wait.js';

const GATED = path.join(FIXTURES, 'handlers/module-gated.mjs');

describe.skipIf(PG_SKIP_REASON !== undefined)('Kubernetes Lease with a shared PostgreSQL pass', () => {
  let server: PgServer;
  let fake: FakeApiServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });
  beforeEach(async () => {
    fake = await startFakeApiServer('batch');
    fake.seed('jobs', { metadata: { name: 'test-job-29000000', ownerReferences: [{ apiVersion: 'batch/v1', kind: 'CronJob', name: 'test-job', uid: 'cj-1', controller: true }] } });
  });
  afterEach(async () => {
    await fake.close();
  });

  it('three pods of one Job: one takes the Lease, the other two join the pass, none skips', async () => {
    const url = await server.createDatabase('leasepass');
    // ok-* items wait for <dir>/gate, so that every pod is in the pass before any ends.
    const files = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`ok-${i}.txt`, String(i)]));
    const ws = workspace(
      { handler: { module: GATED }, state: { postgres: url, schema: 'leasepass' }, lock: { kubernetesLease: { name: 'test-job' } }, concurrency: 2, log: { level: 'info' } },
      files,
    );
    const env = (pod: string) => ({ KUBECONFIG: fake.kubeconfig, CRONSAFE_POD_NAME: pod, CRONSAFE_POD_NAMESPACE: 'batch', CRONSAFE_JOB_NAME: 'test-job-29000000' });
    const pods = ['pod-a', 'pod-b', 'pod-c'].map((pod) => spawnCli(['run', '-c', ws.configPath], { env: env(pod) }));
    // Each pod has an item in flight: all three are in the pass.
    await until(() => new Set(filesIn(path.join(ws.dir, 'markers')).map((f) => f.split('-')[0])).size === 3, 'an item started by each of the three pods');
    writeFileSync(path.join(ws.dir, 'gate'), '');

    const has = (lines: LogLine[], msg: string) => lines.some((l) => l.msg === msg);
    const ends = [];
    for (const pod of pods) {
      const { code } = await pod.exited;
      expect(code, pod.stderr()).toBe(0);
      ends.push({
        outcome: pod.lines.find((l) => l.msg === 'run finished')?.outcome,
        lease: has(pod.lines, 'Kubernetes Lease acquired'),
        joined: has(pod.lines, 'joined the pass of this run group'),
      });
    }
    expect(ends.map((e) => e.outcome)).toEqual(['completed', 'completed', 'completed']);
    expect(ends.filter((e) => e.lease)).toHaveLength(1);
    expect(ends.filter((e) => e.joined)).toHaveLength(2);
    expect(ends.every((e) => e.lease !== e.joined)).toBe(true);
    expect(fake.get('leases', 'test-job')?.spec.holderIdentity).toBeUndefined(); // released at the end
  }, 60_000);
});
