/**
 * output.directory (or a directory in it) that the run's user may write and search but not
 * read: a drop box, mode 0733, another user's. cronsafe syncs the directory after each
 * output's rename, opening it for reading: refused, every output was renamed into place and
 * then its item charged for the refused sync, until the whole backlog was dead-lettered,
 * each run exiting 0. And one it cannot even search (another user's, mode 0700): the check
 * of the output's path before the attempt threw, and the run died with a stack trace. As an
 * unprivileged user: root ignores the modes.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, runCli, statusJson, workspace, type Workspace } from '../helpers/cli.js';
import { NOBODY } from '../helpers/users.js';

const isRoot = process.getuid?.() === 0;
const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];

function asNobody(ws: Workspace): void {
  expect(spawnSync('chown', ['-R', `${NOBODY}:${NOBODY}`, ws.dir]).status).toBe(0);
}

/** A drop box at `dir`: root's, mode 0733 (nobody may write and search it, not list it). */
function dropBox(dir: string): void {
  mkdirSync(dir, { recursive: true });
  chownSync(dir, 0, 0);
  chmodSync(dir, 0o733);
}

describe.skipIf(!isRoot)('output.directory is a drop box (writable, not readable)', () => {
  it('output.directory itself: exit 1 at start-up naming it, nothing claimed or charged', async () => {
    const ws = workspace({ handler: { command: COPY }, retry: { maxAttempts: 1 } }, { 'a.txt': 'a', 'b.txt': 'b' });
    asNobody(ws);
    dropBox(ws.out);
    const r = await runCli(['run', '-c', ws.configPath], { uid: NOBODY, gid: NOBODY });
    // Before: exit 0, both outputs renamed into place and both items dead-lettered.
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`cannot read ${ws.out} to sync it: EACCES`);
    const items = (await statusJson(ws.configPath)).items;
    expect(items.dead).toBe(0);
    expect(items.claimed).toBe(0);
  });

  it('a directory in it: the attempt is handed back uncharged and the pass stops, exit 1', async () => {
    const ws = workspace({ handler: { command: COPY }, retry: { maxAttempts: 1 } }, { 'box/a.txt': 'a' });
    mkdirSync(ws.out);
    asNobody(ws);
    dropBox(path.join(ws.out, 'box'));
    const r = await runCli(['run', '-c', ws.configPath], { uid: NOBODY, gid: NOBODY });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`cannot read ${path.join(ws.out, 'box')} to sync it: EACCES`);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 1, claimed: 0, done: 0, dead: 0 });
  });
});

describe.skipIf(!isRoot)('a directory in output.directory that this user cannot search', () => {
  it('exit 1 naming the item, no crash, nothing charged', async () => {
    // Before: the lstat of the output's path threw outside the attempt: the process died with
    // a Node stack trace, and both claims were left to crash recovery, which charges them.
    const ws = workspace({ handler: { command: COPY }, retry: { maxAttempts: 1 } }, { 'sub/a.txt': 'a', 'b.txt': 'b' });
    mkdirSync(path.join(ws.out, 'sub'), { recursive: true });
    asNobody(ws);
    chownSync(path.join(ws.out, 'sub'), 0, 0);
    chmodSync(path.join(ws.out, 'sub'), 0o700);
    for (let run = 0; run < 2; run++) {
      const r = await runCli(['run', '-c', ws.configPath], { uid: NOBODY, gid: NOBODY });
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain('cronsafe: run failed: cannot look at where the output of "sub/a.txt" goes: EACCES');
      expect(r.stderr).not.toMatch(/Node\.js v|at runItem/);
      const items = (await statusJson(ws.configPath)).items;
      expect(items).toMatchObject({ claimed: 0, dead: 0 });
    }
    const dead = await runCli(['dead-letter', 'list', '--json', '-c', ws.configPath]);
    expect(JSON.parse(dead.stdout)).toEqual([]);
  });
});
