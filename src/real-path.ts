import { realpathSync } from 'node:fs';
import path from 'node:path';

/**
 * realpath of the longest existing prefix of `p`, plus the rest: where `p` is or will be.
 * Two names of one place (a link on the way, `..` after a link) compare equal only this
 * way; a file not created yet (a ledger's `-wal`) is placed by its nearest existing parent.
 */
export function whereItIs(p: string): string {
  const rest: string[] = [];
  for (let cur = p; ; ) {
    try {
      return path.join(realpathSync(cur), ...rest.reverse());
    } catch {
      const parent = path.dirname(cur);
      if (parent === cur) return p;
      rest.push(path.basename(cur));
      cur = parent;
    }
  }
}

/**
 * Whether a path.relative() result leaves the directory: `..` or `../...` (or another root).
 * Not any name starting with `..`: `..state/job.db` is inside, and was taken for outside, so
 * a ledger or a handler's script kept in such a directory of the source became an item.
 */
export const climbsOut = (rel: string): boolean => rel === '..' || rel.startsWith(`..${path.sep}`) || path.isAbsolute(rel);
