/**
 * The state directory removed while the run holding it is paused (SIGSTOP: a debugger, a
 * frozen cgroup, a long stall under memory pressure): the holder locks its recreated lock
 * file again only at its next recheck (every second, while it runs). A start in between
 * finds no lock file and an empty ledger, takes both flocks and runs the same items beside
 * the first run, which docs/operations.md ("so no second run starts beside it") rules out.
 * Pausing the holder makes the window certain instead of a race with the recheck.
 *
 * The ledger's name lock (src/ledger/sqlite/name-lock.ts: an abstract unix socket, which
 * no file removal can free) closes that window: the start finds it held and skips.
 */
import { rmSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, FIXTURES, finished, runCli, spawnCli, workspace } from '../helpers/cli.js';
import { filesIn, until } from '../helpers/wait.js';

const SLOW = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];

describe('the whole state directory removed while its run is paused', () => {
  it('a start meanwhile skips: no second run processes the items at the same time', async () => {
    const files = Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`s${i}.txt`, `s${i}`]));
    const ws = workspace({ handler: { command: SLOW }, concurrency: 2, log: { level: 'info' } }, files);
    const markers = path.join(ws.dir, 'markers');
    const env = { MARKER_DIR: markers, SLOW_MS: '3000' };
    const first = spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 60_000 });
    try {
      await until(() => filesIn(markers).length === 2, 'the first run to start two handlers');
      first.child.kill('SIGSTOP');
      rmSync(ws.state, { recursive: true, force: true, maxRetries: 20, retryDelay: 5 });
      const second = await runCli(['run', '-c', ws.configPath], { env, timeoutMs: 60_000 });
      first.child.kill('SIGCONT');
      expect(second.code, second.stderr).toBe(0);
      expect(finished(second)?.outcome).toBe('skipped-locked');
      // It says why, since the lock file it names was free.
      expect(second.lines.some((l) => String(l.msg).startsWith('another run of this ledger holds its name lock'))).toBe(true);
      // Only the first run's two attempts ever started.
      expect(filesIn(markers)).toHaveLength(2);
    } finally {
      first.child.kill('SIGCONT');
      await first.exited;
    }
  }, 90_000);
});

describe('the whole state directory removed in the last second of a run', () => {
  // Removed by the last item's handler, so the pass ends before the once-a-second recheck:
  // the run said `completed`, exit 0, of a ledger that no longer existed (the next run starts
  // a new one and does the items again). docs/operations.md: it stops, exit 75.
  it('ends drained (exit 75) saying the ledger was removed, not completed', async () => {
    const ws = workspace({ handler: { command: ['true'] }, log: { level: 'info' } }, { 'a.txt': 'a' });
    configure(ws, { handler: { command: ['sh', '-c', 'rm -rf "$0"', ws.state] } });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(75);
    expect(finished(r)?.outcome).toBe('drained');
    expect(r.lines.some((l) => String(l.reason).includes('was removed or replaced during the run'))).toBe(true);
  });
});

describe('the state directory replaced by a file while the run goes on', () => {
  // The recheck's stat of the ledger then fails with ENOTDIR, which statSync throws even
  // with throwIfNoEntry: false: thrown in the recheck's timer, it crashed the run with a
  // stack trace, exit 1. It is the ledger gone, as a removed directory is: exit 75.
  it('ends drained (exit 75) saying the ledger was removed, without a stack trace', async () => {
    const ws = workspace({ handler: { command: ['true'] }, log: { level: 'info' } }, { 'a.txt': 'a' });
    configure(ws, { handler: { command: ['sh', '-c', 'rm -rf "$0" && touch "$0" && sleep 2.5', ws.state] } });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.stderr).not.toContain('ENOTDIR');
    expect(r.code, r.stderr).toBe(75);
    expect(finished(r)?.outcome).toBe('drained');
    expect(r.lines.some((l) => String(l.reason).includes('was removed or replaced during the run'))).toBe(true);
  });
});
