import { closeSync, constants, openSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';
import { errorCode } from './errors.js';
import { QUOTA_PROBE_NAME } from './ledger/store-files.js';

/** What a probe writes: one block. */
export const PROBE_BLOCK = Buffer.alloc(4096);

/**
 * Why one block written to a new file at `probe` (removed at once) was refused: its errno
 * name (errorCode, so EDQUOT is named), or undefined when it was written. A user's or
 * project's disk quota used up (EDQUOT) shows in no statfs(2), only in a refused write. A
 * short write (the quota's limit within the block) is followed by the refusal that tells
 * why: EDQUOT, or EFBIG (a file size limit, not a full file system). The close counts too
 * (NFS may refuse only there).
 */
export function blockRefused(probe: string): string | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(probe, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
    for (let off = 0, n = 1; off < PROBE_BLOCK.length && n > 0; off += n) n = writeSync(fd, PROBE_BLOCK, off, PROBE_BLOCK.length - off, off);
    closeSync(fd);
    fd = undefined;
    return undefined;
  } catch (err) {
    return errorCode(err) ?? 'UNKNOWN';
  } finally {
    try {
      if (fd !== undefined) closeSync(fd);
    } catch {
      /* the write's answer is the one that counts */
    }
    try {
      unlinkSync(probe);
    } catch {
      /* never made */
    }
  }
}

/** quotaUsedUp's probes in this process (their names). */
let quotaProbes = 0;

/**
 * Whether a block written to a new file in `dir` (removed at once) is refused with EDQUOT: a
 * user's or project's disk quota used up, which statfs does not show. SQLite says only "disk
 * I/O error" then (it names ENOSPC alone as a full disk), which read as a failing disk.
 * The scan never takes the file for an item (store-files.ts, storeProbes).
 */
export function quotaUsedUp(dir: string): boolean {
  // Unique enough for O_EXCL without node:crypto, which start-up does not load (startup-modules).
  return blockRefused(path.join(dir, `${QUOTA_PROBE_NAME}${process.pid}-${Date.now().toString(36)}-${++quotaProbes}`)) === 'EDQUOT';
}
