/**
 * `cronsafe daemon` with `metrics.port`: a process that stays up for days, scraped by a static
 * Prometheus target. Its /metrics was served only while a pass ran (each pass opened the port
 * and closed it at its end), so between passes the target was down: Prometheus saw `up == 0`
 * nearly all the time and the ledger's series (dead letters, last success, overruns) absent,
 * and no alert on them could fire. The daemon now serves the port for its whole life: the
 * pass's metrics while one runs, the ledger's between passes.
 */
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, spawnCli, workspace } from '../helpers/cli.js';
import { freePort, parseMetrics, value } from '../helpers/prom.js';
import { filesIn, until } from '../helpers/wait.js';

const SLOW = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];

describe('cronsafe daemon with metrics.port', () => {
  it('serves /metrics between passes too, with the ledger totals of the passes so far', async () => {
    const port = await freePort();
    // A yearly occurrence long past (no graceSeconds: never stale): one pass at start, then idle.
    const ws = workspace(
      {
        handler: { command: SLOW },
        concurrency: 1,
        schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' },
        daemon: { tickSeconds: 1 },
        metrics: { port },
      },
      { 'a.scc': 'a' },
    );
    const markers = path.join(ws.dir, 'markers');
    const url = `http://127.0.0.1:${port}/metrics`;
    const daemon = spawnCli(['daemon', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '3000' }, timeoutMs: 60_000 });
    try {
      await until(() => filesIn(markers).length === 1, 'the pass to start its handler');
      const during = parseMetrics(await (await fetch(url)).text());
      expect(value(during, 'cronsafe_in_flight_items', { job: 'test-job' })).toBe(1);

      await daemon.waitFor((l) => l.msg === 'run finished' && l.outcome === 'completed', 30_000);
      // The pass is over and the daemon idles until next year's occurrence.
      const res = await fetch(url).catch((err: unknown) => err as Error);
      expect(res instanceof Error ? `cannot scrape: ${String(res.cause ?? res)}` : res.status).toBe(200);
      const idle = parseMetrics(await (res as Response).text());
      expect(value(idle, 'cronsafe_runs_total', { job: 'test-job', outcome: 'completed' })).toBe(1);
      expect(value(idle, 'cronsafe_items', { job: 'test-job', state: 'done' })).toBe(1);
      expect(value(idle, 'cronsafe_in_flight_items', { job: 'test-job' })).toBe(0);
      expect(value(idle, 'cronsafe_last_success_timestamp_seconds', { job: 'test-job' })).toBeGreaterThan(0);
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    } finally {
      daemon.child.kill('SIGTERM');
    }
    expect((await daemon.exited).code).toBe(0);
    // Stopped, it lets the port go.
    expect(await fetch(url).then(() => 'still served', () => 'closed')).toBe('closed');
    expect(daemon.lines.filter((l) => String(l.msg).startsWith('metrics') && l.level !== 'info' && l.level !== 'debug')).toEqual([]);
  });

  it('metrics.port held when it starts (a `cronsafe run` by hand serving it): one warning, no stack, not one per pass; served once free, between passes too', async () => {
    const port = await freePort();
    // Another process holds the port, as a manual run with the same config does while it runs.
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(port, resolve));
    const ws = workspace(
      {
        handler: { command: ['true'] },
        schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' },
        daemon: { tickSeconds: 1, growth: { enabled: true, cooldownSeconds: 0 } },
        metrics: { port },
      },
      { 'a.txt': 'a' },
    );
    const daemon = spawnCli(['daemon', '-c', ws.configPath], { timeoutMs: 60_000 });
    const finished = () => daemon.lines.filter((l) => l.msg === 'run finished' && l.outcome === 'completed').length;
    try {
      await daemon.waitFor((l) => l.msg === 'metrics: cannot serve /metrics on this port; carrying on without it', 30_000);
      // Its first pass (last year's occurrence) is over; a new file brings a second pass
      // (growth), the port still held. Then the daemon idles until next year's occurrence.
      await until(() => finished() === 1, 'the first pass', 30_000);
      writeFileSync(path.join(ws.source, 'b.txt'), 'b');
      await until(() => finished() === 2, 'the second pass (growth)', 30_000);
      await new Promise<void>((resolve) => holder.close(() => resolve()));
      // Before, it never tried again: the port was served only during its passes, a year apart.
      await daemon.waitFor((l) => l.msg === 'metrics: metrics.port is free now; serving /metrics between passes too', 20_000);
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect(res.status).toBe(200);
      expect(value(parseMetrics(await res.text()), 'cronsafe_runs_total', { job: 'test-job', outcome: 'completed' })).toBe(2);
    } finally {
      daemon.child.kill('SIGTERM');
      holder.close();
    }
    expect((await daemon.exited).code).toBe(0);
    // Tried at every tick and by each pass while held: warned once, at the start, with the
    // system's answer and no stack trace. Before, each pass warned again with a full stack.
    const warned = daemon.lines.filter((l) => l.level === 'warn' && l.msg === 'metrics: cannot serve /metrics on this port; carrying on without it');
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ port, code: 'EADDRINUSE' });
    expect(warned[0]!.err).toBeUndefined();
    expect(String(warned[0]!.error)).toContain('EADDRINUSE');
  });
});
