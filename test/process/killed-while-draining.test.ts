/**
 * An eviction whose grace is shorter than drain.gracePeriodSeconds (`kubectl delete pod
 * --grace-period=2`, a node drained or shut down with a short grace, `timeout -k 2`): the
 * SIGTERM starts the drain, and the SIGKILL lands before the drain handed the claims back.
 * The attempts it cut were stopped from outside, not by their items: whoever takes the claims
 * back (SQLite: the next run; PostgreSQL: the run or sibling that reclaims them once their
 * lease ran out) hands them back uncharged, as the drain would have. Before, each such
 * eviction charged them as a crash does, and a good item in flight at every eviction was
 * dead-lettered by evictions alone.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresLedger } from '../../src/ledger/postgres/index.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import type { ItemRecord } from '../../src/ledger/types.js';
import { FIXTURES, finished, runCli, spawnCli, workspace, type Workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';
import { killTree } from '../helpers/proc.js';
import { filesIn, until } from '../helpers/wait.js';

const slow = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];
const ids = ['a.txt', 'b.txt'];
const files = Object.fromEntries(ids.map((id) => [id, id]));

/**
 * `rounds` evictions in a row (SIGTERM, the drain's and the stop record's log lines, then
 * SIGKILL of the whole tree), each after `ready()`; then a clean run. Nothing may be dead,
 * and only the clean run's own attempt of each item may be charged.
 */
async function evictions(ws: Workspace, get: (id: string) => Promise<ItemRecord | null>, rounds: number, ready: () => Promise<void>): Promise<void> {
  const markers = path.join(ws.dir, 'markers');
  for (let round = 0; round < rounds; round++) {
    await ready();
    const before = filesIn(markers).length;
    const run = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '120000' }, timeoutMs: 60_000 });
    // A handler started (or, charged to death already, none will: the run ends at once).
    const started = await Promise.race([until(() => filesIn(markers).length > before, 'a handler to start').then(() => true), run.exited.then(() => false)]);
    if (!started) break;
    run.child.kill('SIGTERM');
    await run.waitFor((l) => l.msg === 'drain: stopped claiming; in-flight items may finish');
    // Over the network the record is committed a round trip after the drain began.
    await run.waitFor((l) => String(l.msg).startsWith('stop recorded in the ledger'));
    killTree(run.child.pid!);
    await run.exited;
  }
  await ready();
  const clean = await runCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '10' }, timeoutMs: 60_000 });
  expect(clean.code, clean.stderr).toBe(0);
  // It took the last eviction's claims back uncharged, and nothing was dead beforehand.
  expect(finished(clean)?.items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
  for (const id of ids) {
    const rec = await get(id);
    expect(rec!.attempts, id).toBeGreaterThan(5);
    // Only the clean run's own attempt is charged; every evicted one was handed back.
    expect(rec!.attempts - rec!.released, id).toBe(1);
  }
}

describe('a run SIGKILLed while it drained (SQLite, default retry and drain)', () => {
  it('charges nothing: ten such evictions in a row dead-letter no item, and the next clean run does them', async () => {
    const ws = workspace({ handler: { command: slow }, concurrency: 2 }, files);
    // The next run holds the lock, which proves the killed one gone: no wait between rounds.
    await evictions(ws, (id) => readRecord(ws, id), 10, async () => undefined);
    // Eleven runs one after another, each start-up ~0.3 s alone but 2-5 s at a load of 13-25
    // (the rounds' time is the start-ups': the drain and its stop record take ~50 ms), as the
    // PostgreSQL case below allows for its eight.
  }, 180_000);
});

/** An item's row, read with a connection of its own (the runs hold the ledger in between). */
async function readRecord(ws: Workspace, id: string): Promise<ItemRecord | null> {
  const ledger = await openSqliteLedger(ws.db);
  try {
    return await ledger.get(id);
  } finally {
    await ledger.close();
  }
}

describe.skipIf(PG_SKIP_REASON !== undefined)('a pod SIGKILLed while it drained (PostgreSQL, default retry and drain)', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('charges nothing: seven such evictions in a row dead-letter no item, and the next clean run does them', async () => {
    const url = await server.createDatabase('killeddraining');
    // A short lease, so that each next run takes the killed pod's claims back soon.
    const ws = workspace({ handler: { command: slow }, concurrency: 2, state: { postgres: url }, lease: { seconds: 2, renewSeconds: 1 } }, files);
    const ledger = await openPostgresLedger({ url, schema: 'cronsafe' });
    // No lock proves a pod gone: its claims are taken back once their lease ran out.
    const leasesOver = async () => {
      for (const id of ids) {
        const rec = await ledger.get(id);
        if (rec?.state === 'claimed' && (rec.leaseUntil ?? 0) >= Date.now()) return false;
      }
      return true;
    };
    try {
      await evictions(ws, (id) => ledger.get(id), 7, () => until(leasesOver, "the killed pod's leases to run out"));
    } finally {
      await ledger.close();
    }
  }, 180_000);
});
