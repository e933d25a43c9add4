/**
 * Issue 4 on PostgreSQL: the pods of one Job share a pass, and each pod is a run in the
 * ledger. While a healthy pass runs on three pods, `cronsafe_consecutive_failed_runs` must
 * stay 0: the two older pods' runs are unfinished because they are running, not because
 * they died. (It read 2 here, and 3 with four pods: CronsafeRunsFailing, `>= 3` with no
 * `for:`, paged during every healthy pass.) Real processes, a real server, `/metrics`.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURES, spawnCli, workspace, type Running } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';
import { freePort, scrape, value } from '../helpers/prom.js';

const GATED = path.join(FIXTURES, 'handlers/module-gated.mjs');

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: pods of a running pass are not failed runs (consecutive_failed_runs)', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('three pods of one healthy pass read 0 while they run, and after', async () => {
    const url = await server.createDatabase('streak');
    // ok-* items wait for <dir>/gate: every pod keeps items in flight until the test opens it.
    const files = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`ok-${i}.txt`, String(i)]));
    const ws = workspace({ handler: { module: GATED }, state: { postgres: url, schema: 'streak' }, concurrency: 2, log: { level: 'info' } }, files);
    const base = YAML.parse(readFileSync(ws.configPath, 'utf8')) as Record<string, unknown>;

    const pods: Array<{ run: Running; port: number }> = [];
    for (const i of [1, 2, 3]) {
      const port = await freePort();
      const configPath = path.join(ws.dir, `pod-${i}.yaml`);
      writeFileSync(configPath, YAML.stringify({ ...base, metrics: { port } }));
      const run = spawnCli(['run', '-c', configPath], { env: { CRONSAFE_JOB_NAME: 'streak-job-1' } });
      // One at a time, so that each pod joins the pass the first one started.
      await run.waitFor((l) => l.msg === 'run started');
      pods.push({ run, port });
    }

    for (const { port } of pods) {
      const s = await scrape(`http://127.0.0.1:${port}`);
      expect(value(s, 'cronsafe_consecutive_failed_runs', { job: 'test-job' }), `pod on port ${port}`).toBe(0);
    }

    writeFileSync(path.join(ws.dir, 'gate'), '');
    for (const { run } of pods) {
      const { code } = await run.exited;
      expect(code, run.stderr()).toBe(0);
      expect(run.lines.find((l) => l.msg === 'run finished')).toMatchObject({ outcome: 'completed' });
    }
  }, 60_000);
});
