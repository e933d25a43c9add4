import { existsSync, mkdtempSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { tryLock } from '../../src/lock/local.js';
import { FIXTURES, finished, runCli, spawnCli, statusJson, workspace } from '../helpers/cli.js';
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
    expect(second.lines.some((l) => l.msg.startsWith('skipped: another run of this job is alive'))).toBe(true);
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
