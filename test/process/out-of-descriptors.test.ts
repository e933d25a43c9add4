/**
 * The process out of file descriptors (EMFILE: a low `ulimit -n` with concurrency 8) is the
 * environment's fault: cronsafe's own call that meets it (the fsync of a finished output)
 * must not charge, let alone dead-letter, the item that happened to be running.
 */
import { writeFileSync, unlinkSync, existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { CLI, FIXTURES, finished, runCli, spawnCliRaw, statusJson, workspace } from '../helpers/cli.js';
import { charged } from '../helpers/ledger-sums.js';

/** `cronsafe run` under `ulimit -n 256` (the hog takes what is left of it, quickly). */
async function runLimited(configPath: string, hog = '') {
  const r = spawnCliRaw('/bin/sh', ['-c', 'ulimit -n 256 && exec "$0" "$@"', process.execPath, CLI, 'run', '-c', configPath], { env: { HOG_FDS: hog } });
  const { code } = await r.exited;
  return { code, lines: r.lines, stderr: r.stderr() };
}

describe('out of file descriptors', () => {
  it('EMFILE on cronsafe\'s own fsync of an output: the attempt is handed back uncharged, the pass stops (exit 1), nothing dead; the next run finishes', async () => {
    const files = { 'a.txt': 'a', 'b.txt': 'b' };
    const ws = workspace({ concurrency: 1, retry: { maxAttempts: 1 }, handler: { module: path.join(FIXTURES, 'process/fd-hog-module.mjs') } }, files);
    const hog = path.join(ws.dir, 'hog');
    writeFileSync(hog, '');
    const first = await runLimited(ws.configPath, hog);
    expect(first.code, first.stderr).toBe(1);
    expect(finished(first)).toMatchObject({ outcome: 'failed', exitCode: 1 });
    expect(first.stderr).toMatch(/out of file descriptors.*EMFILE/);
    // The limit's value, as the start-up messages give it (descriptors.ts, exhaustedWhich).
    expect(first.stderr).toContain("this process's limit (ulimit -n 256, RLIMIT_NOFILE) is reached; stopping, nothing charged");
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 2, claimed: 0, done: 0, dead: 0 });
    const ledger = await openSqliteLedger(ws.db);
    try {
      for (const id of Object.keys(files)) {
        const row = await ledger.get(id);
        expect(row ? row.attempts - row.released : 0, id).toBe(0);
      }
    } finally {
      await ledger.close();
    }
    expect(existsSync(path.join(ws.out, 'a.txt.out'))).toBe(false);
    unlinkSync(hog);
    const next = await runLimited(ws.configPath, hog);
    expect(next.code, next.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
  }, 30_000);

  it('EMFILE opening a directory on the way of an output below output.directory (its rename holds each level open): the message names that directory, not a /proc/self/fd path; nothing charged', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/fd-hog-module.mjs') } }, { 'sub/a.txt': 'a' });
    const hog = path.join(ws.dir, 'hog');
    writeFileSync(hog, 'leave-one');
    const first = await runLimited(ws.configPath, hog);
    expect(first.code, first.stderr).toBe(1);
    expect(first.stderr).toMatch(/out of file descriptors.*nothing charged.*EMFILE/);
    expect(first.stderr).not.toContain('/proc/self/fd');
    expect(first.stderr).toContain(`'${path.join(ws.out, 'sub')}'`);
    expect(await charged(ws.db, ['sub/a.txt'])).toBe(0);
    expect(existsSync(path.join(ws.out, 'sub/a.txt.out'))).toBe(false);
    unlinkSync(hog);
    const next = await runLimited(ws.configPath, hog);
    expect(next.code, next.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
  }, 60_000);

  it('EMFILE at start-up (after the import of the handler): one line naming the limit, exit 1, no stack trace, nothing claimed', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/fd-hog-import-module.mjs') } }, { 'a.txt': 'a' });
    const r = await runLimited(ws.configPath);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/^cronsafe: out of file descriptors: this process's limit \(ulimit -n 256, RLIMIT_NOFILE\) is reached; raise the limit or lower concurrency: EMFILE: [^\n]*\n$/);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 0, dead: 0 });
  }, 30_000);
  it('a module handler that leaks every descriptor on one item: handed back retry.maxAttempts times, then charged and dead-lettered, not stopping every run', async () => {
    const ws = workspace({ concurrency: 1, retry: { maxAttempts: 1 }, handler: { module: path.join(FIXTURES, 'process/fd-leak-module.mjs') } }, { 'poison.txt': 'p' });
    const first = await runLimited(ws.configPath);
    expect(first.code, first.stderr).toBe(1);
    expect(first.stderr).toMatch(/out of file descriptors.*nothing charged/);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 1, dead: 0 });
    const second = await runLimited(ws.configPath);
    expect(second.code, second.stderr).toBe(1);
    expect(second.stderr).toMatch(/out of file descriptors.*charged/);
    expect(second.stderr).not.toMatch(/nothing charged/);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 0, dead: 1 });
    const third = await runLimited(ws.configPath);
    expect(third.code, third.stderr).toBe(0);
  }, 30_000);
});

describe('out of file descriptors for the helper that forks handler.command children', () => {
  // With one or two descriptors left, cronsafe's own opens succeed but the helper's spawn
  // (its IPC socket pair) fails with EMFILE, and Node then gives the helper no `send`: the
  // attempt threw "this[#helper].send is not a function", charged to an item whose handler
  // never started. The window's limit depends on what Node holds, so each limit around it
  // is tried: at none may an item be charged that is not done.
  it('at every low ulimit -n: no item is charged that did not succeed, and no TypeError is reported', async () => {
    const files = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`item-${String(i).padStart(2, '0')}`, `payload ${i}\n`]));
    const ids = Object.keys(files);
    for (let limit = 20; limit <= 44; limit++) {
      const ws = workspace({ handler: { command: ['/bin/sh', '-c', 'cat "$1" > "$2"', 'sh', '{path}', '{output}'] } }, files);
      const r = spawnCliRaw('/bin/sh', ['-c', `ulimit -n ${limit} && exec "$0" "$@"`, process.execPath, CLI, 'run', '-c', ws.configPath]);
      const { code } = await r.exited;
      expect([0, 1], `ulimit -n ${limit}: ${r.stderr()}`).toContain(code);
      expect(r.stderr(), `ulimit -n ${limit}`).not.toContain('is not a function');
      const status = await runCli(['status', '-c', ws.configPath, '--json']);
      if (status.code !== 0) continue; // stopped before it made the ledger
      const { done } = (JSON.parse(status.stdout) as { items: { done: number } }).items;
      expect(await charged(ws.db, ids), `ulimit -n ${limit}: ${r.stderr()}`).toBe(done);
    }
  }, 240_000);
});
