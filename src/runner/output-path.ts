import { closeSync, constants, existsSync, fstatSync, lstatSync, mkdirSync, openSync, statSync } from 'node:fs';
import path from 'node:path';
import { DIR_MODE } from '../make-dirs.js';
import { PATH_MAX } from './item-id.js';

/**
 * Why an item's output cannot be written where its id puts it: a directory on the way is
 * a symbolic link (writing through it would leave output.directory), not a directory, or
 * another user's, or the output's own name is taken by a directory. The lexical check of the id cannot
 * see links, so the directories below output.directory are looked at with lstat, one
 * level at a time, and created the same way (a recursive mkdir would follow a link).
 */
export class OutputPathError extends Error {
  override name = 'OutputPathError';
}

/** The directories strictly between `root` and `final` (absolute; `final` inside `root`). */
function parentsBelow(root: string, final: string): string[] {
  const rel = path.relative(root, path.dirname(final));
  if (rel === '') return [];
  const out: string[] = [];
  let cur = root;
  for (const seg of rel.split(path.sep)) out.push((cur = path.join(cur, seg)));
  return out;
}

function problemAt(dir: string, st: import('node:fs').Stats, trustedUid: number | undefined): string | null {
  if (st.isSymbolicLink()) return `${dir} is a symbolic link; cronsafe never writes outputs through links (they could lead outside output.directory)`;
  if (!st.isDirectory()) return `${dir} is in the way: it is not a directory`;
  // Its owner may swap what is in it for a link at any instant, between our lstat of a
  // directory below it and the rename through it (Node has no renameat): another user who
  // may write in output.directory (a shared, sticky one) made `<out>/sub` before cronsafe
  // did, and cronsafe, run as root, renamed outputs into a directory of root's outside
  // output.directory. Trusted: cronsafe's user, root, and output.directory's owner (as for
  // cronsafe's own directories, own-dir.ts).
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid && st.uid !== 0 && st.uid !== trustedUid) {
    return `${dir} is owned by uid ${st.uid}, another user (not cronsafe's, output.directory's owner or root), who could swap what is in it for a link; cronsafe never writes outputs into another user's directory`;
  }
  return null;
}

/**
 * The problem with writing `final` (below `root`), or null. Reads only: missing
 * directories are fine (commit creates them). The pass can ask before running a handler.
 */
export function outputPathProblem(root: string, final: string, trustedUid?: number): string | null {
  // Past PATH_MAX no call can reach it (the lstat below would throw ENAMETOOLONG).
  if (final.length * 3 >= PATH_MAX && Buffer.byteLength(final) >= PATH_MAX) {
    return `the output path is ${Buffer.byteLength(final)} bytes, longer than Linux allows (PATH_MAX, ${PATH_MAX} with its NUL): ${final.slice(0, 200)}...`;
  }
  for (const dir of parentsBelow(root, final)) {
    const st = lstatSync(dir, { throwIfNoEntry: false });
    if (st === undefined) return null;
    const problem = problemAt(dir, st, trustedUid);
    if (problem) return problem;
  }
  const st = lstatSync(final, { throwIfNoEntry: false });
  if (st?.isDirectory()) return `${final} is a directory`;
  if (st !== undefined && stickyRefuses(final, st.uid)) {
    return `${final} is another user's file (uid ${st.uid}) in a sticky directory (mode +t), which cronsafe's user (uid ${process.getuid?.()}) may not replace`;
  }
  return null;
}

/**
 * Whether a rename over `final`, a file owned by `owner`, is refused by its directory's sticky
 * bit (EPERM): another user's file in a shared output directory (mode 1777) that is neither
 * ours nor in a directory of ours. The rename of the item's output failed at every run, the
 * pass stopped (exit 1) at that item before the rest, and the message blamed the directory's
 * write permission. Root (CAP_FOWNER) may replace it.
 */
function stickyRefuses(final: string, owner: number): boolean {
  const me = process.getuid?.();
  if (me === undefined || me === 0 || owner === me) return false;
  const dir = statSync(path.dirname(final), { throwIfNoEntry: false });
  // 0o1000: S_ISVTX, which Node does not export.
  return dir !== undefined && (dir.mode & 0o1000) !== 0 && dir.uid !== me;
}

/**
 * Create the directories between `root` and `final` by path, refusing links, non-directories
 * and other users' directories (OutputPathError). Only without /proc (pinOutputPlace).
 */
function makeOutputParents(parents: readonly string[], trustedUid: number | undefined): void {
  for (const dir of parents) {
    let st = lstatSync(dir, { throwIfNoEntry: false });
    if (st === undefined) {
      try {
        mkdirSync(dir, DIR_MODE);
        continue;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        st = lstatSync(dir);
      }
    }
    const problem = problemAt(dir, st, trustedUid);
    if (problem) throw new OutputPathError(problem);
  }
}

/** Linux's O_PATH (asm-generic/fcntl.h). */
const O_PATH = 0o10000000;

/** Whether /proc/self/fd is there to pin a directory by (Linux with /proc mounted). */
let procFd: boolean | undefined;

/**
 * `final`'s parent directories made (refusing links, non-directories and other users'
 * directories: OutputPathError), and `final` reached through its parent held open, for the
 * rename that moves an output in: `/proc/self/fd/<fd>/<name>` names the directory opened,
 * whatever is at its path later. Node has no renameat or mkdirat: a directory below
 * output.directory swapped for a link between a look at it by path and the rename (by its
 * owner, which is trusted: cronsafe's user or output.directory's owner, while cronsafe runs as
 * root) had the output renamed through the link, and a directory made below it by path
 * (mkdir follows a link on the way) was made outside output.directory. Each level is opened
 * inside the one above it without following a link (O_NOFOLLOW), and made there when missing,
 * so the output, and every directory made for it, lands inside output.directory or not at
 * all. Null when `final` is directly in `root` (nothing below it to swap) or without /proc:
 * the parents are then made by path and the path itself is used.
 */
export function pinOutputPlace(root: string, final: string, trustedUid?: number): { path: string; close(): void } | null {
  const parents = parentsBelow(root, final);
  if (parents.length === 0) return null;
  if ((procFd ??= existsSync('/proc/self/fd')) === false) {
    makeOutputParents(parents, trustedUid);
    return null;
  }
  // O_PATH: a directory this user may search and write but not read (a drop box, mode 0733)
  // is opened too; the fd is only a place to look names up from. 0o10000000 on x86-64 and
  // arm64 (Node does not export it).
  let fd = openSync(root, O_PATH | constants.O_DIRECTORY);
  try {
    for (const dir of parents) {
      const next = openOrMakeBelow(fd, dir, trustedUid);
      closeSync(fd);
      fd = next;
    }
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  const held = fd;
  return { path: `/proc/self/fd/${held}/${path.basename(final)}`, close: () => closeSync(held) };
}

/** Directory `dir` opened (O_PATH) inside the directory held open as `fd`, made there first when missing. */
function openOrMakeBelow(fd: number, dir: string, trustedUid: number | undefined): number {
  const at = `/proc/self/fd/${fd}/${path.basename(dir)}`;
  let next: number;
  try {
    try {
      next = openLevel(at, dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      // mkdir makes its last name in the directory held open; a link there is EEXIST, opened (and refused) below.
      try {
        mkdirSync(at, DIR_MODE);
      } catch (made) {
        if ((made as NodeJS.ErrnoException).code !== 'EEXIST') throw made;
      }
      next = openLevel(at, dir);
    }
  } catch (err) {
    // Messages name the directory, not the descriptor it was reached by.
    namedAsPath(err, at, dir);
    throw err;
  }
  const problem = problemAt(dir, fstatSync(next), trustedUid);
  if (problem) {
    closeSync(next);
    throw new OutputPathError(problem);
  }
  return next;
}

/** `at` opened as a directory without following a link, or OutputPathError saying what `dir` is instead. */
function openLevel(at: string, dir: string): number {
  try {
    return openSync(at, O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch (err) {
    // A link there (with O_PATH, O_NOFOLLOW opens it, and O_DIRECTORY refuses it: ENOTDIR).
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ELOOP' && code !== 'ENOTDIR') throw err;
    const st = lstatSync(dir, { throwIfNoEntry: false });
    throw new OutputPathError((st && problemAt(dir, st, undefined)) ?? `${dir} is in the way: it is not a directory`);
  }
}

/**
 * `err` of a call given `pinned` (a /proc/self/fd path of pinOutputPlace's) told of `real`, the
 * path it stands for: the message and the paths an error names are the user's (`open
 * '<out>/sub'`), not a descriptor number of cronsafe's (`EMFILE: too many open files, open
 * '/proc/self/fd/34/sub'`, with `ulimit -n` low). A function gives the replacement: a `$` in an
 * id is no replacement pattern.
 */
export function namedAsPath(err: unknown, pinned: string, real: string): unknown {
  if (!(err instanceof Error)) return err;
  const e = err as NodeJS.ErrnoException & { dest?: string };
  e.message = e.message.replaceAll(pinned, () => real);
  if (e.path === pinned) e.path = real;
  if (e.dest === pinned) e.dest = real;
  return err;
}
