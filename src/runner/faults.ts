import { accessSync, constants as fsConstants, lstatSync, statSync } from 'node:fs';
import path from 'node:path';
import { EdgeError, errorCode, EXIT } from '../errors.js';
import { HandlerFailure } from './types.js';

/**
 * Failures that are the environment's fault, never the item's: they are not charged to
 * the item, and they say what the pass should do. Handlers and the output store throw
 * them; the pass (src/runner/pass.ts) decides.
 */

/**
 * The environment cannot run any item now (the handler program is missing or not
 * executable, the working directory is gone): the pass should stop (exit 1) and hand the
 * claim back uncharged, so the items wait for a fixed environment instead of dying.
 * A HandlerFailure, so callers that do not know it still see a failed attempt.
 */
export class EnvironmentFault extends HandlerFailure {
  override name = 'EnvironmentFault';
}

/**
 * The environment's fault before the handler started (its program missing or not
 * executable, the working directory gone, the spawn helper dead before it took the
 * request): the claim is undone, `attempts` back to what it was, as attempts count starts.
 */
export class NotStarted extends EnvironmentFault {
  override name = 'NotStarted';
}

/**
 * cronsafe's own temp directory vanished under the attempt (an empty-directory cleaner):
 * the output store has recreated it, and the attempt should be handed back uncharged and
 * tried again; the pass goes on.
 */
export class OwnDirectoryGone extends Error {
  override name = 'OwnDirectoryGone';
}

/**
 * A handler succeeded while the output file system was full: what it wrote may have been
 * cut short by a write it did not check, so it is not committed. Judged as an attempt that
 * failed on a full output file system (the pass stops, nothing charged).
 */
export class OutputMaybeCut extends Error {
  override name = 'OutputMaybeCut';
  constructor(nothing = false) {
    super(
      nothing
        ? 'the handler succeeded, but wrote no output: its output file may have been refused for lack of space (no inode left); not recorded done'
        : 'the handler succeeded, but its output may have been cut short by a write refused for lack of space: not committed',
    );
  }
}

/**
 * What a refused write of cronsafe's own in output.directory says (creating its temp
 * directory or an output's parent, renaming a finished output into place), or null when
 * `err` is no refusal. EACCES or EPERM: the user cronsafe runs as may not write there (a
 * volume whose owner changed, an export squashed to another uid); no item is to blame.
 */
export function writeRefused(err: unknown, what: string): string | null {
  const code = (err as NodeJS.ErrnoException).code;
  if (code !== 'EACCES' && code !== 'EPERM') return null;
  return `cannot ${what}: ${code}: a directory there (output.directory, one in it, or one on its way) is not writable by this user (uid ${process.getuid?.() ?? '?'})`;
}

/**
 * What a rename over `final` refused by the file there, not by its directory, says (EPERM
 * or EACCES while this user may write in the directory: a file made immutable or
 * append-only, `chattr +i`), or null otherwise. writeRefused said the directory was not
 * writable, and an operator who found it writable was left with no path to look at.
 */
export function targetRefused(err: unknown, what: string, final: string): string | null {
  const code = (err as NodeJS.ErrnoException).code;
  if (code !== 'EACCES' && code !== 'EPERM') return null;
  const dir = path.dirname(final);
  try {
    const target = lstatSync(final, { throwIfNoEntry: false });
    if (target === undefined) return null;
    // Another user's file in a sticky directory is refused for its owner, not its flags.
    if ((statSync(dir).mode & 0o1000) !== 0 && target.uid !== process.getuid?.()) return null;
    accessSync(dir, fsConstants.W_OK | fsConstants.X_OK);
  } catch {
    return null;
  }
  return `cannot ${what}: ${code}: ${final} is there and cannot be replaced, though its directory is writable by this user (uid ${process.getuid?.() ?? '?'}): an immutable or append-only file (lsattr; chattr -i or -a)?`;
}

/**
 * What a refused open of a directory in output.directory for cronsafe's sync after a
 * rename says (EACCES, EPERM: writable and searchable but not readable by this user, as a
 * drop box is), or null when `err` is no refusal. No item is to blame.
 */
export function syncRefused(err: unknown, dir: string): string | null {
  const code = (err as NodeJS.ErrnoException).code;
  if (code !== 'EACCES' && code !== 'EPERM') return null;
  return `cannot read ${dir} to sync it: ${code}: cronsafe syncs the directory after each output's rename, so that a finished output survives a power cut, and that needs read permission there for this user (uid ${process.getuid?.() ?? '?'}), which a drop box (mode 0733, another user's) does not give`;
}

/**
 * What cronsafe's own write in output.directory says when its file system refuses it as a
 * whole: mounted read-only (EROFS: a volume mounted readOnly, a snapshot restored
 * read-only) or full (ENOSPC: no block or no inode left; EDQUOT: a user's or project's quota
 * used up, while statfs still shows free space); else null. No item is to blame.
 * (An attempt that fails on either is judged by OutputStore.readOnly and full.)
 */
export function fileSystemRefused(err: unknown, what: string, outDir: string): string | null {
  const code = errorCode(err);
  if (code === 'EROFS') return `cannot ${what}: EROFS: the file system of output.directory ${outDir} is read-only`;
  if (code === 'ENOSPC') return `cannot ${what}: ENOSPC: the file system of output.directory ${outDir} is full (no space or no inode left)`;
  if (code === 'EDQUOT') return `cannot ${what}: EDQUOT: this user's (or this directory's project) disk quota on the file system of output.directory ${outDir} is used up`;
  return null;
}

/**
 * What a rename of cronsafe's own from its temp directory to an output's place says when
 * the two are on different file systems (EXDEV: a volume mounted inside output.directory,
 * or over the temp directory), or null when `err` is not that. No item is to blame.
 */
export function crossDevice(err: unknown, what: string, tempDir: string): string | null {
  if ((err as NodeJS.ErrnoException).code !== 'EXDEV') return null;
  return `cannot ${what}: EXDEV: it is on another file system than cronsafe's temp directory ${tempDir} (a mount inside output.directory, or over its .cronsafe-tmp?), and an output is only ever renamed into place`;
}

/** output.directory cannot be used at start-up (writeRefused): one line, exit 1, before anything is claimed. */
export class OutputUnwritable extends EdgeError {
  override name = 'OutputUnwritable';
  readonly exitCode = EXIT.FATAL;
}

/**
 * source.directory removed or replaced (by a file, a link to itself) while `cronsafe plan`
 * scanned it: its opendir's ENOENT, ENOTDIR or ELOOP ended plan with `cronsafe: fatal:` (a
 * run's pass says it as sourceGone). One line, exit 1: the environment's, for now.
 */
export class SourceGoneDuringScan extends EdgeError {
  override name = 'SourceGoneDuringScan';
  readonly exitCode = EXIT.FATAL;
  constructor(directory: string, code: string) {
    super(`source.directory ${directory} was removed or replaced while it was being scanned (${code}): nothing planned; look again once it is back`);
  }
}

/** The scan's error as SourceGoneDuringScan when it is source.directory's own ENOENT, ENOTDIR or ELOOP (the walk skips a subdirectory's); else `err`. */
export function sourceScanFailed(err: unknown, directory: string): unknown {
  const code = errorCode(err);
  return code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP' ? new SourceGoneDuringScan(directory, code) : err;
}
