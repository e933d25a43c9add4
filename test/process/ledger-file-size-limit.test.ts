/**
 * The ledger stopped by the process's file size limit (`ulimit -f`, systemd's LimitFSIZE=):
 * the kernel refuses the write that would take a file past it (EFBIG), and SQLite says only
 * "disk I/O error", on a healthy disk with room to spare. A pass stopped by it (or by a
 * full state volume) said `cronsafe: run failed: disk I/O error`: neither that it was the
 * ledger nor which file, unlike the same failure at start-up.
 */
import { mkdirSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, configure, FIXTURES, finished, runCli, spawnCliRaw, statusJson, workspace } from '../helpers/cli.js';
import { quotaEnv } from '../helpers/quota-shim.js';

const NOOP = path.join(FIXTURES, 'process/noop-module.mjs');

describe('the ledger at the file size limit (ulimit -f)', () => {
  it('a pass stopped by it names the ledger and the limit; nothing is lost, and without the limit the next run finishes', async () => {
    const files = Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`item-${String(i).padStart(4, '0')}`, '']));
    const ws = workspace({ handler: { module: NOOP }, log: { level: 'info' } }, files);
    // 400 blocks: the ledger of 3,000 items (or its -wal) outgrows it during the pass.
    const limited = spawnCliRaw('/bin/sh', ['-c', 'ulimit -f 400 && exec "$0" "$@"', process.execPath, CLI, 'run', '-c', ws.configPath], { timeoutMs: 60_000 });
    const { code } = await limited.exited;
    expect(code, limited.stderr()).toBe(1);
    const stderr = limited.stderr();
    expect(stderr).toContain(`state store unavailable (sqlite ${ws.db}): `);
    // dash counts ulimit -f in blocks of 512 bytes, bash in 1,024.
    expect(stderr).toMatch(/: disk I\/O error \(the process's file size limit \(ulimit -f, LimitFSIZE=\) is (204800|409600) bytes and the ledger's files reached it/);
    expect(stderr.split('\n')).toHaveLength(2); // one line

    const next = await runCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    expect(next.code, next.stderr).toBe(0);
    expect(finished(next)).toMatchObject({ outcome: 'completed' });
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 3000, dead: 0 });
  }, 60_000);

  it("state.sqlite a link to a ledger in another directory: the limit is named, not the link's directory's quota (before: its quota said to be used up)", async () => {
    const ws = workspace({ handler: { module: NOOP } }, { 'a.txt': '' });
    const first = await runCli(['run', '-c', ws.configPath]);
    expect(first.code, first.stderr).toBe(0);
    // The link sits in a directory whose quota is used up; SQLite opens (and grows) the file it points at.
    const links = path.join(ws.dir, 'links');
    mkdirSync(links);
    const link = path.join(links, 'cronsafe.db');
    symlinkSync(ws.db, link);
    configure(ws, { state: { sqlite: link } });
    const env = quotaEnv(ws.dir, links, 0);
    // 16 blocks (8 or 16 KiB): the ledger's -shm (32 KiB), made at the open, outgrows it.
    const limited = spawnCliRaw('/bin/sh', ['-c', 'ulimit -f 16 && exec "$0" "$@"', process.execPath, CLI, 'run', '-c', ws.configPath], { timeoutMs: 60_000, env });
    const { code } = await limited.exited;
    expect(code, limited.stderr()).toBe(1);
    const stderr = limited.stderr();
    expect(stderr).toContain(`state store unavailable (sqlite ${link}): `);
    expect(stderr).toMatch(/: disk I\/O error \(the process's file size limit \(ulimit -f, LimitFSIZE=\) is (8192|16384) bytes and the ledger's files reached it/);
    expect(stderr).not.toContain('quota');
    expect(stderr).not.toContain(`(${links})`);

    const next = await runCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    expect(next.code, next.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
  }, 60_000);
});
