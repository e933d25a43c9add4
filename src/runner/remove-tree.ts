import { chmod, lstat, readdir, rm } from 'node:fs/promises';

/**
 * Remove a temp path of ours and everything under it, as `rm -rf` would. A handler may have
 * left directories there that its own user cannot write or list (`cp -r` of a read-only
 * tree, a Go module cache: mode 555, or 000): their entries cannot be unlinked until the
 * owner gives itself the rights back, which it may (root needs none of this). Without it a
 * failed attempt's tree stayed behind, and every later start failed to empty the temp
 * directory (EACCES), stopping the job until someone removed it by hand.
 */
export async function removeTree(entry: string | Buffer): Promise<void> {
  try {
    await rm(entry, { recursive: true, force: true });
    return;
  } catch (err) {
    // Only a missing right: EPERM (an immutable file, a sticky directory) is not one.
    if ((err as NodeJS.ErrnoException).code !== 'EACCES') throw err;
  }
  await ownerRights(entry);
  await rm(entry, { recursive: true, force: true });
}

/**
 * u+rwx on every directory under `dir` (lstat: links are not followed); what cannot be
 * changed is left to rm's error. Names are read as bytes: one that is not UTF-8, read as a
 * string, names no file, and its directory kept its mode.
 */
async function ownerRights(dir: Buffer | string): Promise<void> {
  const st = await lstat(dir).catch(() => undefined);
  if (!st?.isDirectory()) return;
  if ((st.mode & 0o700) !== 0o700) await chmod(dir, (st.mode & 0o7777) | 0o700).catch(() => undefined);
  const names = await readdir(dir, { encoding: 'buffer' }).catch(() => []);
  for (const name of names) await ownerRights(Buffer.concat([Buffer.from(dir), SLASH, name]));
}

const SLASH = Buffer.from('/');
