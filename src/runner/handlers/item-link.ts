import { mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { coerceError } from '../../errors.js';
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
 * in a fresh directory under TMPDIR. A name that is UTF-8 (only a backslash in it) needs
 * no link: the real path is text.
 */
export async function itemLink(sourceDir: string, id: string, outputPath: string | undefined): Promise<{ path: string; remove(): Promise<void> }> {
  const where = itemPaths(sourceDir, id);
  if (where.text !== null) return { path: where.text, remove: async () => {} };
  // No usable TMPDIR (missing, or read-only with no emptyDir at /tmp) is the environment's
  // fault, as a link that cannot be made is: never the item's.
  // Absolute even for a relative TMPDIR: the handler runs in source.directory, not in our cwd.
  const dir = outputPath
    ? `${outputPath}.item`
    : await mkdtemp(path.resolve(tmpdir(), 'cronsafe-item-')).catch((err: unknown) => {
        throw new EnvironmentFault(`cannot make a directory for a link to item ${JSON.stringify(id)} in TMPDIR ${tmpdir()}: ${coerceError(err).message}`);
      });
  if (outputPath) await mkdir(dir);
  const remove = () => rm(dir, { recursive: true, force: true });
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
