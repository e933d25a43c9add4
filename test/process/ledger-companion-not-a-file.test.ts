/**
 * Something other than a regular file where SQLite keeps one beside the ledger: a symbolic
 * link at `<ledger>-wal`, a FIFO there, a directory at `<ledger>-journal`. SQLite said only
 * "unable to open database file" (run, dead-letter retry) or "disk I/O error" (status too),
 * exit 1, which reads as a failing disk; status read on past a link, and a run removed a FIFO
 * named so. Now every command refuses to open the ledger, exit 78 naming the path and what
 * is there, and leaves it as it is.
 */
import { existsSync, lstatSync, mkdirSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, statusJson, workspace } from '../helpers/cli.js';

const COMMANDS = [['status'], ['status', '--json'], ['dead-letter', 'list'], ['dead-letter', 'retry', '--all'], ['run']];

async function deadLedger() {
  const ws = workspace({ handler: { command: ['false'] }, retry: { maxAttempts: 1 } }, { 'a.txt': 'a', 'b.txt': 'b' });
  const first = await runCli(['run', '-c', ws.configPath]);
  expect(first.code, first.stderr).toBe(0);
  expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 0, dead: 2 });
  // A reader may leave SQLite's empty -wal and -shm behind: the cases put their own thing there.
  for (const suffix of ['-wal', '-shm']) rmSync(`${ws.db}${suffix}`, { force: true });
  return ws;
}

async function expectRefused(configPath: string, companion: string, what: string) {
  for (const args of COMMANDS) {
    const r = await runCli([...args, '-c', configPath]);
    expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(78);
    expect(r.stderr).toContain(`state.sqlite: ${companion} is ${what}, where SQLite keeps the`);
  }
}

describe('a file SQLite keeps beside the ledger is not a regular file', () => {
  it('a symbolic link at -wal: every command exits 78 naming it, and nothing is made at its target', async () => {
    const ws = await deadLedger();
    const target = path.join(ws.dir, 'elsewhere', 'victim');
    mkdirSync(path.dirname(target));
    symlinkSync(target, `${ws.db}-wal`);
    await expectRefused(ws.configPath, `${ws.db}-wal`, `a symbolic link (to ${target})`);
    expect(existsSync(target)).toBe(false);
  }, 120_000);

  it('a FIFO at -wal: refused (exit 78) and left in place; the ledger works once it is gone', async () => {
    const ws = await deadLedger();
    execFileSync('mkfifo', [`${ws.db}-wal`]);
    await expectRefused(ws.configPath, `${ws.db}-wal`, 'a FIFO');
    expect(lstatSync(`${ws.db}-wal`).isFIFO()).toBe(true);
    rmSync(`${ws.db}-wal`);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 0, dead: 2 });
  }, 120_000);

  it('a directory at -journal: status exits 78 naming it, not "disk I/O error"', async () => {
    const ws = await deadLedger();
    mkdirSync(`${ws.db}-journal`);
    await expectRefused(ws.configPath, `${ws.db}-journal`, 'a directory');
  }, 120_000);
});

// validate opens only a ledger that exists: before the first run, a directory at `<ledger>-wal`
// (or another database there) passed it, exit 0, and every run and status was then exit 78.
describe('before the ledger exists, validate refuses what the run refuses beside it', () => {
  it('a directory at -wal, or another SQLite database there: validate exits 78 as run does', async () => {
    const ws = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'a' });
    expect(existsSync(ws.db)).toBe(false);
    mkdirSync(path.dirname(ws.db), { recursive: true });
    mkdirSync(`${ws.db}-wal`);
    for (const args of [['validate'], ['run']]) {
      const r = await runCli([...args, '-c', ws.configPath]);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(`state.sqlite: ${ws.db}-wal is a directory, where SQLite keeps the write-ahead log`);
    }
    // Refused before the run lock was taken: no lock file, and no empty file at the ledger's
    // path (status took one for a first run still creating its ledger).
    expect(readdirSync(path.dirname(ws.db))).toEqual([path.basename(`${ws.db}-wal`)]);
    rmSync(`${ws.db}-wal`, { recursive: true });
    // Another job's ledger, named after this one's log: validate says so, and makes nothing.
    const other = workspace({ name: 'other-job', handler: { command: ['true'] }, state: { sqlite: `${ws.db}-wal` } }, { 'b.txt': 'b' });
    expect((await runCli(['run', '-c', other.configPath])).code).toBe(0);
    for (const suffix of ['-wal', '-shm']) rmSync(`${ws.db}-wal${suffix}`, { force: true });
    const r = await runCli(['validate', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toContain(`state.sqlite: ${ws.db}-wal is an SQLite database (another ledger, named after this one?)`);
    expect(existsSync(ws.db)).toBe(false);
  }, 120_000);
});
