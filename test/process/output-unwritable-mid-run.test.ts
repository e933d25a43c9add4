/**
 * output.directory made unusable for the run's user while attempts run (an operator's
 * `chmod 000` or `chmod -R go-rwx` on the volume, a restore that changed its owner): the
 * handlers of the attempts running then cannot create their {output}, and cronsafe cannot
 * look at their temp files. Those attempts were charged (one attempt each for every item in
 * flight, dead-lettered after retry.maxAttempts such events) although no item was at fault;
 * the pass stopped only at the next claim. As an unprivileged user: root ignores the modes.
 */
import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FIXTURES, spawnCli, statusJson, workspace, type Workspace } from '../helpers/cli.js';
import { charged } from '../helpers/ledger-sums.js';
import { chownTree, NOBODY } from '../helpers/users.js';
import { until } from '../helpers/wait.js';

const isRoot = process.getuid?.() === 0;
const HELD_COPY = path.join(FIXTURES, 'process/held-copy.sh');

let restore: (() => void) | undefined;
afterEach(() => {
  restore?.();
  restore = undefined;
});

function heldWorkspace(): { ws: Workspace; env: NodeJS.ProcessEnv } {
  const ws = workspace({ handler: { command: ['/bin/sh', HELD_COPY, '{path}', '{output}'] }, concurrency: 1, retry: { maxAttempts: 1 } }, { 'a.txt': 'a\n' });
  writeFileSync(path.join(ws.dir, 'invocations'), '');
  const env = { INVOCATIONS: path.join(ws.dir, 'invocations'), HOLD_ID: 'a.txt', HOLD_DIR: ws.dir, FAIL_GLOB: '-none-' };
  return { ws, env };
}

describe.skipIf(!isRoot)('output.directory made unusable for the run user while an attempt runs', () => {
  it('chmod 000 on output.directory: the attempt is handed back uncharged, the pass stops with exit 1 naming it', async () => {
    const { ws, env } = heldWorkspace();
    chownTree(ws.dir, NOBODY);
    const run = spawnCli(['run', '-c', ws.configPath], { uid: NOBODY, gid: NOBODY, env });
    await until(() => existsSync(path.join(ws.dir, 'held')), 'the held attempt to start');
    chmodSync(ws.out, 0o000);
    restore = () => chmodSync(ws.out, 0o755);
    writeFileSync(path.join(ws.dir, 'release'), '');
    const { code } = await run.exited;
    restore();
    restore = undefined;
    // Before: exit 0, a.txt dead-lettered (maxAttempts 1) for "cannot create <out>/.cronsafe-tmp/...: Permission denied".
    expect(code, run.stderr()).toBe(1);
    expect(run.stderr()).toMatch(/output\.directory .* cannot be written by this user/);
    expect(await charged(ws.db, ['a.txt'])).toBe(0);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 1, claimed: 0, done: 0, dead: 0 });
  });

  it("chmod 000 on cronsafe's temp directory: the same", async () => {
    const { ws, env } = heldWorkspace();
    chownTree(ws.dir, NOBODY);
    const run = spawnCli(['run', '-c', ws.configPath], { uid: NOBODY, gid: NOBODY, env });
    await until(() => existsSync(path.join(ws.dir, 'held')), 'the held attempt to start');
    const temp = path.join(ws.out, '.cronsafe-tmp', 'job-test-job');
    chmodSync(temp, 0o000);
    restore = () => chmodSync(temp, 0o755);
    writeFileSync(path.join(ws.dir, 'release'), '');
    const { code } = await run.exited;
    restore();
    restore = undefined;
    expect(code, run.stderr()).toBe(1);
    expect(run.stderr()).toMatch(/cannot be written by this user/);
    expect(await charged(ws.db, ['a.txt'])).toBe(0);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 1, claimed: 0, done: 0, dead: 0 });
  });
});
