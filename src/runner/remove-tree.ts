import { randomBytes } from 'node:crypto';
import { lstat, readdir, rename, rm } from 'node:fs/promises';
import { chmodSame } from './own-dir.js';

/**
 * Remove a temp path of ours and everything under it, as `rm -rf` would. A handler may have
 * left directories there that its own user cannot write or list (`cp -r` of a read-only
 * tree, a Go module cache: mode 555, or 000): their entries cannot be unlinked until the
 * owner gives itself the rights back, which it may (root needs none of this). Without it a
 * failed attempt's tree stayed behind, and every later start failed to empty the temp
 * directory (EACCES), stopping the job until someone removed it by hand.
 */
export async function removeTree(entry: string | Buffer): Promise<void> {
  let rightsGiven = false;
  let hoisted = false;
  for (;;) {
    try {
      await rm(entry, { recursive: true, force: true });
      return;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // Only a missing right: EPERM (an immutable file, a sticky directory) is not one.
      if (code === 'EACCES' && !rightsGiven) {
        rightsGiven = true;
        await ownerRights(entry);
      } else if (code === 'ENAMETOOLONG' && !hoisted) {
        hoisted = true;
        for (const piece of await hoistDeep(Buffer.from(entry))) await removeTree(piece);
      } else throw err;
    }
  }
}

/** Deeper than this many bytes, a directory is moved up (hoistDeep): below it no path then reaches PATH_MAX, a name being at most 255 bytes. */
const HOIST_AT = 2048;

/**
 * A handler may leave a tree deeper than PATH_MAX (4,096 bytes) in its {output} (an archive
 * unpacked there, a hostile one nesting its directories), and rm(3)'s paths cannot reach
 * its bottom (ENAMETOOLONG): the tree stayed, and every later start failed to empty the
 * temp directory (exit 1), stopping the job until someone removed it by hand. So each
 * directory in it found deeper than HOIST_AT bytes is renamed beside the tree (in the
 * same directory of ours, so the same file system), at a short path, until none is;
 * returns those pieces, for the caller to remove. Links are not followed (lstat).
 */
async function hoistDeep(root: Buffer): Promise<Buffer[]> {
  const pieces: Buffer[] = [];
  // Our temp paths are absolute: beside one is in its directory, never at `/`.
  const cut = root.lastIndexOf(0x2f);
  if (cut <= 0) return pieces;
  const parent = root.subarray(0, cut);
  const tag = `.deep-${randomBytes(6).toString('hex')}-`;
  const walk = async (dir: Buffer): Promise<void> => {
    const names = await readdir(dir, { encoding: 'buffer' }).catch(() => [] as Buffer[]);
    for (const name of names) {
      const child = Buffer.concat([dir, SLASH, name]);
      if (!(await lstat(child).catch(() => undefined))?.isDirectory()) continue;
      if (child.length <= HOIST_AT) {
        await walk(child);
        continue;
      }
      const piece = Buffer.concat([parent, SLASH, Buffer.from(`${tag}${pieces.length + 1}`)]);
      await rename(child, piece);
      pieces.push(piece);
      await walk(piece);
    }
  };
  await walk(root);
  return pieces;
}

/**
 * u+rwx on every directory under `dir` (lstat: links are not followed); what cannot be
 * changed is left to rm's error. Names are read as bytes: one that is not UTF-8, read as a
 * string, names no file, and its directory kept its mode.
 */
async function ownerRights(dir: Buffer | string): Promise<void> {
  const st = await lstat(dir).catch(() => undefined);
  if (!st?.isDirectory()) return;
  if ((st.mode & 0o700) !== 0o700) chmodSame(dir, st, (st.mode & 0o7777) | 0o700);
  const names = await readdir(dir, { encoding: 'buffer' }).catch(() => []);
  for (const name of names) await ownerRights(Buffer.concat([Buffer.from(dir), SLASH, name]));
}

const SLASH = Buffer.from('/');
