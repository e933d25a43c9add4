import { chmodSync, closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, readlinkSync, type Stats } from 'node:fs';
import { EdgeError, EXIT } from '../errors.js';
import { DIR_MODE } from '../make-dirs.js';

/**
 * cronsafe's own directories inside the output directory (the temp directory and each
 * run's directory in it) are used, emptied and recreated only when they are real
 * directories owned by this process's user. Anything else there (a symbolic link, a
 * file, someone else's directory) is refused: following a link would delete or write in
 * its target, which is not ours. Node has no openat/unlinkat, so these are lstat checks
 * just before each use, and callers re-check the inode before deleting anything in them.
 */
export class UnsafeOwnDirectory extends EdgeError {
  override name = 'UnsafeOwnDirectory';
  readonly exitCode = EXIT.FATAL;
  constructor(
    readonly dir: string,
    readonly problem: string,
  ) {
    super(
      `cronsafe's own directory ${dir} ${problem}: refusing to use it (nothing in it was deleted). ` +
        'It must be a real directory owned by the user cronsafe runs as; remove it and cronsafe recreates it.',
    );
  }
}

/** Identity of a checked directory: a later lstat with another dev/ino means it was replaced. */
export interface DirId {
  dev: number;
  ino: number;
}

/**
 * Why `st` (from lstat of `dir`) is not one of our own directories, or null when it is.
 * Ours: owned by cronsafe's uid, or by `trustedUid` (the owner of output.directory, which
 * the config already trusts: on NFS with root_squash, what root creates is owned by the
 * squashed uid, like the output directory itself).
 */
function problemOf(dir: string, st: Stats, trustedUid?: number): string | null {
  if (st.isSymbolicLink()) {
    let target = '';
    try {
      target = ` (to ${readlinkSync(dir)})`;
    } catch {
      /* gone again: the link itself is the problem */
    }
    return `is a symbolic link${target}`;
  }
  if (!st.isDirectory()) return 'exists but is not a directory';
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid && st.uid !== trustedUid) {
    return `is owned by uid ${st.uid}, not by cronsafe's uid ${uid}${trustedUid !== undefined && trustedUid !== uid ? ` nor by output.directory's owner (uid ${trustedUid})` : ''}`;
  }
  return null;
}

/**
 * Check `dir` is our own real directory, creating it (one level: its parent must be
 * checked already) when missing. Returns its identity; throws UnsafeOwnDirectory.
 * `trustedUid`: see problemOf.
 */
export function ensureOwnDir(dir: string, trustedUid?: number): DirId {
  let st = lstatSync(dir, { throwIfNoEntry: false });
  if (st === undefined) {
    try {
      // Not recursive: a recursive mkdir would follow a symlink higher up.
      mkdirSync(dir, DIR_MODE);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    st = lstatSync(dir);
  }
  const problem = problemOf(dir, st, trustedUid);
  if (problem) throw new UnsafeOwnDirectory(dir, problem);
  return { dev: st.dev, ino: st.ino };
}

/**
 * Give this user back its own rights (u+rwx) on `dir`, one of our own directories, when it is
 * this user's and lacks them (true when they were given back): a handler that took them from the directory its {output} is in
 * (`chmod 555 "$(dirname "$2")"`, a `tar -x` or `cp -a` there of a tree whose top is
 * read-only) made every later start fail (EACCES: cannot create or write in it), the job
 * stuck until someone gave them back by hand, and the item never charged. Another user's
 * directory (output.directory's owner) is left as it is: the start names it.
 */
export function ownerRightsBack(dir: string): boolean {
  const st = lstatSync(dir, { throwIfNoEntry: false });
  if (!st?.isDirectory() || st.uid !== process.geteuid?.() || (st.mode & 0o700) === 0o700) return false;
  // Refused (a read-only file system) or replaced meanwhile: the start's checks say why.
  return chmodSame(dir, st, (st.mode & 0o7777) | 0o700);
}

/**
 * Why `dir` is not one of our own directories now (a link, not a directory, another user's),
 * or null when it is, or is missing. Reads only (one lstat).
 */
export function ownDirProblem(dir: string, trustedUid?: number): string | null {
  const st = lstatSync(dir, { throwIfNoEntry: false });
  return st === undefined ? null : problemOf(dir, st, trustedUid);
}

/** Linux's O_PATH (the same on x86-64 and arm64): a descriptor naming an inode, needing no right on it. Node does not export it. */
const O_PATH = 0o10000000;

/**
 * chmod `p` to `mode` only while it is still the file `was` was lstat'ed from, never
 * following a symbolic link: between a look at one of our directories (or a handler's tree
 * in it) and the chmod, a process of this user (a handler's child left running) may put a
 * link there, and chmod(2) follows it: run as root, to /etc/passwd, which `| 0o700` made
 * executable. The entry is opened O_PATH | O_NOFOLLOW, checked to be that inode, and changed
 * through /proc/self/fd, as glibc's fchmodat(AT_SYMLINK_NOFOLLOW) does. True when changed;
 * false when replaced, or refused. Elsewhere than Linux, by path, as before.
 */
export function chmodSame(p: string | Buffer, was: Stats, mode: number): boolean {
  let fd: number | undefined;
  try {
    if (process.platform !== 'linux') {
      chmodSync(p, mode);
      return true;
    }
    fd = openSync(p, O_PATH | constants.O_NOFOLLOW);
    const now = fstatSync(fd);
    if (now.dev !== was.dev || now.ino !== was.ino || (now.mode & constants.S_IFMT) !== (was.mode & constants.S_IFMT)) return false;
    chmodSync(`/proc/self/fd/${fd}`, mode);
    return true;
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * True while `dir` is still the directory `id` was taken from (not removed, not replaced).
 * A directory on its way replaced by a file or a link loop (`rm -r out; cp report out`) is
 * no more the same than one removed: its lstat's ENOTDIR or ELOOP was thrown raw, which an
 * attempt's clean-up took for no finding, and the item was charged for the environment.
 */
export function sameDir(dir: string, id: DirId): boolean {
  let st: Stats | undefined;
  try {
    st = lstatSync(dir, { throwIfNoEntry: false });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTDIR' || code === 'ELOOP') return false;
    throw err;
  }
  return st !== undefined && st.isDirectory() && st.dev === id.dev && st.ino === id.ino;
}
