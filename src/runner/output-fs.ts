import { constants, lstatSync } from 'node:fs';
import { lstat, open, readdir, type FileHandle } from 'node:fs/promises';
import { fcntlSync } from '../flock.js';
import { chmodSame } from './own-dir.js';
import { HandlerFailure } from './types.js';
import path from 'node:path';

// File system probes the output store needs beyond plain reads and renames.

/**
 * Whether this process sees real birth times. Where statx(2) is refused (old kernels,
 * strict seccomp profiles) Node fills the birth time in from the ctime, which chmod, links
 * and touch move, so it proves nothing; then every file reads birth == ctime. A directory
 * that has had entries added since it was made (the output directory), or any file written
 * after its creation, shows the two apart when birth times are real. Asked once, lazily:
 * only crash recovery needs it.
 */
export function realBirthTimes(paths: readonly string[]): boolean {
  for (const p of paths) {
    const st = lstatSync(p, { throwIfNoEntry: false });
    if (st && st.birthtimeMs > 0 && st.birthtimeMs !== st.ctimeMs) return true;
  }
  return false;
}

/** The newest mtime of an entry and, for a directory, of what is directly in it; null if gone. */
export async function newestMtimeMs(entry: string): Promise<number | null> {
  try {
    const st = await lstat(entry);
    let newest = st.mtimeMs;
    if (st.isDirectory()) {
      for (const name of await readdir(entry)) {
        const child = await lstat(path.join(entry, name)).catch(() => null);
        if (child) newest = Math.max(newest, child.mtimeMs);
      }
    }
    return newest;
  } catch {
    return null;
  }
}

/**
 * fsync a file or directory; read-only open is enough on Linux and works for 0444 files.
 * A handler may leave its output write-only (0200: `umask 0577`, `install -m 0200`), which
 * its own user (not root) cannot open for reading: then write-only, without O_TRUNC, which
 * fsync takes as well. Before, the refused open failed the attempt and charged the item
 * for the handler's finished output. `ownFile`: one of cronsafe's own temp files, which may
 * also have no rights for its owner at all (openWithoutRights). `noWriters`: refuse (a
 * HandlerFailure) a file another process still has open for writing (writtenElsewhere).
 */
export async function fsyncPath(p: string, ownFile = false, noWriters = false): Promise<void> {
  let readOnly = true;
  const fh = await open(p, 'r').catch(async (err: unknown) => {
    if ((err as NodeJS.ErrnoException).code !== 'EACCES') throw err;
    readOnly = false;
    try {
      return await open(p, constants.O_WRONLY);
    } catch {
      if (ownFile) {
        const fh = await openWithoutRights(p);
        readOnly = true;
        if (fh) return fh;
      }
      throw err; // the first refusal says what was wrong
    }
  });
  try {
    await fh.sync();
    if (noWriters && readOnly && writtenElsewhere(fh.fd)) {
      throw new HandlerFailure(`the handler exited, but a process it left outside its session (started with setsid) still has its output open for writing: not committed, as that process could change the output after its commit (${p})`);
    }
  } finally {
    await fh.close();
  }
}

/** Linux's F_SETLEASE and lease types (asm-generic/fcntl.h). */
const F_SETLEASE = 1024;
const F_RDLCK = 0;
const F_UNLCK = 2;

/**
 * Whether another open file description may still write the file of `fd` (open read-only
 * by us): the kernel refuses a read lease with EAGAIN while one is open for writing. A
 * handler's background writer that left its session (`setsid`) is not ended with the
 * handler's group, and appended to the output after its commit (a "done" output that
 * changed under its readers). Where leases are refused for another reason (disabled,
 * a file system without them, a file of another user's), nothing is known: false.
 */
function writtenElsewhere(fd: number): boolean {
  try {
    fcntlSync(fd, F_SETLEASE, F_RDLCK);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EAGAIN';
  }
  fcntlSync(fd, F_SETLEASE, F_UNLCK);
  return false;
}

/**
 * Open a regular file of this user's that grants its owner neither read nor write (mode 000:
 * a handler's `chmod 0`, `install -m 0`), for fsyncPath: its owner may give itself read
 * right, open it, and take the right back at once, leaving the mode the handler chose (the
 * descriptor stays good). Null when the file is not ours to do that to. Before, the refused
 * open failed the attempt, and the item was dead-lettered for an output its handler had
 * finished. Only for cronsafe's own temp files (OutputStore.commit).
 */
async function openWithoutRights(p: string): Promise<FileHandle | null> {
  const st = await lstat(p).catch(() => undefined);
  if (!st?.isFile() || st.uid !== process.geteuid?.()) return null;
  if (!chmodSame(p, st, (st.mode & 0o7777) | 0o400)) return null;
  try {
    const fh = await open(p, constants.O_RDONLY | constants.O_NOFOLLOW);
    const now = await fh.stat().catch(() => undefined);
    if (now?.dev === st.dev && now.ino === st.ino) return fh;
    await fh.close();
    return null; // replaced meanwhile: not the file to sync
  } catch {
    return null;
  } finally {
    chmodSame(p, st, st.mode & 0o7777);
  }
}
