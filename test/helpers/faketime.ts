/**
 * A CLI whose clock runs fast, for daemon and schedule tests: libfaketime preloaded into
 * node itself (the `faketime` wrapper does not pass signals on, so a SIGTERM to it would
 * leave node running). Tests skip where the library is not installed.
 */
import { existsSync } from 'node:fs';
import { expect } from 'vitest';
import { CLI, spawnCliRaw, type LogLine } from './cli.js';

export const LIBFAKETIME = ['/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1', '/usr/lib/faketime/libfaketime.so.1'].find((p) => existsSync(p));

/**
 * `cronsafe <args>` with a clock that starts at `start` (UTC, `YYYY-MM-DD hh:mm:ss`) and
 * runs `rate` times as fast, 60x unless told: a daemon's 30 s tick every half real second.
 */
export function spawnFastCli(args: string[], start: string, opts: { env?: Record<string, string>; timeoutMs?: number; rate?: number } = {}) {
  return spawnCliRaw(process.execPath, [CLI, ...args], { env: { LD_PRELOAD: LIBFAKETIME!, FAKETIME: `@${start} x${opts.rate ?? 60}`, ...opts.env }, timeoutMs: opts.timeoutMs ?? 60_000 });
}

/**
 * A fast daemon whose first pass of the day's occurrence (2026-06-01, cron `0 0 * * *`) ends
 * `firstOutcome` and is run again once, completing; then stopped (exit 0). The first pass's
 * `run finished` line and the daemon's `running it again` line.
 */
export async function passRunAgain(daemon: ReturnType<typeof spawnFastCli>, firstOutcome: string): Promise<{ first: LogLine; again: LogLine }> {
  let first: LogLine;
  let again: LogLine;
  try {
    first = await daemon.waitFor((l) => l.msg === 'run finished', 30_000);
    expect(first.outcome).toBe(firstOutcome);
    again = await daemon.waitFor((l) => l.msg === 'daemon: the pass of this occurrence failed; running it again', 30_000);
    const second = await daemon.waitFor((l) => l.msg === 'run finished' && l !== first, 30_000);
    expect(second.outcome).toBe('completed');
  } finally {
    daemon.child.kill('SIGTERM');
  }
  expect((await daemon.exited).code, daemon.stderr()).toBe(0);
  expect(again).toMatchObject({ occurrence: '2026-06-01T00:00:00.000Z', failures: 1 });
  return { first, again };
}
