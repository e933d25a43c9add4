/**
 * A module handler whose code, at one item, breaks the process from outside its attempt (a
 * throw in a timer callback, a promise rejection left unhandled, process.exit from a timer)
 * stops the run (exit 1). Its claims were handed back uncharged (nothing says which item it
 * came from), so the item came back in every run, for good: never charged, never
 * dead-lettered, every run failing at it. The async context of the breaking callback now
 * names the item: its attempt is charged, the ones beside it are not, so the culprit ends
 * dead and a good item beside it (slower than the drain, or running when a culprit that had
 * already failed left a timer that fired) is done, not dead.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURES, runCli, statusJson, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

const MODULE = path.join(FIXTURES, 'process/timer-break-module.mjs');
const MAX_ATTEMPTS = 2;

/** Runs until the poison item is dead (and a few more), each exit 0 or 1; returns the exit codes. */
async function runUntilDead(configPath: string, how: string, said: RegExp): Promise<Array<number | null>> {
  const env = { BREAK_ID: 'poison.txt', BREAK_HOW: how };
  const codes: Array<number | null> = [];
  // retry.maxAttempts charges; a few runs more to show it stays ended.
  for (let run = 0; run < MAX_ATTEMPTS + 3; run++) {
    const r = await runCli(['run', '-c', configPath], { env });
    codes.push(r.code);
    expect([0, 1], r.stderr).toContain(r.code);
    if (r.code === 1) expect(r.stderr).toMatch(said);
  }
  return codes;
}

async function expectPoisonDead(configPath: string, codes: Array<number | null>, said: RegExp): Promise<void> {
  const { items } = await statusJson(configPath);
  expect(items, `exit codes ${codes.join(' ')}`).toEqual({ pending: 0, claimed: 0, done: 2, dead: 1 });
  // Once it is dead, runs end well again.
  expect(codes.at(-1)).toBe(0);
  const dead = JSON.parse((await runCli(['dead-letter', 'list', '--json', '-c', configPath])).stdout) as Array<{ id: string; attempts: number; lastError: string }>;
  expect(dead.map((d) => d.id)).toEqual(['poison.txt']);
  expect(dead[0]!.lastError).toMatch(said);
}

const CONFIG = {
  handler: { module: MODULE, killAfterSeconds: 1 },
  concurrency: 1,
  retry: { maxAttempts: MAX_ATTEMPTS, backoffSeconds: 0, backoffMaxSeconds: 0 },
  drain: { gracePeriodSeconds: 2, marginSeconds: 1 },
  log: { level: 'info' },
};
const FILES = { 'a.txt': 'a', 'b.txt': 'b', 'poison.txt': 'p' };
/**
 * Each case runs the CLI 8-40 times one after another (runs, `status`, `plan`): a run's own
 * work is ~2.5 s (its drain 1 s), its start-up 0.3 s alone but 2-10 s at a load of 15-25,
 * where the PostgreSQL case beside a slow item took over 60 s (3 of 3 copies at load 20, and 2
 * of 3 at load 15-20) and the others 13-41 s.
 */
const LONG = 180_000;

describe('a module handler that breaks the process at one item', () => {
  for (const [how, said] of [
    ['throw', /uncaught exception: thrown from a timer of poison\.txt/],
    ['reject', /promise rejection unhandled: lost promise of poison\.txt/],
    ['exit', /process\.exit\(0\)/],
  ] as const) {
    it(`(${how}) is charged each time it breaks the process and ends dead; the other items are done`, async () => {
      const ws = workspace(CONFIG, FILES);
      await expectPoisonDead(ws.configPath, await runUntilDead(ws.configPath, how, said), said);
    }, LONG);
  }

  it('beside a good item slower than the drain, with retry.maxAttempts as users get it: the culprit ends dead, the good item done', async () => {
    const ws = workspace(SIDE_BY_SIDE, SIDE_BY_SIDE_FILES);
    await expectCulpritAlone(ws.configPath);
  }, LONG);

  it('a culprit failing on its own whose timer breaks the process after it settled: the good item beside it is not dead-lettered', async () => {
    // A backoff, so that the culprit fails once a run (with none, it fails its 5 attempts in
    // the first run, before its timer fires); the runs go on until nothing is left pending.
    // The good item first in the scan, so that it runs when the timer fires.
    const ws = workspace({ ...SIDE_BY_SIDE, retry: { backoffSeconds: 2, backoffMaxSeconds: 2 } }, { 'a-slow.txt': 's', 'poison.txt': 'p' });
    const env = { BREAK_ID: 'poison.txt', BREAK_HOW: 'throw', BREAK_AFTER_FAILING: '1', SLOW_ID: 'a-slow.txt', SLOW_MS: '2500' };
    const codes: Array<number | null> = [];
    for (let run = 0; run < 12; run++) {
      // Each run once both are due again (the backoff's jitter would have them apart).
      for (let ask = 0; ask < 1000; ask++) {
        const plan = JSON.parse((await runCli(['plan', '--json', '-c', ws.configPath])).stdout) as { retryWaiting: { count: number } };
        if (plan.retryWaiting.count === 0) break;
      }
      const r = await runCli(['run', '-c', ws.configPath], { env });
      codes.push(r.code);
      const left = (await statusJson(ws.configPath)).items;
      if ((left.pending ?? 0) + (left.claimed ?? 0) === 0) break;
    }
    const { items } = await statusJson(ws.configPath);
    expect(items, `exit codes ${codes.join(' ')}`).toEqual({ pending: 0, claimed: 0, done: 1, dead: 1 });
    const dead = JSON.parse((await runCli(['dead-letter', 'list', '--json', '-c', ws.configPath])).stdout) as Array<{ id: string }>;
    expect(dead.map((d) => d.id)).toEqual(['poison.txt']);
  }, LONG);
});

// Two at a time, the default retry.maxAttempts (5); no backoff, so that each run retries.
const SIDE_BY_SIDE = { ...CONFIG, concurrency: 2, retry: { backoffSeconds: 0, backoffMaxSeconds: 0 } };
const SIDE_BY_SIDE_FILES = { 'poison.txt': 'p', 'slow.txt': 's' };

/**
 * poison.txt breaks the process 10 ms into its attempt while slow.txt (2.5 s, longer than the
 * 1 s drain) runs beside it. Before, both were handed back uncharged run after run, until
 * retry.maxAttempts hand-backs, then both charged run after run: the good item ended dead
 * with the culprit (and before the culprit, after drains of its own).
 */
async function expectCulpritAlone(configPath: string): Promise<void> {
  const env = { BREAK_ID: 'poison.txt', BREAK_HOW: 'throw', SLOW_ID: 'slow.txt', SLOW_MS: '2500' };
  const codes: Array<number | null> = [];
  for (let run = 0; run < 12; run++) {
    const r = await runCli(['run', '-c', configPath], { env });
    codes.push(r.code);
    expect([0, 1], r.stderr).toContain(r.code);
    if (((await statusJson(configPath)).items.dead ?? 0) > 0 && r.code === 0) break;
  }
  const { items } = await statusJson(configPath);
  expect(items, `exit codes ${codes.join(' ')}`).toEqual({ pending: 0, claimed: 0, done: 1, dead: 1 });
  const dead = JSON.parse((await runCli(['dead-letter', 'list', '--json', '-c', configPath])).stdout) as Array<{ id: string; lastError: string }>;
  expect(dead.map((d) => d.id)).toEqual(['poison.txt']);
  expect(dead[0]!.lastError).toMatch(/thrown from a timer of poison\.txt/);
}

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a module handler that breaks the process at one item', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('(throw) is charged each time it breaks the process and ends dead; the other items are done', async () => {
    const url = await server.createDatabase('breaks_process');
    const said = /uncaught exception: thrown from a timer of poison\.txt/;
    const ws = workspace({ ...CONFIG, state: { postgres: url } }, FILES);
    await expectPoisonDead(ws.configPath, await runUntilDead(ws.configPath, 'throw', said), said);
  }, LONG);

  it('beside a good item slower than the drain: the culprit ends dead, the good item done', async () => {
    const url = await server.createDatabase('breaks_beside_slow');
    const ws = workspace({ ...SIDE_BY_SIDE, state: { postgres: url } }, SIDE_BY_SIDE_FILES);
    await expectCulpritAlone(ws.configPath);
  }, LONG);
});
