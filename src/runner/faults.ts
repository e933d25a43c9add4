import { EdgeError, EXIT } from '../errors.js';
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
 * cronsafe's own temp directory vanished under the attempt (an empty-directory cleaner):
 * the output store has recreated it, and the attempt should be handed back uncharged and
 * tried again; the pass goes on.
 */
export class OwnDirectoryGone extends Error {
  override name = 'OwnDirectoryGone';
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

/** output.directory cannot be used at start-up (writeRefused): one line, exit 1, before anything is claimed. */
export class OutputUnwritable extends EdgeError {
  override name = 'OutputUnwritable';
  readonly exitCode = EXIT.FATAL;
}
