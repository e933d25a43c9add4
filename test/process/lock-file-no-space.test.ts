/**
 * lock.path on a full file system (no inode left for the lock file, or for its directory):
 * the run said "state store unavailable (sqlite <ledger>): cannot take the run lock ...",
 * sending the operator to the ledger's volume, which may be another with room to spare.
 * Now it says the lock file could not be created, naming it and ENOSPC; exit 1 as before.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, runCli, workspace } from '../helpers/cli.js';

const isRoot = process.getuid?.() === 0;

describe('lock.path on a file system with no inode left', () => {
  it('says the lock file could not be created, naming lock.path and ENOSPC, not the state store; exit 1', async (ctx) => {
    const ws = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'a' });
    const volume = path.join(ws.dir, 'locks');
    mkdirSync(volume);
    if (!isRoot || spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m,nr_inodes=8', 'tmpfs', volume]).status !== 0) ctx.skip();
    try {
      // Every inode used by something else's files.
      for (let i = 0; ; i++) {
        try {
          writeFileSync(path.join(volume, `f${i}`), '');
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
          break;
        }
      }
      for (const lock of [path.join(volume, 'job.lock'), path.join(volume, 'sub', 'job.lock')]) {
        configure(ws, { lock: { path: lock } });
        const r = await runCli(['run', '-c', ws.configPath]);
        expect(r.code, r.stderr).toBe(1);
        // Before: "cronsafe: state store unavailable (sqlite <ledger>): cannot take the run lock ...".
        expect(r.stderr).not.toContain('state store unavailable');
        expect(r.stderr).toContain(`cannot create the lock file ${lock} (lock.path): ENOSPC`);
        expect(r.stderr).toContain('no space left');
        expect(existsSync(lock)).toBe(false);
      }
    } finally {
      spawnSync('umount', ['-l', volume]);
    }
  }, 60_000);
});
