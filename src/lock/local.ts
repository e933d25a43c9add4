import { closeSync, mkdirSync, openSync, ftruncateSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

// fs-ext is CommonJS with no types; flock(2) is what we need from it.
const require = createRequire(import.meta.url);
const { flockSync } = require('fs-ext') as { flockSync(fd: number, flags: 'exnb' | 'un'): void };

/** A held run lock. The kernel drops it if the process dies, so there is never a stale lock. */
export interface LocalLock {
  readonly path: string;
  release(): void;
}

/**
 * Try to take the exclusive run lock without blocking. Returns null when another process
 * holds it. flock(2) on an open descriptor: released by the kernel when the holder dies
 * (SIGKILL, OOM), compatible with `flock(1)` in shell scripts, and not inherited by
 * handler children because Node opens files with O_CLOEXEC.
 */
export function tryLock(lockPath: string, holder: string): LocalLock | null {
  mkdirSync(path.dirname(lockPath), { recursive: true });
  const fd = openSync(lockPath, 'a+');
  try {
    flockSync(fd, 'exnb');
  } catch (err) {
    closeSync(fd);
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EAGAIN' || code === 'EWOULDBLOCK') return null;
    throw err;
  }
  // Informative only (who holds it); the lock itself is the flock, not the contents.
  try {
    ftruncateSync(fd, 0);
    writeSync(fd, `${holder}\n`);
  } catch {
    /* a read-only lock file still locks */
  }
  let released = false;
  return {
    path: lockPath,
    release() {
      if (released) return;
      released = true;
      try {
        flockSync(fd, 'un');
      } finally {
        closeSync(fd);
      }
    },
  };
}
