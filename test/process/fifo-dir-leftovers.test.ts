/**
 * A command handler's stdout and stderr are FIFOs in a `cronsafe-io-*` directory under
 * TMPDIR, made by the helper that forks the handlers (spawn-server.ts). The helper removes
 * it when cronsafe dies alone, cronsafe when the helper dies; but a kill of both at once
 * (the OOM killer or a stop that kills the whole cgroup, systemd's final SIGKILL) left it
 * for good: on a host's /tmp (plain cron, a systemd timer) one more per killed run. Now a
 * later run removes the ones nobody holds, and never one a live run is using.
 */
import { mkdirSync, mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, spawnCli, workspace } from '../helpers/cli.js';
import { killTree } from '../helpers/proc.js';
import { filesIn, until } from '../helpers/wait.js';

const fifoDirs = (dir: string) => filesIn(dir).filter((n) => n.startsWith('cronsafe-io-'));
/** Two minutes old: past the minute a fresh directory is spared. */
const age = (dir: string) => {
  const then = new Date(Date.now() - 120_000);
  for (const n of fifoDirs(dir)) utimesSync(path.join(dir, n), then, then);
};

/** A job whose one item's handler touches `marker` and then blocks until killed. */
const blockedJob = (name: string, marker: string) =>
  workspace({ name, handler: { command: ['/bin/sh', '-c', 'touch "$0"; exec sleep 60', marker] } }, { 'a.txt': 'a' });

describe('TMPDIR FIFO directories of killed runs', () => {
  it('a run killed with its helpers leaves one; the next run removes it, and spares a live run, a fresh one and look-alikes', async () => {
    const tmp = mkdtempSync(path.join(tmpdir(), 'cronsafe-tmpdir-'));
    const env = { TMPDIR: tmp };

    // A run killed during its attempt, with everything it started (a cgroup's SIGKILL).
    const a = blockedJob('job-a', path.join(tmp, 'killed-started'));
    const first = spawnCli(['run', '-c', a.configPath], { env });
    await until(() => filesIn(tmp).includes('killed-started'), 'the first attempt to start');
    killTree(first.child.pid!);
    await first.exited;
    expect(fifoDirs(tmp)).toHaveLength(1);
    const dead = fifoDirs(tmp)[0]!;

    // A live run of another job, whose directory is as old.
    const b = blockedJob('job-b', path.join(tmp, 'live-started'));
    const other = spawnCli(['run', '-c', b.configPath], { env });
    try {
      await until(() => filesIn(tmp).includes('live-started'), 'the live attempt to start');
      const held = fifoDirs(tmp).find((n) => n !== dead)!;
      expect(held).toBeDefined();
      // Directories that only look like a killed run's: a user's, and one with a file in it.
      const notes = path.join(tmp, 'cronsafe-io-notes');
      const lookalike = path.join(tmp, 'cronsafe-io-Ab12Cd');
      for (const d of [notes, lookalike]) {
        mkdirSync(d);
        writeFileSync(path.join(d, 'keep.txt'), 'mine\n');
      }
      age(tmp);
      mkdirSync(path.join(tmp, 'cronsafe-io-Fresh1'));

      // A later run (of any job) with a command handler, in that TMPDIR.
      const c = workspace({ name: 'job-c', handler: { command: ['/bin/sh', '-c', 'echo done'] } }, { 'c.txt': 'c' });
      const next = await runCli(['run', '-c', c.configPath], { env });
      expect(next.code, next.stderr).toBe(0);
      // Before: the killed run's directory stayed.
      expect(fifoDirs(tmp).sort()).toEqual([held, 'cronsafe-io-Ab12Cd', 'cronsafe-io-Fresh1', 'cronsafe-io-notes'].sort());
      expect(filesIn(lookalike)).toEqual(['keep.txt']);
      expect(filesIn(notes)).toEqual(['keep.txt']);
    } finally {
      killTree(other.child.pid!);
      await other.exited;
    }
  }, 40_000);
});
