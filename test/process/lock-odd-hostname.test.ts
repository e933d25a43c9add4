/**
 * A host whose name holds a blank or a `:` (Linux takes any byte but NUL: `build box`,
 * `x:y`). Each run writes `host:pid:runId@job` into its lock file; the next start read that
 * line as "not a cronsafe lock" (a user's file named by mistake) and refused it: exit 78,
 * `lock.path: ... holds N bytes, not a cronsafe lock`, on every run after the first, a
 * FailJob for the chart's podFailurePolicy, until someone emptied the file.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, runCli, spawnCliRaw, statusJson, workspace, type Workspace } from '../helpers/cli.js';

const cp = { handler: { command: ['cp', '{path}', '{output}'] } };
const lockOf = (ws: Workspace) => path.join(ws.state, 'cronsafe.lock');

describe('the lock file of a run on a host whose name holds a blank or a colon', () => {
  for (const host of ['build box', 'x:y@z']) {
    it(`"${host}": the next start takes it as a holder's line: exit 0, the items run (validate: OK)`, async () => {
      const ws = workspace(cp, { 'a.txt': 'a', 'b.txt': 'b' });
      mkdirSync(ws.state, { recursive: true });
      // As a run there leaves it (executeRun's owner, holderLine): its process is gone.
      writeFileSync(lockOf(ws), `${host}:4242:mxbi3rul-aaf189f4@test-job\n`);
      const validate = await runCli(['validate', '-c', ws.configPath]);
      expect(validate.code, validate.stderr).toBe(0);
      const run = await runCli(['run', '-c', ws.configPath]);
      expect(run.stderr).not.toContain('not a cronsafe lock');
      expect(run.code, run.stderr).toBe(0);
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
    }, 60_000);
  }

  it('a user\'s file at lock.path that only looks like one is still refused (exit 78)', async () => {
    const ws = workspace(cp, { 'a.txt': 'a' });
    mkdirSync(ws.state, { recursive: true });
    writeFileSync(lockOf(ws), 'build box:4242:notes about the lock\n');
    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.stderr).toContain('not a cronsafe lock');
    expect(run.code).toBe(78);
  }, 60_000);

  it('runs really on such a host (a UTS namespace of its own): the second run and the third are not refused', async (ctx) => {
    if (spawnSync('unshare', ['-u', 'true']).status !== 0) ctx.skip(); // needs CAP_SYS_ADMIN
    const ws = workspace(cp, { 'a.txt': 'a' });
    for (let i = 0; i < 3; i++) {
      writeFileSync(path.join(ws.source, `n${i}.txt`), String(i));
      const p = spawnCliRaw('unshare', ['-u', 'sh', '-c', 'printf %s "$0" > /proc/sys/kernel/hostname && exec "$@"', 'build box', process.execPath, CLI, 'run', '-c', ws.configPath]);
      const { code } = await p.exited;
      expect(p.stderr()).not.toContain('not a cronsafe lock');
      expect(code, `run ${i + 1}: ${p.stderr()}`).toBe(0);
    }
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 4, dead: 0 });
  }, 90_000);
});
