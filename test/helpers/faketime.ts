/**
 * A CLI whose clock runs fast, for daemon and schedule tests: libfaketime preloaded into
 * node itself (the `faketime` wrapper does not pass signals on, so a SIGTERM to it would
 * leave node running). Tests skip where the library is not installed.
 */
import { existsSync } from 'node:fs';
import { CLI, spawnCliRaw } from './cli.js';

export const LIBFAKETIME = ['/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1', '/usr/lib/faketime/libfaketime.so.1'].find((p) => existsSync(p));

/**
 * `cronsafe <args>` with a clock that starts at `start` (UTC, `YYYY-MM-DD hh:mm:ss`) and
 * runs 60x: a daemon's 30 s tick every half real second.
 */
export function spawnFastCli(args: string[], start: string, opts: { env?: Record<string, string>; timeoutMs?: number } = {}) {
  return spawnCliRaw(process.execPath, [CLI, ...args], { env: { LD_PRELOAD: LIBFAKETIME!, FAKETIME: `@${start} x60`, ...opts.env }, timeoutMs: opts.timeoutMs ?? 60_000 });
}
