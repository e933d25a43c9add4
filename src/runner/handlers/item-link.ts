import { closeSync, constants, lstatSync, openSync, readdirSync, rmSync } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { coerceError } from '../../errors.js';
import { flockSync } from '../../flock.js';
import { DIR_MODE } from '../../make-dirs.js';
import { EnvironmentFault } from '../faults.js';
import { itemPaths } from '../item-id.js';
import { safeSegment } from '../output-name.js';

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
/** Older than this, a link directory nobody holds is a killed run's (a fresh one is held within microseconds). */
const DEAD_AFTER_MS = 60_000;
let swept = false;

/** An open, flocked descriptor of `dir` (the kernel lets go if the process dies), or undefined where flock is refused. */
function holdDir(dir: string): number | undefined {
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
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => LINK_DIR_NAME.test(n));
  } catch {
    return;
  }
  const uid = process.getuid?.();
  for (const name of names) {
    const p = path.join(dir, name);
    try {
      const st = lstatSync(p);
      if (!st.isDirectory() || st.uid !== uid || Date.now() - st.mtimeMs < DEAD_AFTER_MS) continue;
      const fd = holdDir(p);
      if (fd === undefined) continue; // live (held), or no flock here
      try {
        // Ours holds the item's link at most (none when killed before making it): anything
        // else is someone's directory that only looks like ours, and not ours to remove.
        if (!readdirSync(p, { withFileTypes: true }).every((e) => e.isSymbolicLink())) continue;
        rmSync(p, { recursive: true, force: true }); // links are removed, never followed
      } finally {
        closeSync(fd);
      }
    } catch {
      // Gone meanwhile, or not ours to remove: left alone.
    }
  }
}
