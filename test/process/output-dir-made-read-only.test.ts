/**
 * A handler that makes the directory its {output} is in read-only for its owner: `chmod 555
 * "$(dirname "$2")"`, or a `tar -x` or `cp -a` there of a tree whose top is read-only. Before,
 * every later run ended at its start (exit 1, "cannot create or write in .../job-<name>") until
 * someone gave the rights back by hand, and the item was never charged; and one that exited 0
 * after it stopped every run at its item (its output's rename refused), never charged either.
 * That directory was then the job's temp directory, shared by all attempts: an item whose
 * attempt ran beside it failed too, was handed back with it, and charged with it in the end
 * (dead-lettered). Each attempt now has a directory of its own: its handler's damage is its
 * own. As an unprivileged user: root ignores the modes.
 */
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, FIXTURES, runCli, statusJson, workspace, type Workspace } from '../helpers/cli.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { attempts, charged } from '../helpers/ledger-sums.js';
import { chownTree, NOBODY } from '../helpers/users.js';

const isRoot = process.getuid?.() === 0;
const HANDLER = ['/bin/sh', path.join(FIXTURES, 'process/read-only-output-dir.sh'), '{path}', '{output}'];

/** The state of `id` in the ledger at `db`, read directly (no CLI start between runs). */
async function stateOf(db: string, id: string): Promise<string | undefined> {
  const ledger = await openSqliteLedger(db);
  try {
    return (await ledger.get(id))?.state;
  } finally {
    await ledger.close();
  }
}

/** Runs `cronsafe run` as `as` until bad.txt is dead or done (12 at most); every run's stderr. */
async function runUntilSettled(ws: Workspace, as: { uid: number; gid: number }, sync: string | undefined): Promise<{ codes: number[]; stderr: string }> {
  const codes: number[] = [];
  let stderr = '';
  // The ledger is read only after a run: read first, as root, it would be made root's.
  for (let run = 1; run <= 12; run++) {
    if (sync !== undefined) rmSync(path.join(sync, 'broken'), { force: true });
    const r = await runCli(['run', '-c', ws.configPath], as);
    codes.push(r.code ?? -1);
    stderr += r.stderr;
    if (['dead', 'done'].includes((await stateOf(ws.db, 'bad.txt')) ?? '')) break;
  }
  return { codes, stderr };
}

/** A workspace of bad.txt and good.txt for HANDLER, owned by nobody; `sync`: with the fixture's SYNC_DIR. */
function nobodyWorkspace(env: Record<string, string>, sync: boolean): { ws: Workspace; syncDir: string | undefined } {
  const ws = workspace({}, { 'bad.txt': 'bad\n', 'good.txt': 'good\n' });
  const syncDir = sync ? path.join(ws.dir, 'sync') : undefined;
  if (syncDir !== undefined) mkdirSync(syncDir);
  // Backoff shortened to iterate; retry.maxAttempts is the default (5).
  const all = { BAD_ID: 'bad.txt', ...env, ...(syncDir !== undefined ? { SYNC_DIR: syncDir } : {}) };
  configure(ws, { handler: { command: HANDLER, env: all }, retry: { backoffSeconds: 0, backoffMaxSeconds: 0 } });
  chownTree(ws.dir, NOBODY);
  return { ws, syncDir };
}

// The cases share nothing and mostly wait on their runs: side by side. Each starts up to a
// dozen runs one after another, which a loaded machine took past 120 s: the timeout only
// stops a hang, and a run's start there is no fault of the product.
describe.skipIf(!isRoot)('a handler that makes the directory of its {output} read-only', () => {
  const as = { uid: NOBODY, gid: NOBODY };

  // good.txt copies its item only once bad.txt's handler has made its directory read-only, in
  // every run: before, it failed with it each time (EACCES), was handed back with it, and was
  // charged with it after retry.maxAttempts hand-backs until dead-lettered.
  it.concurrent('and fails: that item alone is charged and dead-lettered; the item running beside it is done at once, never handed back', async () => {
    const { ws, syncDir } = nobodyWorkspace({ EXIT: '3' }, true);
    const { codes, stderr } = await runUntilSettled(ws, as, syncDir);
    expect(stderr).not.toMatch(/cannot create or write in|not writable by this user/);
    // Charged without stopping: its retries (no backoff here) come in the same pass.
    expect(codes.every((c) => c === 0), stderr).toBe(true);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 1 });
    // Its one attempt, its success: never failed, never handed back.
    expect(await attempts(ws.db, ['good.txt'])).toBe(1);
    expect(readFileSync(path.join(ws.out, 'good.txt.out'), 'utf8')).toBe('good\n');
    expect(await charged(ws.db, ['bad.txt'])).toBe(5);
  }, 300_000);

  // Its output is whole (copied before the chmod) and the handler said so: committed, the
  // directory's rights ours to give back (mode 000 too: the output could not even be looked at).
  it.concurrent.each([['555'], ['000']])('(mode %s) and exits 0: its output is committed, nothing charged, nothing stops', async (mode) => {
    const { ws, syncDir } = nobodyWorkspace({ EXIT: '0', RO_MODE: mode }, true);
    const { codes, stderr } = await runUntilSettled(ws, as, syncDir);
    expect(codes, stderr).toEqual([0]);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
    expect(await attempts(ws.db, ['bad.txt', 'good.txt'])).toBe(2);
    expect(readFileSync(path.join(ws.out, 'bad.txt.out'), 'utf8')).toBe('bad\n');
    expect(readFileSync(path.join(ws.out, 'good.txt.out'), 'utf8')).toBe('good\n');
  }, 300_000);

  // A directory every attempt shares (.cronsafe-tmp itself, two levels up) still stops the pass,
  // uncharged, until the item was handed back retry.maxAttempts times; the next runs start.
  it.concurrent('(.cronsafe-tmp itself, mode 000) and fails: the next runs start, the item is charged after retry.maxAttempts hand-backs and dead-lettered; the other is done', async () => {
    const { ws } = nobodyWorkspace({ EXIT: '3', RO_UP: '2', RO_MODE: '000' }, false);
    const first = await runCli(['run', '-c', ws.configPath], as);
    expect(first.code, first.stderr).toBe(1);
    expect(await charged(ws.db, ['bad.txt'])).toBe(0);
    // Uncharged hand-backs up to retry.maxAttempts, then one charge per run up to it again.
    const { stderr } = await runUntilSettled(ws, as, undefined);
    // Before: exit 1 at the start, "cannot create or write in .../job-test-job", on every run.
    expect(stderr).not.toMatch(/cannot create or write in/);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 1 });
    expect(await charged(ws.db, ['bad.txt'])).toBe(5);
    const next = await runCli(['run', '-c', ws.configPath], as);
    expect(next.code, next.stderr).toBe(0);
  }, 300_000);
});
