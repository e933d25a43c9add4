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
