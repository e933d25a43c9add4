import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { tryLock } from '../../src/ledger/sqlite/flock.js';
import { configure, FIXTURES, finished, runCli, spawnCli, statusJson, workspace } from '../helpers/cli.js';
import { filesIn, until } from '../helpers/wait.js';

const SLOW = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];

describe('a deleted lock file does not let a second run in', () => {
  it('a start while the live run still beats in the ledger skips (exit 0, a lock skip) and reclaims nothing', async () => {
    const files = Object.fromEntries(['a', 'b', 'c', 'd'].map((n) => [`${n}.txt`, n]));
    const ws = workspace({ handler: { command: SLOW }, concurrency: 2, log: { level: 'info' } }, files);
    const markers = path.join(ws.dir, 'markers');
    const env = { MARKER_DIR: markers, SLOW_MS: '3000' };
    const first = spawnCli(['run', '-c', ws.configPath], { env });
    await until(() => filesIn(markers).length === 2, 'the first run to start two handlers');
    // A tmp cleaner, or an operator "removing a stale lock".
    unlinkSync(path.join(ws.state, 'cronsafe.lock'));

    const second = await runCli(['run', '-c', ws.configPath], { env });
    expect(second.code, second.stderr).toBe(0);
    expect(finished(second)?.outcome).toBe('skipped-locked');
    // Kept out by the flock on the ledger file itself, which deleting the lock file does not free.
    expect(second.lines.some((l) => l.msg.startsWith('skipped: another run holds the lock'))).toBe(true);
    expect(second.lines.some((l) => l.msg.startsWith('reclaimed claims'))).toBe(false);

    const done = await first.exited;
    expect(done.code, first.stderr()).toBe(0);
    expect(finished(first)?.counts).toMatchObject({ succeeded: 4 });
    // Every item's handler started exactly once: nothing was processed twice.
    expect(filesIn(markers)).toHaveLength(4);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 4, dead: 0 });
    const ledger = await openSqliteLedger(ws.db);
    try {
      expect((await ledger.totals()).lockSkips).toBe(1);
    } finally {
      await ledger.close();
    }
  });
});

describe('two runs of one ledger with different lock files (the chart: each pod its own emptyDir lock)', () => {
  it('the second is kept out by the flock on the ledger file itself: skipped, nothing processed twice', async () => {
    const files = Object.fromEntries(['a', 'b', 'c'].map((n) => [`${n}.txt`, n]));
    const ws = workspace({ handler: { command: SLOW }, concurrency: 2, log: { level: 'info' } }, files);
    const markers = path.join(ws.dir, 'markers');
    const env = { MARKER_DIR: markers, SLOW_MS: '2000' };
    const first = spawnCli(['run', '-c', ws.configPath], { env });
    await until(() => filesIn(markers).length === 2, 'the first run to start two handlers');
    const other = path.join(ws.dir, 'other.yaml');
    writeFileSync(other, readFileSync(ws.configPath, 'utf8').replace(path.join(ws.state, 'cronsafe.lock'), path.join(ws.dir, 'pod-2-tmp', 'job.lock')));
    const second = await runCli(['run', '-c', other], { env });
    expect(second.code, second.stderr).toBe(0);
    expect(finished(second)?.outcome).toBe('skipped-locked');
    // The skip names the lock that is held, the ledger file: its own lock.path is free.
    expect(second.lines.find((l) => l.msg === 'skipped: another run holds the lock')?.lock).toBe(ws.db);
    expect((await first.exited).code).toBe(0);
    expect(filesIn(markers)).toHaveLength(3);
  });
});

describe('a run killed on another host (an evicted pod, replaced on another node)', () => {
  it('its replacement, which finds the dead run\'s name in the lock file it now holds, does not wait for the heartbeat to age', async () => {
    const ws = workspace({ handler: { command: [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'] } }, { 'a.txt': 'a' });
    const dead = 'other-node:4242:dead-run';
    const ledger = await openSqliteLedger(ws.db);
    try {
      await ledger.startRun({ runId: 'dead-run', owner: dead, startedAt: Date.now() });
      await ledger.heartbeat('dead-run', Date.now());
    } finally {
      await ledger.close();
    }
    // The dead pod wrote its name into the lock file it held (the kernel released the flock).
    mkdirSync(ws.state, { recursive: true });
    writeFileSync(path.join(ws.state, 'cronsafe.lock'), `${dead}\n`);
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)?.outcome).toBe('completed');

    // Without that proof (the lock file was replaced), the flock on the ledger file itself
    // proves it: a run alive on another host would hold it.
    for (const [allowNetworkFilesystem, outcome] of [
      [false, 'completed'],
      // Where that flock is not taken (a network file system the user allowed: flock would
      // block SQLite's own locks there), a fresh heartbeat from another host still wins.
      [true, 'skipped-locked'],
    ] as const) {
      const ws2 = workspace({ handler: { command: [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'] } }, { 'a.txt': 'a' });
      configure(ws2, { state: { sqlite: ws2.db, allowNetworkFilesystem } });
      const l2 = await openSqliteLedger(ws2.db);
      try {
        await l2.startRun({ runId: 'alive-run', owner: 'other-node:4243:alive-run', startedAt: Date.now() });
        await l2.heartbeat('alive-run', Date.now());
      } finally {
        await l2.close();
      }
      const r2 = await runCli(['run', '-c', ws2.configPath]);
      expect(r2.code, r2.stderr).toBe(0);
      expect(finished(r2)?.outcome, `allowNetworkFilesystem: ${allowNetworkFilesystem}`).toBe(outcome);
    }
  });
});

describe('a lock file that is a symbolic link', () => {
  it('is refused with exit 78 naming lock.path (no run could take it); the link target is not overwritten', async () => {
    const ws = workspace({ handler: { command: [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'] } }, { 'a.txt': 'a' });
    mkdirSync(ws.state, { recursive: true });
    const victim = path.join(ws.dir, 'victim.txt');
    writeFileSync(victim, 'precious');
    symlinkSync(victim, path.join(ws.state, 'cronsafe.lock'));
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', ws.configPath]);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toMatch(/lock\.path: .*cronsafe\.lock is a symbolic link/);
    }
    expect(readFileSync(victim, 'utf8')).toBe('precious');
    expect(existsSync(path.join(ws.out, 'a.txt.out'))).toBe(false);
  });
});

describe('the local lock', () => {
  it('the holder locks the lock file again when it is deleted, so later starts see it held', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-lock-'));
    const file = path.join(dir, 'job.lock');
    const held = tryLock(file, 'holder', { recheckMs: 20 });
    expect(held).not.toBeNull();
    unlinkSync(file);
    await until(() => existsSync(file), 'the holder to recreate its lock file');
    expect(tryLock(file, 'intruder')).toBeNull();
    held!.release();
    const next = tryLock(file, 'next');
    expect(next).not.toBeNull();
    next!.release();
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('a file put in place of the lock file mid-run (renamed over it: an editor, a config tool)', () => {
  it('is locked again so later starts see it held, but not overwritten: start-up refuses to write into such a file, and so does the recheck', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-lock-'));
    const file = path.join(dir, 'job.lock');
    const held = tryLock(file, 'host:1:holder', { recheckMs: 20 });
    expect(held).not.toBeNull();
    writeFileSync(path.join(dir, 'notes.tmp'), 'maintenance until Friday, ask Ann\n');
    renameSync(path.join(dir, 'notes.tmp'), file);
    /** Whether someone holds a flock on the file now at `file`: flock(1) -n, which opens it without writing. */
    const lockedNow = (): boolean => spawnSync('flock', ['-n', '-E', '9', file, 'true']).status === 9;
    await until(lockedNow, 'the holder to lock the new file');
    expect(readFileSync(file, 'utf8')).toBe('maintenance until Friday, ask Ann\n');
    held!.release();
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('the whole state directory removed mid-run', () => {
  it('the running run locks again (later starts skip) and stops (exit 75): no second run processes the items at the same time', async () => {
    const files = Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`s${i}.txt`, `s${i}`]));
    const ws = workspace({ handler: { command: SLOW }, concurrency: 2, log: { level: 'info' } }, files);
    const markers = path.join(ws.dir, 'markers');
    // The first run's handlers work until the gate file exists, so that the first run is
    // still draining when the second starts: a fixed 3 s was over before the second run (a
    // Node start) had looked, on a loaded machine, and it then rightly ran the items.
    const gate = path.join(ws.dir, 'gate');
    const env = { MARKER_DIR: markers, GATE: gate };
    const first = spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 60_000 });
    await until(() => filesIn(markers).length === 2, 'the first run to start two handlers');
    rmSync(ws.state, { recursive: true, force: true, maxRetries: 20, retryDelay: 5 });
    // Readiness: the first run has locked its (recreated) lock file again.
    await until(() => existsSync(path.join(ws.state, 'cronsafe.lock')), 'the lock file to be recreated');
    const second = await runCli(['run', '-c', ws.configPath], { env });
    writeFileSync(gate, '');
    expect(second.code, second.stderr).toBe(0);
    expect(finished(second)?.outcome, `${first.stderr()}\n${second.stderr}`).toBe('skipped-locked');
    const done = await first.exited;
    expect(done.code, first.stderr()).toBe(75);
    expect(first.lines.some((l) => String(l.reason ?? '').includes('was removed or replaced during the run'))).toBe(true);
    // Only the first run's two attempts ever started.
    expect(filesIn(markers)).toHaveLength(2);
  }, 90_000);

  it('with fast items, whose next ledger write fails before the recheck sees the ledger go: the same exit 75, not 1', async () => {
    const files = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`f${i}.txt`, `f${i}`]));
    const ws = workspace({ handler: { command: SLOW }, concurrency: 2, log: { level: 'info' } }, files);
    const markers = path.join(ws.dir, 'markers');
    const first = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '20' }, timeoutMs: 60_000 });
    await until(() => filesIn(markers).length >= 6, 'the first run to be under way');
    rmSync(ws.state, { recursive: true, force: true, maxRetries: 20, retryDelay: 5 });
    const done = await first.exited;
    expect(done.code, first.stderr()).toBe(75);
    expect(finished(first)?.outcome).toBe('drained');
    expect(first.lines.some((l) => l.msg === 'stopping the run: what it relies on was lost')).toBe(true);
  }, 90_000);
});
