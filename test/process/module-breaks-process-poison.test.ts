/**
 * A module handler whose code, at one item, breaks the process from outside its attempt (a
 * throw in a timer callback, a promise rejection left unhandled, process.exit from a timer)
 * stops the run (exit 1) with its claims handed back, uncharged: nothing says which item it
 * came from. The item was then handed back by every run, for good: never charged, never
 * dead-lettered, every run failing at it (and waiting out the drain for its attempt). As
 * for the other stops an item itself may cause (a module handler out of descriptors), an
 * attempt handed back so retry.maxAttempts times is charged instead, so the item ends dead.
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
  // retry.maxAttempts hand-backs, then retry.maxAttempts charges; a few runs more to show it stays ended.
  for (let run = 0; run < 2 * MAX_ATTEMPTS + 2; run++) {
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

describe('a module handler that breaks the process at one item', () => {
  for (const [how, said] of [
    ['throw', /uncaught exception: thrown from a timer of poison\.txt/],
    ['reject', /promise rejection unhandled: lost promise of poison\.txt/],
    ['exit', /process\.exit\(0\)/],
  ] as const) {
    it(`(${how}) is charged after retry.maxAttempts hand-backs and ends dead; the other items are done`, async () => {
      const ws = workspace(CONFIG, FILES);
      await expectPoisonDead(ws.configPath, await runUntilDead(ws.configPath, how, said), said);
    });
  }
});

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a module handler that breaks the process at one item', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('(throw) is charged after retry.maxAttempts hand-backs and ends dead; the other items are done', async () => {
    const url = await server.createDatabase('breaks_process');
    const said = /uncaught exception: thrown from a timer of poison\.txt/;
    const ws = workspace({ ...CONFIG, state: { postgres: url } }, FILES);
    await expectPoisonDead(ws.configPath, await runUntilDead(ws.configPath, 'throw', said), said);
  });
});
