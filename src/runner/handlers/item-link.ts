import { closeSync, lstatSync } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { coerceError } from '../../errors.js';
import { DIR_MODE } from '../../make-dirs.js';
import { EnvironmentFault } from '../faults.js';
import { itemPaths } from '../item-id.js';
import { safeSegment } from '../output-name.js';
import { holdDir, removeDeadDirs } from './dead-dirs.js';

/**
 * The text path a handler gets for an item whose id is escaped. argv and the environment
 * are strings (Node cannot pass other bytes), and a module handler's item.path is text
 * too (many handlers never look at item.rawPath), so a name that is not UTF-8 is reached through a
 * symbolic link with the escaped name, made (with Buffer paths) in a directory of ours for
 * the attempt and removed after it: beside the attempt's temp output in
 * `<output.directory>/.cronsafe-tmp/` (a killed run's is removed by the next run), else
 * in a fresh directory under TMPDIR, flocked while in use so that a killed run's can be
 * told from a live one (removeDeadLinkDirs). A name that is UTF-8 (only a backslash in it)
 * needs no link: the real path is text.
 */
export async function itemLink(sourceDir: string, id: string, outputPath: string | undefined): Promise<{ path: string; remove(): Promise<void> }> {
  const where = itemPaths(sourceDir, id);
  if (where.text !== null) return { path: where.text, remove: async () => {} };
  // No usable TMPDIR (missing, or read-only with no emptyDir at /tmp) is the environment's
  // fault, as a link that cannot be made is: never the item's.
  // Absolute even for a relative TMPDIR: the handler runs in source.directory, not in our cwd.
  if (!outputPath) removeDeadLinkDirs();
  const dir = outputPath
    ? `${outputPath}.item`
    : await mkdtemp(path.resolve(tmpdir(), LINK_DIR_PREFIX)).catch((err: unknown) => {
        throw new EnvironmentFault(`cannot make a directory for a link to item ${JSON.stringify(id)} in TMPDIR ${tmpdir()}: ${coerceError(err).message}`);
      });
  if (outputPath) await mkdir(dir, DIR_MODE);
  const held = outputPath ? undefined : holdDir(dir);
  // The directory as made: should the handler swap the directory of its {output} for a link
  // (`ln -s /elsewhere "$(dirname "$2")"`), the same path names another directory there, and
  // removing it deleted that one's tree, outside output.directory (a start refuses the link).
  const made = lstatSync(dir, { throwIfNoEntry: false });
  const remove = async () => {
    try {
      const now = lstatSync(dir, { throwIfNoEntry: false });
      if (now !== undefined && made !== undefined && (now.dev !== made.dev || now.ino !== made.ino)) return;
      await rm(dir, { recursive: true, force: true });
    } finally {
      if (held !== undefined) closeSync(held);
    }
  };
  try {
    const link = path.join(dir, linkName(id));
    await symlink(where.raw, link);
    return { path: link, remove };
  } catch (err) {
    await remove();
    throw new EnvironmentFault(`cannot make a link to item ${JSON.stringify(id)} in ${dir}: ${coerceError(err).message}`);
  }
}

/** The link's name: the id's last segment (escaped text, so the extension survives), kept under NAME_MAX. */
function linkName(id: string): string {
  return safeSegment(id.slice(id.lastIndexOf('/') + 1), '');
}

const LINK_DIR_PREFIX = 'cronsafe-item-';
/** A name mkdtemp made from LINK_DIR_PREFIX: six characters of [A-Za-z0-9]. */
const LINK_DIR_NAME = /^cronsafe-item-[A-Za-z0-9]{6}$/;
let swept = false;

/**
 * Remove, once per process, the TMPDIR link directories that runs killed (SIGKILL, OOM)
 * during an attempt left behind: ours (same uid), older than a minute, and held by nobody,
 * whichever job made them (each attempt's is flocked while in use). Before, they stayed in
 * TMPDIR for good, one per killed attempt, each with a link to its item. Only a directory
 * named as mkdtemp names ours and holding nothing but links is taken for one. Best effort:
 * what cannot be looked at or locked (flock refused, as on NFS) is left alone.
 */
export function removeDeadLinkDirs(dir = tmpdir()): void {
  if (swept) return;
  swept = true;
  // Ours holds the item's link at most (none when killed before making it).
  removeDeadDirs(dir, LINK_DIR_NAME, (e) => e.isSymbolicLink());
}
