/**
 * The user's or the pod's process limit reached (RLIMIT_NPROC, `ulimit -u`, or a pod's
 * pids.max: both count threads too) when cronsafe forks a handler: the environment's fault,
 * as EMFILE is. The item is not charged, the pass stops (exit 1), and one line says which
 * limit it is; "spawn sh EAGAIN" alone named neither the limit nor what to do.
 */
import { rmSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import path from 'node:path';
import { CLI, FIXTURES, runCli, spawnCliRaw, statusJson, workspace, type Workspace } from '../helpers/cli.js';
import { charged } from '../helpers/ledger-sums.js';
import { chownTree } from '../helpers/users.js';

/**
 * A uid of its own, no other test's (nobody's is): RLIMIT_NPROC counts every process and
 * thread of the real uid, so anything else running as that user would move the limit.
 */
const UID = 65531;

const has = (tool: string): boolean => spawnSync(tool, ['--version'], { stdio: 'ignore' }).status === 0;
const usable = process.getuid?.() === 0 && has('setpriv') && has('prlimit');

const made: Workspace[] = [];
afterEach(() => {
  for (const ws of made.splice(0)) rmSync(ws.dir, { recursive: true, force: true });
});

/** `cronsafe run` as UID under `prlimit --nproc=limit`. */
async function runLimited(ws: Workspace, limit: number) {
  const r = spawnCliRaw('setpriv', [`--reuid=${UID}`, `--regid=${UID}`, '--clear-groups', 'prlimit', `--nproc=${limit}:${limit}`, process.execPath, CLI, 'run', '-c', ws.configPath], {
    cwd: ws.dir,
  });
  const { code } = await r.exited;
  return { code, stderr: r.stderr(), lines: r.lines };
}

describe.skipIf(!usable)('the process limit reached at cronsafe\'s own fork of a handler', () => {
  it('EAGAIN: one line naming the limit, exit 1, nothing charged; the next run finishes', async () => {
    const files = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`item-${String(i).padStart(2, '0')}`, `payload ${i}\n`]));
    const ids = Object.keys(files);
    // A handler that forks nothing itself: only cronsafe's forks meet the limit. Node's own
    // threads (cronsafe's and its two helpers', ~25) count too, and vary a little from one
    // machine to another, so the limit is lowered until a run cannot start all 8 handlers.
    let seen: { limit: number; code: number | null; stderr: string; ws: Workspace } | undefined;
    for (let limit = 48; limit >= 20 && !seen; limit -= 2) {
      const ws = workspace({ concurrency: 8, handler: { command: ['sleep', '1'] } }, files);
      made.push(ws);
      chownTree(ws.dir, UID);
      const r = await runLimited(ws, limit);
      if (r.code === 0) continue;
      seen = { limit, ...r, ws };
    }
    expect(seen, 'no limit in 20..48 stopped a run').toBeDefined();
    const { limit, code, stderr, ws } = seen!;
    expect(stderr, `--nproc=${limit}`).toMatch(
      /^cronsafe: run failed: the process limit \(pids\.max of the pod \/ ulimit -u\) is reached: cannot run handler\.command "sleep": [^\n]*EAGAIN[^\n]*; stopping, nothing charged \(raise the limit or lower concurrency[^\n]*\)\n$/,
    );
    expect(code, stderr).toBe(1);
    const { items } = await statusJson(ws.configPath);
    expect(items.dead, stderr).toBe(0);
    // The items that did run are done; none that did not is charged.
    expect(await charged(ws.db, ids), stderr).toBe(items.done);
    const next = await runCli(['run', '-c', ws.configPath], { uid: UID, gid: UID, cwd: ws.dir });
    expect(next.code, next.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 16, dead: 0 });
  }, 180_000);

  // A handler's own fork refused is its failure, charged as any (a shell's "Cannot fork" too),
  // but its message must say why: "spawn sleep EAGAIN" alone did not name the limit.
  it("a module handler's own spawn refused with EAGAIN: charged, and its error names the process limit", async () => {
    const files = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`item-${String(i).padStart(2, '0')}`, `payload ${i}\n`]));
    let failed: string | undefined;
    for (let limit = 40; limit >= 12 && failed === undefined; limit -= 2) {
      const ws = workspace({ concurrency: 8, handler: { module: path.join(FIXTURES, 'process/spawn-sleep-module.mjs') } }, files);
      made.push(ws);
      chownTree(ws.dir, UID);
      const r = await runLimited(ws, limit);
      failed = r.lines.find((l) => l.msg === 'item failed; will retry')?.error as string | undefined;
    }
    expect(failed, 'no limit in 12..40 made a spawn of the module fail').toBeDefined();
    expect(failed).toBe('spawn sleep EAGAIN (its fork was refused: the process limit, pids.max of the pod / ulimit -u, is reached)');
  }, 180_000);
});
