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
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, configure, FIXTURES, runCli, spawnCli, spawnCliRaw, statusJson, workspace, type Workspace } from '../helpers/cli.js';
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
 * 30 items, two at a time, 0.2 s each, under a quota over `over(ws)`, lowered to what that
 * directory holds once a few attempts have finished: the first run's result, then the next
 * run's, the quota raised, which must finish every item, each output whole, each charged once.
 */
async function quotaUsedUpMidPass(over: (ws: Workspace) => string): Promise<{ ws: Workspace; stderr: string }> {
  const files = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`item-${String(i).padStart(2, '0')}`, `payload ${i}\n`]));
  const ids = Object.keys(files);
  const ws = workspace({ concurrency: 2 }, files);
  // Outside the quota's directory (the whole workspace, for one volume).
  const aside = mkdtempSync(path.join(tmpdir(), 'cronsafe-quota-'));
  const log = path.join(aside, 'invocations.log');
  const limit = path.join(aside, 'quota-bytes');
  writeFileSync(limit, String(1 << 30));
  configure(ws, { handler: { command: ['/bin/sh', LOGGED_COPY, '{path}', '{output}'], env: { INVOCATIONS: log, DELAY: '0.2' } } });
  const env = quotaEnv(aside, over(ws), { file: limit });
  const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 90_000, env });
  // Readiness: a few attempts have finished and two more are running.
  await until(() => [...invocations(log).values()].reduce((a, b) => a + b, 0) >= 6, 'six handler starts', 60_000);
  // The quota lowered to what the directory holds now: its next growth is refused.
  writeFileSync(limit, String(usage(over(ws))));
  const { code } = await run.exited;
  expect(code, run.stderr()).toBe(1);
  expect(run.stderr().split('\n')).toHaveLength(2);

  writeFileSync(limit, String(1 << 30));
  const next = await runCli(['run', '-c', ws.configPath], { env, timeoutMs: 90_000 });
  expect(next.code, next.stderr).toBe(0);
  expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: ids.length, dead: 0 });
  for (const id of ids) expect(readFileSync(path.join(ws.out, `${id}.out`), 'utf8'), id).toBe(files[id]);
  // Before (one volume): the attempts running when the pass stopped, whose hand-backs the
  // ledger refused, were charged by the next run as a dead run's claims.
  expect(await notChargedOnce(ws.db, ids)).toEqual({});
  return { ws, stderr: run.stderr() };
}

/** The bytes of the regular files under `dir`, as the quota counts them. */
function usage(dir: string): number {
  return readdirSync(dir, { withFileTypes: true }).reduce((n, e) => {
    const p = path.join(dir, e.name);
    return n + (e.isDirectory() ? usage(p) : e.isFile() ? statSync(p).size : 0);
  }, 0);
}

describe('a disk quota used up in the middle of a pass', () => {
  // The first refused write is the start journal's (every claim and success is journalled
  // before the ledger has it), and Node words EDQUOT "UNKNOWN: unknown error, write", which
  // was all the run said of it. Now it names the quota and the ledger's directory.
  it("on the ledger's directory: exit 1 naming the quota and the directory; raised, the next run finishes every item, each charged once", async () => {
    const { ws, stderr } = await quotaUsedUpMidPass((ws) => ws.state);
    // Before: "... start journal <file>: UNKNOWN: unknown error, write".
    expect(stderr).not.toMatch(/UNKNOWN/);
    expect(stderr).toContain(`this user's, or this directory's project, disk quota on the file system of state.sqlite (${ws.state}) is used up`);
  }, 120_000);

  // The chart's layout: outputs and ledger on one volume. The handlers' writes are refused
  // first, and the pass stops "nothing charged"; but SQLite words a write refused EDQUOT
  // "disk I/O error" (SQLITE_IOERR_WRITE), not the full disk (SQLITE_FULL) whose refused
  // hand-backs the start journal keeps: those were lost, and the next run charged each.
  it('on one volume for the ledger and the outputs: exit 1, nothing charged; raised, the next run finishes every item, each charged once', async () => {
    const { ws, stderr } = await quotaUsedUpMidPass((ws) => ws.dir);
    expect(stderr).toContain(`the file system of output.directory ${ws.out} is full; stopping, nothing charged`);
  }, 120_000);
});
