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
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, configure, FIXTURES, runCli, spawnCli, spawnCliRaw, statusJson, workspace } from '../helpers/cli.js';
import { charged, notChargedOnce } from '../helpers/ledger-sums.js';
import { invocations } from '../helpers/proc.js';
import { quotaEnv } from '../helpers/quota-shim.js';
import { until } from '../helpers/wait.js';

const LOGGED_COPY = path.join(FIXTURES, 'process/logged-copy.sh');
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

/**
 * The quota used up while a pass runs (other writers on the volume, a quota lowered): the
 * first refused write is the start journal's (every claim and success is journalled before
 * the ledger has it), and Node words EDQUOT "UNKNOWN: unknown error, write", which was all
 * the run said of it. Now it names the quota and the ledger's directory; and the attempts
 * running then are neither charged twice nor lost: the next run, the quota raised, finishes
 * every item once.
 */
describe('a disk quota used up on the ledger directory in the middle of a pass', () => {
  it('exit 1 naming the quota and the directory; raised, the next run finishes every item, each charged once', async () => {
    const files = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`item-${String(i).padStart(2, '0')}`, `payload ${i}\n`]));
    const ids = Object.keys(files);
    const ws = workspace({ concurrency: 2 }, files);
    const log = path.join(ws.dir, 'invocations.log');
    const limit = path.join(ws.dir, 'quota-bytes');
    writeFileSync(limit, String(1 << 30));
    configure(ws, { handler: { command: ['/bin/sh', LOGGED_COPY, '{path}', '{output}'], env: { INVOCATIONS: log, DELAY: '0.2' } } });
    const env = quotaEnv(ws.dir, ws.state, { file: limit });
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 90_000, env });
    // Readiness: a few attempts have finished and two more are running.
    await until(() => [...invocations(log).values()].reduce((a, b) => a + b, 0) >= 6, 'six handler starts', 60_000);
    // The quota lowered to what the directory holds now: its next growth is refused.
    writeFileSync(limit, String(readdirSync(ws.state).reduce((n, f) => n + statSync(path.join(ws.state, f)).size, 0)));
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(1);
    // Before: "... start journal <file>: UNKNOWN: unknown error, write".
    expect(run.stderr()).not.toMatch(/UNKNOWN/);
    expect(run.stderr()).toContain(`this user's, or this directory's project, disk quota on the file system of state.sqlite (${ws.state}) is used up`);
    expect(run.stderr().split('\n')).toHaveLength(2);

    writeFileSync(limit, String(1 << 30));
    const next = await runCli(['run', '-c', ws.configPath], { env, timeoutMs: 90_000 });
    expect(next.code, next.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: ids.length, dead: 0 });
    for (const id of ids) expect(readFileSync(path.join(ws.out, `${id}.out`), 'utf8'), id).toBe(files[id]);
    expect(await notChargedOnce(ws.db, ids)).toEqual({});
    expect([...invocations(log).entries()].filter(([, n]) => n !== 1), 'no item ran twice').toEqual([]);
  }, 120_000);
});
