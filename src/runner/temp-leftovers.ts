import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { newestMtimeMs } from './output-fs.js';
import { isLedgerMark, jobOfTempDir } from './output-name.js';
import { sameDir, UnsafeOwnDirectory, type DirId } from './own-dir.js';
import { removeTree } from './remove-tree.js';

/** Loose temp files of the layout before per-job directories go once they are this old. */
const OLD_LAYOUT_AGE_MS = 3_600_000;

export interface TempDirs {
  /** `<output.directory>/.cronsafe-tmp`, and its identity as the store made it its own. */
  root: string;
  rootId: DirId;
  /** This run's (or job's) temp directory, and its identity; the root itself when alone. */
  tempDir: string;
  tempId: DirId;
  /** Many runs at once on the directory: another run's directory untouched this long is dead. */
  staleAfterMs?: number;
}

/**
 * Remove what killed runs left in the temp directories (OutputStore.prepare). Without
 * staleAfterMs, everything in this run's temp directory: only safe while holding an
 * exclusive run lock. With it, other runs' directories untouched for that long. Each
 * directory is checked again before each removal: one swapped for a link meanwhile stops
 * the clean-up (UnsafeOwnDirectory) instead of emptying the link's target.
 */
export async function removeTempLeftovers(d: TempDirs): Promise<void> {
  const remove = async (dir: string, id: DirId, entry: string | Buffer): Promise<void> => {
    if (!sameDir(dir, id)) throw new UnsafeOwnDirectory(dir, 'was replaced while cronsafe was emptying it');
    await removeTree(entry);
  };
  const fromRoot = (entry: string): Promise<void> => remove(d.root, d.rootId, entry);
  if (d.staleAfterMs === undefined) {
    // The job's own directory (or the root, one job alone): everything in it is a killed
    // run of this job's (the run lock proves it).
    // Names as bytes: a handler may leave one that is not UTF-8 beside its {output}, which
    // read as a string names no file (rm's force took the miss in silence, and it stayed).
    const dir = Buffer.from(`${d.tempDir}/`);
    for (const name of await readdir(d.tempDir, { encoding: 'buffer' })) await remove(d.tempDir, d.tempId, Buffer.concat([dir, name]));
    if (d.tempDir === d.root) return;
    for (const name of await readdir(d.root)) {
      if (!/\.tmp(\.item)?$/.test(name)) continue;
      const entry = path.join(d.root, name);
      const newest = await newestMtimeMs(entry);
      if (newest !== null && Date.now() - newest > OLD_LAYOUT_AGE_MS) await fromRoot(entry);
    }
    return;
  }
  for (const name of await readdir(d.root)) {
    const entry = path.join(d.root, name);
    if (entry === d.tempDir) continue;
    // Another job's (SQLite: `job-<name>`, a DNS label; a run's directory holds the `_` of
    // its sanitised owner): that job empties it itself, under its run lock. It is not touched
    // while one long attempt runs, so its age says nothing about whether it is live. Nor its
    // ledger mark (`job-<name>.ledger-<hash>`, never touched after it is made): removed as a
    // dead run's, it no longer told a copy of that job on another ledger.
    if (jobOfTempDir(name) !== undefined || isLedgerMark(name)) continue;
    const newest = await newestMtimeMs(entry);
    if (newest !== null && Date.now() - newest > d.staleAfterMs) await fromRoot(entry);
  }
}
