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

/**
 * SIGTERM to a fast daemon, and its exit code, checked against what it says it did. At x60 a
 * schedule of every minute starts a pass every real second, back to back on a loaded machine
 * (a pass there takes fake minutes): the signal may land in one, and that is no race to wait
 * out but the contract (docs/schedule.md): a pass it stopped is drained as by `cronsafe run`
 * (`run finished` drained, `daemon stopped` result `drained`, exit 75); between passes, or a
 * pass that had finished anyway, `daemon stopped` result `stopped`, exit 0.
 */
export async function stopFastDaemon(daemon: ReturnType<typeof spawnFastCli>): Promise<{ code: number | null; drained: boolean }> {
  daemon.child.kill('SIGTERM');
  const { code, signal } = await daemon.exited;
  const out = `${daemon.stderr()}\n${daemon.lines.map((l) => l.msg).join('\n')}`;
  expect(signal, out).toBeNull();
  const stopped = daemon.lines.filter((l) => l.msg === 'daemon stopped');
  expect(stopped, out).toHaveLength(1);
  expect(stopped[0], out).toMatchObject({ signal: 'SIGTERM' });
  const drained = stopped[0]!.result === 'drained';
  if (drained) {
    const last = daemon.lines.filter((l) => l.msg === 'run finished').at(-1);
    expect(last, out).toMatchObject({ outcome: 'drained', exitCode: 75, reason: 'SIGTERM' });
    expect(daemon.lines.indexOf(last!), out).toBeLessThan(daemon.lines.indexOf(stopped[0]!));
  } else {
    expect(stopped[0]!.result, out).toBe('stopped');
  }
  expect(code, out).toBe(drained ? 75 : 0);
  return { code, drained };
}
