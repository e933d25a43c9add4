/**
 * A handler that leaves a directory tree deeper than PATH_MAX (4,096 bytes) at {output}:
 * an archive unpacked there, a hostile one nesting its directories. rm's paths cannot reach
 * its bottom (ENAMETOOLONG): the failed attempt left it behind silently, and every later run
 * ended at start-up with `cronsafe: fatal: Error: ENAMETOOLONG ... unlink`, processing
 * nothing, the job stuck until someone cleaned the temp directory by hand.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, FIXTURES, runCli, spawnCli, statusJson, workspace, type Workspace } from '../helpers/cli.js';
import { NOBODY } from '../helpers/users.js';
import { filesIn, until } from '../helpers/wait.js';

const isRoot = process.getuid?.() === 0;
const DEEP = [process.execPath, path.join(FIXTURES, 'process/deep-tree-exec.mjs'), '{output}'];
const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];

const tempDir = (ws: Workspace) => path.join(ws.out, '.cronsafe-tmp', 'job-test-job');

describe('a handler leaves a directory tree deeper than PATH_MAX at {output}', () => {
  it.each([
    ['a failed attempt: its tree is removed, and the next run starts', {}, {}],
    // Read-only directories past PATH_MAX: the rights given back (as for a read-only tree)
    // cannot reach them by path either. As nobody: root ignores the modes.
    ['a failed attempt whose deepest directories are read-only too, run as an unprivileged user', { READ_ONLY: '1' }, isRoot ? { uid: NOBODY, gid: NOBODY } : {}],
  ])('%s', async (_name, env: Record<string, string>, as) => {
    const ws = workspace({ handler: { command: DEEP, env: { ...env, EXIT: '3' } } }, { 'a.txt': 'a' });
    if (isRoot && 'uid' in as) expect(spawnSync('chown', ['-R', `${NOBODY}:${NOBODY}`, ws.dir]).status).toBe(0);
    const first = await runCli(['run', '-c', ws.configPath], as);
    expect(first.code, first.stderr).toBe(0);
    // The handler wrote its whole tree (a failure of its own would be another exit code).
    expect(first.lines.find((l) => l.msg === 'item failed; will retry')?.error).toBe('exit code 3');
    expect(filesIn(tempDir(ws)), 'the failed attempt left nothing behind').toEqual([]);
    // The next run starts, and does the work there is.
    writeFileSync(path.join(ws.source, 'b.txt'), 'b');
    configure(ws, { handler: { command: COPY } });
    if (isRoot && 'uid' in as) spawnSync('chown', [`${NOBODY}:${NOBODY}`, ws.configPath, path.join(ws.source, 'b.txt')]);
    const next = await runCli(['run', '-c', ws.configPath], as);
    expect(next.code, next.stderr).toBe(0);
    expect(filesIn(ws.out)).toContain('b.txt.out');
  }, 60_000);

  it('a killed run: the next run removes the tree and finishes the item', async () => {
    const ws = workspace({ handler: { command: DEEP } }, { 'a.txt': 'a' });
    const marker = path.join(ws.dir, 'tree-written');
    configure(ws, { handler: { command: DEEP, env: { MARKER: marker, SLEEP: '60' } } });
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    await until(() => filesIn(ws.dir).includes('tree-written'), 'the handler to write its tree');
    process.kill(run.child.pid!, 'SIGKILL');
    await run.exited;
    configure(ws, { handler: { command: COPY } });
    const next = await runCli(['run', '-c', ws.configPath]);
    expect(next.code, next.stderr).toBe(0);
    expect(next.stderr).not.toMatch(/ENAMETOOLONG/);
    expect(filesIn(tempDir(ws))).toEqual([]);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ done: 1, claimed: 0, dead: 0 });
  }, 60_000);
});
