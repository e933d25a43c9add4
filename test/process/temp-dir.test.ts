import { spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { configure, FIXTURES, runCli, spawnCli, statusJson, workspace, type Workspace } from '../helpers/cli.js';
import { fill } from '../helpers/fill.js';
import { filesIn, until } from '../helpers/wait.js';

const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];

/** Files that are not cronsafe's, in a directory a careless link points at. */
function precious(ws: Workspace): string {
  const dir = path.join(ws.dir, 'precious');
  mkdirSync(path.join(dir, 'sub'), { recursive: true });
  writeFileSync(path.join(dir, 'thesis.tex'), 'years of work');
  writeFileSync(path.join(dir, 'sub', 'data.csv'), '1,2,3');
  return dir;
}

async function refused(ws: Workspace, problem: RegExp) {
  const r = await runCli(['run', '-c', ws.configPath]);
  expect(r.code, r.stderr).toBe(1);
  expect(r.stderr).toContain(path.join(ws.out, '.cronsafe-tmp'));
  expect(r.stderr).toMatch(problem);
  expect(r.stderr).toMatch(/nothing in it was deleted/);
  // One clear line for the operator, not a stack trace; and a failed run that alerts see.
  expect(r.stderr).not.toMatch(/\n\s+at /);
  expect(r.lines.find((l) => l.msg === 'run finished')).toMatchObject({ outcome: 'failed', exitCode: 1 });
  const runs = (await statusJson(ws.configPath)).recentRuns as Array<{ outcome: string }>;
  expect(runs[0]?.outcome).toBe('failed');
  // Nothing was processed: no output, the handler never ran.
  expect(readdirSync(ws.out).filter((f) => f.endsWith('.out'))).toEqual([]);
  return r;
}

describe("cronsafe's temp directory is used only when it is our own real directory", () => {
  it('a symlinked .cronsafe-tmp is refused with exit 1 and its target is left alone', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a' });
    const target = precious(ws);
    mkdirSync(ws.out);
    symlinkSync(target, path.join(ws.out, '.cronsafe-tmp'));
    await refused(ws, /symbolic link/);
    expect(readdirSync(target).sort()).toEqual(['sub', 'thesis.tex']);
    expect(existsSync(path.join(target, 'sub', 'data.csv'))).toBe(true);
  });

  it('a .cronsafe-tmp that is a file is refused', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a' });
    mkdirSync(ws.out);
    writeFileSync(path.join(ws.out, '.cronsafe-tmp'), 'not a directory');
    await refused(ws, /not a directory/);
    expect(existsSync(path.join(ws.out, '.cronsafe-tmp'))).toBe(true);
  });

  it.skipIf(process.getuid?.() !== 0)("a .cronsafe-tmp owned by another user is refused and its files kept", async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a' });
    const tmp = path.join(ws.out, '.cronsafe-tmp');
    mkdirSync(tmp, { recursive: true });
    writeFileSync(path.join(tmp, 'theirs.tmp'), 'x');
    chownSync(tmp, 65534, 65534);
    await refused(ws, /owned by uid 65534/);
    expect(readdirSync(tmp)).toEqual(['theirs.tmp']);
  });

  it("the job's own temp directory is emptied of leftovers, without following links inside it; other jobs' are left alone", async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a' });
    const target = precious(ws);
    const tmp = path.join(ws.out, '.cronsafe-tmp', 'job-test-job');
    mkdirSync(tmp, { recursive: true });
    writeFileSync(path.join(tmp, 'left-1.tmp'), 'half');
    symlinkSync(target, path.join(tmp, 'link'));
    const other = path.join(ws.out, '.cronsafe-tmp', 'job-other');
    mkdirSync(other);
    writeFileSync(path.join(other, 'in-flight.tmp'), 'another job is writing this');
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(readdirSync(tmp)).toEqual([]);
    expect(readdirSync(other)).toEqual(['in-flight.tmp']);
    expect(readdirSync(target).sort()).toEqual(['sub', 'thesis.tex']);
    expect(existsSync(path.join(ws.out, 'a.txt.out'))).toBe(true);
  });
});

describe('cronsafe\'s temp directory replaced by a link while attempts run', () => {
  it('stops the run (exit 1) and charges none of the attempts; the link target is left alone', async () => {
    const SLOW = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];
    const ws = workspace({ handler: { command: SLOW }, concurrency: 2, log: { level: 'info' } }, { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' });
    const target = precious(ws);
    const markers = path.join(ws.dir, 'markers');
    const run = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '1500' } });
    await until(() => filesIn(markers).length === 2, 'two handlers to start');
    const tmp = path.join(ws.out, '.cronsafe-tmp');
    renameSync(tmp, `${tmp}.moved`);
    symlinkSync(target, tmp);
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(1);
    expect(run.stderr()).toMatch(/\.cronsafe-tmp is a symbolic link.*replaced during the run/);
    const ledger = await openSqliteLedger(ws.db);
    try {
      for (const id of ['a.txt', 'b.txt', 'c.txt']) {
        const item = await ledger.get(id);
        expect(item?.state, id).toBe('pending');
        // Started or not, nothing is charged to the items: the environment failed them.
        expect((item?.attempts ?? 0) - (item?.released ?? 0), id).toBe(0);
      }
    } finally {
      await ledger.close();
    }
    expect(readdirSync(target).sort()).toEqual(['sub', 'thesis.tex']);
  }, 60_000);
});

// The chart's layout puts the ledger beside the outputs: when the output directory cannot
// be used at start-up because its volume is in trouble, the ledger often cannot take the
// failed run's record either. That record's error replaced the output directory's, as
// "cronsafe: fatal: SqliteError: database or disk is full" and a stack trace.
describe('a .cronsafe-tmp refused at start-up while the ledger cannot record the failed run', () => {
  it.skipIf(process.getuid?.() !== 0)('says what is wrong with .cronsafe-tmp (exit 1, one line), not the ledger\'s error as a fatal stack trace', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/slow-import-module.mjs') } }, { 'a.txt': 'a' });
    const volume = path.join(ws.dir, 'volume');
    mkdirSync(volume);
    mkdirSync(ws.out);
    expect(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', volume]).status).toBe(0);
    try {
      configure(ws, { state: { sqlite: path.join(volume, 'cronsafe.db') } });
      const target = precious(ws);
      const marker = path.join(ws.dir, 'importing');
      const env = { INVOCATIONS: path.join(ws.dir, 'invocations.log'), IMPORTING_MARKER: marker, IMPORT_DELAY_MS: '3000' };
      const run = spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 60_000 });
      // While the handler's module loads (before the output directory is prepared): the
      // temp directory becomes a link, and the ledger's volume fills.
      await until(() => existsSync(marker) && readFileSync(marker, 'utf8') === String(run.child.pid), 'the module import', 30_000);
      rmSync(path.join(ws.out, '.cronsafe-tmp'), { recursive: true, force: true });
      symlinkSync(target, path.join(ws.out, '.cronsafe-tmp'));
      fill(path.join(volume, 'filler'));
      const { code } = await run.exited;
      expect(code, run.stderr()).toBe(1);
      expect(run.stderr()).toMatch(/^cronsafe: cronsafe's own directory .*\.cronsafe-tmp is a symbolic link[^\n]*\n$/);
      expect(readdirSync(target).sort()).toEqual(['sub', 'thesis.tex']);
      expect(existsSync(env.INVOCATIONS)).toBe(false);
    } finally {
      spawnSync('umount', ['-l', volume]);
    }
  }, 60_000);
});
