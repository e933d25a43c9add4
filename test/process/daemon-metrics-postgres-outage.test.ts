/**
 * `cronsafe daemon` with `metrics.port` on PostgreSQL, the database down between passes. A
 * scrape read the ledger, whose reads retry for up to 30 s: it answered after 5 to 30 s, past
 * Prometheus's scrape timeout (10 s by default), so the target was down (`up == 0`) for the
 * whole outage instead of showing the last values read (docs/metrics.md).
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';
import { freePort, parseMetrics, value } from '../helpers/prom.js';

describe.skipIf(PG_SKIP_REASON !== undefined)('cronsafe daemon with metrics.port, PostgreSQL down between passes', () => {
  const db = usePostgresDatabase('daemon_metrics_outage');

  it('a scrape answers within a scrape timeout, with the last values read', async () => {
    const port = await freePort();
    // A yearly occurrence long past (no graceSeconds: never stale): one pass at start, then idle.
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') },
        state: { postgres: db.url },
        schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' },
        daemon: { tickSeconds: 1 },
        metrics: { port },
      },
      { 'a.txt': 'a' },
    );
    const url = `http://127.0.0.1:${port}/metrics`;
    const daemon = spawnCli(['daemon', '-c', ws.configPath], { timeoutMs: 60_000 });
    let halted = false;
    try {
      await daemon.waitFor((l) => l.msg === 'run finished' && l.outcome === 'completed', 30_000);
      expect(value(parseMetrics(await (await fetch(url)).text()), 'cronsafe_items', { job: 'test-job', state: 'done' })).toBe(1);
      await db.server.halt();
      halted = true;
      for (let i = 0; i < 2; i++) {
        const res = await fetch(url, { signal: AbortSignal.timeout(9_000) }).catch((err: unknown) => err as Error);
        expect(res instanceof Error ? `no answer within 9 s: ${String(res)}` : res.status).toBe(200);
        const shown = parseMetrics(await (res as Response).text());
        expect(value(shown, 'cronsafe_items', { job: 'test-job', state: 'done' })).toBe(1);
        expect(value(shown, 'cronsafe_runs_total', { job: 'test-job', outcome: 'completed' })).toBe(1);
      }
    } finally {
      if (halted) await db.server.start();
      daemon.child.kill('SIGTERM');
    }
    expect((await daemon.exited).code).toBe(0);
  }, 60_000);
});
