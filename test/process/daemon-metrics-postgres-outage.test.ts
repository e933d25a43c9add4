/**
 * `cronsafe daemon` with `metrics.port` on PostgreSQL, the database down between passes. A
 * scrape read the ledger, whose reads retry for up to 30 s: it answered after 5 to 30 s, past
 * Prometheus's scrape timeout (10 s by default), so the target was down (`up == 0`) for the
 * whole outage instead of showing the last values read (docs/metrics.md).
 */
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';
import { freePort, parseMetrics, value } from '../helpers/prom.js';
import { filesIn, until } from '../helpers/wait.js';

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

/**
 * Counters never go back. Between passes the daemon answered a scrape, with the ledger down,
 * with the last values its own between-passes reader had read: those of its last scrape
 * before the pass, older than what the pass had served since. Prometheus saw the counters drop
 * (a reset), and increase() counted each whole total again: CronsafeDeadLettersGrowing paged
 * for dead letters from long ago, CronsafeRepeatedOverruns for old overruns.
 */
describe.skipIf(PG_SKIP_REASON !== undefined)('cronsafe daemon with metrics.port, PostgreSQL down just after a pass', () => {
  const db = usePostgresDatabase('daemon_metrics_after_pass');

  it('a scrape after the pass shows what the pass served, not the older values read before it', async () => {
    const port = await freePort();
    // One pass at start (a yearly occurrence long past, never stale), then passes on new files.
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'handlers/module-gated.mjs') },
        state: { postgres: db.url },
        retry: { maxAttempts: 1, backoffSeconds: 1, backoffMaxSeconds: 1 },
        schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' },
        daemon: { tickSeconds: 1, growth: { enabled: true, cooldownSeconds: 0 } },
        metrics: { port },
      },
      { 'ok-1.txt': 'a' },
    );
    const gate = path.join(ws.dir, 'gate');
    writeFileSync(gate, '');
    const url = `http://127.0.0.1:${port}/metrics`;
    const deadLettered = async (): Promise<number> => {
      const res = await fetch(url, { signal: AbortSignal.timeout(9_000) });
      return value(parseMetrics(await res.text()), 'cronsafe_dead_lettered_total', { job: 'test-job' });
    };
    const finishedRuns = (d: { lines: { msg: string }[] }) => d.lines.filter((l) => l.msg === 'run finished').length;
    const daemon = spawnCli(['daemon', '-c', ws.configPath], { timeoutMs: 60_000 });
    let halted = false;
    try {
      await daemon.waitFor((l) => l.msg === 'run finished' && l.outcome === 'completed', 30_000);
      expect(await deadLettered()).toBe(0); // read between passes
      // A pass with a dead letter, held open by ok-2 until the gate is back.
      rmSync(gate);
      writeFileSync(path.join(ws.source, 'bad-1.txt'), 'x');
      writeFileSync(path.join(ws.source, 'ok-2.txt'), 'x');
      await daemon.waitFor((l) => l.msg === 'item dead-lettered', 30_000);
      await until(() => filesIn(path.join(ws.dir, 'markers')).some((f) => f.endsWith('ok-2.txt.started')), 'ok-2 started');
      expect(await deadLettered()).toBe(1); // scraped during the pass
      const before = finishedRuns(daemon);
      writeFileSync(gate, '');
      await until(() => finishedRuns(daemon) > before, 'the pass finished');
      await db.server.halt();
      halted = true;
      expect(await deadLettered()).toBe(1);
    } finally {
      if (halted) await db.server.start();
      daemon.child.kill('SIGTERM');
    }
    expect((await daemon.exited).code).toBe(0);
  }, 60_000);
});
