/**
 * A handler whose {output} is a tree of directories its owner cannot write or list (`cp -r`
 * of a read-only tree, a Go module cache). cronsafe's removal of a temp path (a failed
 * attempt's, or a killed run's at the next start) got EACCES there: the failed attempt
 * left it behind silently, and every later run ended at start-up with `cronsafe: fatal:
 * EACCES ... rmdir`, the job stuck until someone cleaned the temp directory by hand. As an
 * unprivileged user: root ignores the modes.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, FIXTURES, runCli, spawnCli, statusJson, workspace, type Workspace } from '../helpers/cli.js';
import { NOBODY } from '../helpers/users.js';
import { filesIn, until } from '../helpers/wait.js';

const isRoot = process.getuid?.() === 0;
/** Run as nobody when root (whom the modes do not stop), else as ourselves. */
const as = isRoot ? { uid: NOBODY, gid: NOBODY } : {};
const TREE = ['/bin/sh', path.join(FIXTURES, 'process/read-only-tree.sh'), '{output}'];
const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];

function owned(ws: Workspace): void {
  if (isRoot) expect(spawnSync('chown', ['-R', `${NOBODY}:${NOBODY}`, ws.dir]).status).toBe(0);
}

const tempDir = (ws: Workspace) => path.join(ws.out, '.cronsafe-tmp', 'job-test-job');

describe('a handler leaves a read-only directory tree at {output}', () => {
  it.each([
    ['a failed attempt: its tree is removed, and the next run starts', {}],
    ['a tree whose read-only directory is named in bytes that are not UTF-8: removed, and the next run starts', { BYTE_NAME: '1', EXIT: '3' }],
  ])('%s', async (_name, env: Record<string, string>) => {
    const ws = workspace({ handler: { command: TREE, env } }, { 'a.txt': 'a' });
    owned(ws);
    const first = await runCli(['run', '-c', ws.configPath], as);
    expect(first.code, first.stderr).toBe(0);
    expect(filesIn(tempDir(ws)), 'the failed attempt left nothing behind').toEqual([]);
    const next = await runCli(['run', '-c', ws.configPath], as);
    expect(next.code, next.stderr).toBe(0);
    expect(next.stderr).not.toMatch(/EACCES/);
  });

  it('a killed run: the next run removes the tree and finishes the item', async () => {
    const ws = workspace({ handler: { command: TREE } }, { 'a.txt': 'a' });
    const marker = path.join(ws.dir, 'tree-written');
    configure(ws, { handler: { command: TREE, env: { MARKER: marker, SLEEP: '60' } } });
    owned(ws);
    const run = spawnCli(['run', '-c', ws.configPath], { ...as, timeoutMs: 60_000 });
    await until(() => filesIn(ws.dir).includes('tree-written'), 'the handler to write its tree');
    process.kill(run.child.pid!, 'SIGKILL');
    await run.exited;
    configure(ws, { handler: { command: COPY } });
    if (isRoot) spawnSync('chown', [`${NOBODY}:${NOBODY}`, ws.configPath]);
    const next = await runCli(['run', '-c', ws.configPath], as);
    expect(next.code, next.stderr).toBe(0);
    expect(next.stderr).not.toMatch(/EACCES/);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ done: 1, claimed: 0, dead: 0 });
  }, 60_000);
});
