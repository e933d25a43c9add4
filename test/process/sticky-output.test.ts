/**
 * output.directory shared by several users (mode 1777, as /tmp): another user's file at an
 * item's `<id>.out` (planted, or left by a run under an earlier runAsUser) cannot be replaced
 * by cronsafe's user, the sticky bit forbids it (EPERM). The rename of that item's output
 * failed at every run, the pass stopped there (exit 1) before the other items, and the message
 * blamed the directory's write permission, which was fine. As an unprivileged user: root may
 * replace it.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, runCli, statusJson, workspace } from '../helpers/cli.js';
import { NOBODY } from '../helpers/users.js';

const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];
const OTHER = 1000;

describe.skipIf(process.getuid?.() !== 0)('another user\'s file at <id>.out in a sticky output.directory', () => {
  it('that item is dead-lettered at once with the reason, the others are done, exit 0; the file is left alone', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' });
    mkdirSync(ws.out);
    expect(spawnSync('chown', ['-R', `${NOBODY}:${NOBODY}`, ws.dir]).status).toBe(0);
    chownSync(ws.out, 0, 0);
    chmodSync(ws.out, 0o1777);
    const theirs = path.join(ws.out, 'b.txt.out');
    writeFileSync(theirs, 'not yours\n');
    chownSync(theirs, OTHER, OTHER);

    const r = await runCli(['run', '-c', ws.configPath], { uid: NOBODY, gid: NOBODY });
    // Before: exit 1, `cannot move the output of "b.txt" into <out>: EPERM: a directory there
    // ... is not writable by this user`, at every run.
    expect(r.code, r.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 1 });
    const dead = await runCli(['dead-letter', 'list', '--json', '-c', ws.configPath]);
    expect(JSON.parse(dead.stdout)).toEqual([
      expect.objectContaining({ id: 'b.txt', lastError: expect.stringContaining(`${theirs} is another user's file (uid ${OTHER}) in a sticky directory`) }),
    ]);
    expect(readFileSync(theirs, 'utf8')).toBe('not yours\n');
    expect(readFileSync(path.join(ws.out, 'a.txt.out'), 'utf8')).toContain('a\n--cronsafe-test-footer');
  });
});
