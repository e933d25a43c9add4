/**
 * A disk quota used up on the SQLite ledger's directory (EDQUOT, while statfs(2) shows the
 * file system with room): SQLite names only ENOSPC as a full disk, so the run said "state
 * store unavailable ...: disk I/O error", which reads as a failing disk, and the file size
 * limit's and the full file system's hints (statfs) did not apply. Now it says that the
 * quota is used up. Nothing is claimed nor charged either way (exit 1).
 *
 * The quota is the LD_PRELOAD shim of helpers/quota-shim.ts (no quota support in this
 * kernel's tmpfs and ext4).
 */
import { readdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, configure, runCli, spawnCliRaw, statusJson, workspace } from '../helpers/cli.js';
import { charged } from '../helpers/ledger-sums.js';
import { quotaEnv } from '../helpers/quota-shim.js';

const ITEMS = Array.from({ length: 300 }, (_, i) => `item${i}.txt`);

describe('a disk quota used up on the ledger directory (EDQUOT, statfs shows room)', () => {
  it('exit 1, says the quota is used up, nothing claimed nor charged', async () => {
    const ws = workspace({});
    configure(ws, { handler: { command: ['cat', '{path}'] } });
    // The ledger made, with no quota yet.
    const first = await runCli(['run', '-c', ws.configPath]);
    expect(first.code, first.stderr).toBe(0);
    for (const f of ITEMS) writeFileSync(path.join(ws.source, f), `${f}\n`);
    const used = readdirSync(ws.state).reduce((n, f) => n + statSync(path.join(ws.state, f)).size, 0);
    // Room for the -shm (32 KiB) and a few pages of the -wal, not for the scan's 300 rows.
    const env = quotaEnv(ws.dir, ws.state, used + 32_768 + 16_384);
    const r = await runCli(['run', '-c', ws.configPath], { env });
    expect(r.code, r.stderr).toBe(1);
    // Before: "... state store unavailable (sqlite ...): ...disk I/O error", and no more.
    expect(r.stderr).toMatch(/disk I\/O error \(this user's disk quota on the file system of state\.sqlite \(.*\) is used up \(EDQUOT\)/);
    expect((await statusJson(ws.configPath)).items.claimed).toBe(0);
    expect(await charged(ws.db, ITEMS)).toBe(0);
    // The check's own file is gone.
    expect(readdirSync(ws.state).filter((f) => f.includes('probe'))).toEqual([]);
  }, 60_000);

  it('a file size limit below one block (ulimit -f) is not taken for a quota: its own hint', async () => {
    const ws = workspace({});
    configure(ws, { handler: { command: ['cat', '{path}'] } });
    // dash counts ulimit -f in blocks of 512 bytes: 2,048 bytes, less than the check's block.
    const limited = spawnCliRaw('/bin/sh', ['-c', 'ulimit -f 4 && exec "$0" "$@"', process.execPath, CLI, 'run', '-c', ws.configPath], { timeoutMs: 60_000 });
    const { code } = await limited.exited;
    expect(code, limited.stderr()).toBe(1);
    // Before: the check's short write was taken for a quota used up.
    expect(limited.stderr()).not.toMatch(/quota/);
    expect(limited.stderr()).toMatch(/the process's file size limit \(ulimit -f, LimitFSIZE=\) is (2048|4096) bytes/);
  }, 60_000);
});
