/**
 * `cronsafe run` with `metrics.port` on PostgreSQL, the database down while the pass runs (its
 * handlers go on). A scrape read the ledger, whose reads retry for up to 30 s (and, first,
 * added the handler times observed, a write that retries as long): it answered after 30 s or
 * more, past Prometheus's scrape timeout (10 s by default), so the pod's target was down
 * (`up == 0`) for the whole outage instead of showing the last values read, as the daemon
 * between passes does (docs/metrics.md).
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';
import { freePort, parseMetrics, value } from '../helpers/prom.js';
import { filesIn, until } from '../helpers/wait.js';

const SLOW = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];

describe.skipIf(PG_SKIP_REASON !== undefined)('cronsafe run with metrics.port, PostgreSQL down while the pass runs', () => {
  const db = usePostgresDatabase('run_metrics_outage');

  it('a scrape answers within a scrape timeout, with the last values read', async () => {
    const port = await freePort();
    const ws = workspace({ handler: { command: SLOW }, concurrency: 1, state: { postgres: db.url }, metrics: { port } }, { 'a.txt': 'a' });
    const markers = path.join(ws.dir, 'markers');
    const url = `http://127.0.0.1:${port}/metrics`;
    const run = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '20000' }, timeoutMs: 90_000 });
    let halted = false;
    try {
      await until(() => filesIn(markers).length === 1, 'the handler to start');
      expect(value(parseMetrics(await (await fetch(url)).text()), 'cronsafe_items', { job: 'test-job', state: 'claimed' })).toBe(1);
      await db.server.halt();
      halted = true;
      for (let i = 0; i < 2; i++) {
        const res = await fetch(url, { signal: AbortSignal.timeout(9_000) }).catch((err: unknown) => err as Error);
        expect(res instanceof Error ? `no answer within 9 s: ${String(res)}` : res.status).toBe(200);
        const shown = parseMetrics(await (res as Response).text());
        expect(value(shown, 'cronsafe_items', { job: 'test-job', state: 'claimed' })).toBe(1);
        expect(value(shown, 'cronsafe_in_flight_items', { job: 'test-job' })).toBe(1);
      }
    } finally {
      if (halted) await db.server.start();
      run.child.kill('SIGTERM');
    }
    await run.exited;
  }, 90_000);
});
