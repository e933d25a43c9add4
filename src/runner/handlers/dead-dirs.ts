import { closeSync, constants, lstatSync, openSync, readdirSync, rmSync, type Dirent } from 'node:fs';
import path from 'node:path';
import { flockSync } from '../../flock.js';

/** Older than this, a directory nobody holds is a killed run's (a fresh one is held within milliseconds). */
const DEAD_AFTER_MS = 60_000;

/** An open, flocked descriptor of `dir` (the kernel lets go if the process dies), or undefined where flock is refused. */
export function holdDir(dir: string): number | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    flockSync(fd, 'exnb');
    return fd;
  } catch {
    if (fd !== undefined) closeSync(fd);
    return undefined;
  }
}

/**
 * Remove the directories in `dir` (TMPDIR) that runs killed with SIGKILL (the OOM killer, a
 * stop that kills a whole cgroup) left behind: named `name` (as mkdtemp names ours), of our
 * uid, older than a minute, held by nobody (a live run holds each of its own with flock,
 * whichever job it runs), and holding only entries `ours` accepts: anything else is someone's
 * directory that only looks like ours, and not ours to remove. Best effort: what cannot be
 * looked at or locked (flock refused, as on NFS) is left alone.
 */
export function removeDeadDirs(dir: string, name: RegExp, ours: (entry: Dirent) => boolean): void {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => name.test(n));
  } catch {
    return;
  }
  const uid = process.getuid?.();
  for (const n of names) {
    const p = path.join(dir, n);
    try {
      const st = lstatSync(p);
      if (!st.isDirectory() || st.uid !== uid || Date.now() - st.mtimeMs < DEAD_AFTER_MS) continue;
      const fd = holdDir(p);
      if (fd === undefined) continue; // live (held), or no flock here
      try {
        if (!readdirSync(p, { withFileTypes: true }).every(ours)) continue;
        rmSync(p, { recursive: true, force: true }); // links are removed, never followed
      } finally {
        closeSync(fd);
      }
    } catch {
      // Gone meanwhile, or not ours to remove: left alone.
    }
  }
}
