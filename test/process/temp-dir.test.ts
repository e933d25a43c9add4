import { chownSync, existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, runCli, statusJson, workspace, type Workspace } from '../helpers/cli.js';

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
