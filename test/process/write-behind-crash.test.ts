import { spawn } from 'node:child_process';
import { appendFileSync, copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { journalPath } from '../../src/ledger/sqlite/start-journal.js';
import type { Claim, Ledger } from '../../src/ledger/types.js';
import { FIXTURES } from '../helpers/cli.js';

/**
 * The SQLite run connection writes claims and successes behind, through the start journal
 * (src/ledger/sqlite/write-behind.ts). A real process journals some starts and a success
 * and is SIGKILLed before anything is flushed; then the ledger is read and recovered as
 * `status` and the next run would.
 */
const CHILD = path.join(FIXTURES, 'process/write-behind-child.mjs');
const T0 = 1_700_000_000_000;
const RETRY = { maxAttempts: 3, backoffMs: 0, backoffMaxMs: 0 };
const root = mkdtempSync(path.join(tmpdir(), 'cronsafe-wb-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

interface Killed {
  file: string;
  claims: { first: Claim[]; second: Claim[]; done: unknown[] };
}

/** Run the child on `file` until READY, then SIGKILL it: its journal holds what it did, the rows do not. */
async function journalThenDie(opts: { file?: string; owner?: string; now?: number; first?: string; second?: string } = {}): Promise<Killed> {
  const file = opts.file ?? path.join(root, `t${++n}`, 'job.db');
  const args = [CHILD, file, opts.owner ?? 'host:1:run-dead', String(opts.now ?? T0), opts.first ?? 'a,b,c', opts.second ?? 'd'];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const hard = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_c, signal) => resolve(signal)));
  const ready = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      out += c;
      const line = out.split('\n').find((l) => l.startsWith('READY '));
      if (line) resolve(line.slice(6));
    });
    void exited.then(() => reject(new Error(`child exited before READY: ${out}`)));
  });
  child.kill('SIGKILL');
  expect(await exited).toBe('SIGKILL');
  clearTimeout(hard);
  return { file, claims: JSON.parse(ready) as Killed['claims'] };
}

async function withLedger<T>(file: string, opts: Parameters<typeof openSqliteLedger>[1], fn: (l: Ledger) => Promise<T>): Promise<T> {
  const ledger = await openSqliteLedger(file, opts);
  try {
    return await fn(ledger);
  } finally {
    await ledger.close();
  }
}

async function states(ledger: Ledger): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const id of ['a', 'b', 'c', 'd', 'e', 'f']) {
    const r = await ledger.get(id);
    out[id] = r ? `${r.state}/${r.attempts}` : 'none';
  }
  return out;
}

describe('a run killed with claims and successes only in its start journal', () => {
  it('left them in the journal: the rows still lag, and the attempts it started are the ones it reported', async () => {
    const { file, claims } = await journalThenDie();
    expect(claims.first.map((c) => [c.id, c.attempt])).toEqual([['a', 1], ['b', 1], ['c', 1]]);
    expect(claims.done).toEqual([{ id: 'a', result: 'applied', state: 'done' }]);
    const journal = readFileSync(journalPath(file), 'utf8');
    expect(journal.split('\n').filter((l) => l.startsWith('S\t'))).toHaveLength(4);
    // Raw rows (no journal view): nothing was flushed before the kill.
    const Database = (await import('better-sqlite3')).default;
    const db = new Database(file, { readonly: true });
    expect(db.prepare("SELECT count(*) AS n FROM items WHERE state = 'pending' AND attempts = 0").get()).toEqual({ n: 6 });
    db.close();
  });

  it.each([
    ['read-only (status, dead-letter list)', { readOnly: true }],
    ['another writer (dead-letter retry)', {}],
  ] as const)('%s reads the rows through the journal: started claimed, succeeded done', async (_who, opts) => {
    const { file } = await journalThenDie();
    await withLedger(file, opts, async (l) => {
      expect(await states(l)).toEqual({ a: 'done/1', b: 'claimed/1', c: 'claimed/1', d: 'claimed/1', e: 'pending/0', f: 'pending/0' });
      expect(await l.counts()).toEqual({ pending: 2, claimed: 3, done: 1, dead: 0 });
      expect(await l.get('b')).toMatchObject({ owner: 'host:1:run-dead' });
    });
    // Reading it changed nothing: the journal is still there for the next run.
    expect(existsSync(journalPath(file))).toBe(true);
  });

  it('the next run replays it: the started attempts are charged, the success is done and counted, nothing else moves; the journal goes', async () => {
    const { file } = await journalThenDie();
    const committedAt: number[] = [];
    await withLedger(file, { writeBehind: true }, async (l) => {
      const moved = await l.reclaimOrphans('host:2:run-next', {
        now: T0 + 5000, retry: RETRY, committed: (_id, claimedAt) => (committedAt.push(claimedAt), false),
      });
      expect(moved).toBe(3);
      expect(await states(l)).toEqual({ a: 'done/1', b: 'pending/1', c: 'pending/1', d: 'pending/1', e: 'pending/0', f: 'pending/0' });
      expect(await l.get('b')).toMatchObject({ lastError: 'attempt 1 abandoned: the run that claimed it died' });
      expect((await l.totals()).itemsDone).toBe(1);
    });
    // Committed-output recovery compares output birth times with the time each attempt started.
    expect(committedAt).toEqual([T0, T0, T0]);
    expect(existsSync(journalPath(file))).toBe(false);
  });

  it('a replay that is repeated (killed after its commit, before the journal was removed) changes nothing more', async () => {
    const { file } = await journalThenDie();
    const saved = path.join(root, `saved-${n}`);
    copyFileSync(journalPath(file), saved);
    await withLedger(file, { writeBehind: true }, (l) => l.reclaimOrphans('host:2:run-next', { now: T0 + 5000, retry: RETRY }));
    copyFileSync(saved, journalPath(file));
    await withLedger(file, { writeBehind: true }, async (l) => {
      expect(await l.reclaimOrphans('host:3:run-third', { now: T0 + 9000, retry: RETRY })).toBe(0);
      expect(await states(l)).toEqual({ a: 'done/1', b: 'pending/1', c: 'pending/1', d: 'pending/1', e: 'pending/0', f: 'pending/0' });
      expect((await l.totals()).itemsDone).toBe(1);
    });
  });

  it('requeue (another writer) writes the journal first: a success only the journal records is requeued, and the replay does not undo it', async () => {
    const { file } = await journalThenDie();
    await withLedger(file, {}, async (l) => {
      expect(await l.requeue(['a'], { states: ['done'] }, T0 + 1000)).toEqual(['a']);
      // The started attempts are now claims of the dead run, as `status` showed them.
      expect(await l.get('b')).toMatchObject({ state: 'claimed', owner: 'host:1:run-dead', attempts: 1 });
    });
    // The journal stays for the next run (it could be a live run's).
    expect(existsSync(journalPath(file))).toBe(true);
    // `status` and `plan` read through it, and see the requeue: the record is older than it.
    await withLedger(file, { readOnly: true }, async (l) => {
      expect(await l.get('a')).toMatchObject({ state: 'pending', attempts: 0 });
      expect(await l.counts()).toEqual({ pending: 3, claimed: 3, done: 0, dead: 0 });
      expect((await l.peek(['a']))[0]).toMatchObject({ state: 'pending', attempts: 0 });
    });
    await withLedger(file, { writeBehind: true }, async (l) => {
      await l.reclaimOrphans('host:2:run-next', { now: T0 + 5000, retry: RETRY });
      expect(await states(l)).toEqual({ a: 'pending/0', b: 'pending/1', c: 'pending/1', d: 'pending/1', e: 'pending/0', f: 'pending/0' });
    });
  });

  it('a journal whose records were written but not cleared (killed between the two) is not replayed over a requeue', async () => {
    const file = path.join(root, `t${++n}`, 'job.db');
    const owner = 'host:1:run-one';
    const opts = { owner, runId: owner, now: T0, leaseMs: 90_000 };
    const none = { complete: [], fail: [], release: [], gone: [] };
    const run = await openSqliteLedger(file, { writeBehind: true });
    await run.discover(['a', 'b'].map((id) => ({ id })), { runId: owner, now: T0 });
    const { claims } = await run.settle(none, T0, { ids: ['a', 'b'], opts });
    await run.settle({ ...none, complete: claims }, T0 + 10, { ids: [], opts: { ...opts, now: T0 + 10 } });
    const journal = readFileSync(journalPath(file));
    await run.counts(); // flushes: the records are in the ledger, the journal is cleared
    writeFileSync(journalPath(file), journal); // as if the kill came before the truncation
    await withLedger(file, {}, async (l) => expect(await l.requeue(['a'], { states: ['done'] }, T0 + 1000)).toEqual(['a']));
    // The dead run's journal is replayed by the next run: its records are older than the ledger.
    await withLedger(file, { writeBehind: true }, async (l) => {
      expect(await l.reclaimOrphans('host:2:run-next', { now: T0 + 5000, retry: RETRY })).toBe(0);
      expect(await l.get('a')).toMatchObject({ state: 'pending', attempts: 0 });
      expect(await l.get('b')).toMatchObject({ state: 'done', attempts: 1 });
    });
    await run.close().catch(() => undefined);
  });

  it('the journal is as readable as the ledger (0644 under umask 022), so another user\'s status reads it', async () => {
    const { file } = await journalThenDie();
    const mode = statSync(journalPath(file)).mode & 0o777;
    expect(mode & 0o044, mode.toString(8)).toBe(statSync(file).mode & 0o044);
  });

  it('a torn last record (killed mid-write) is ignored; a damaged line is skipped, the rest stands', async () => {
    const { file } = await journalThenDie();
    appendFileSync(journalPath(file), 'S\t"e"\t1\t17000');
    const lines = readFileSync(journalPath(file), 'utf8').split('\n');
    const b = lines.findIndex((l) => l.startsWith('S\t"b"'));
    lines[b] = 'S\t"b\t1\tgarbage';
    writeFileSync(journalPath(file), lines.join('\n'));
    await withLedger(file, { writeBehind: true }, async (l) => {
      await l.reclaimOrphans('host:2:run-next', { now: T0 + 5000, retry: RETRY });
      expect(await states(l)).toEqual({ a: 'done/1', b: 'pending/0', c: 'pending/1', d: 'pending/1', e: 'pending/0', f: 'pending/0' });
    });
  });

  it('an item that dies with its run every time is dead after maxAttempts journalled starts; the items never started stay uncharged', async () => {
    const file = path.join(root, `t${++n}`, 'job.db');
    for (let k = 1; k <= RETRY.maxAttempts; k++) {
      const now = T0 + k * 10_000;
      const { claims } = await journalThenDie({ file, owner: `host:1:run-${k}`, now, first: 'b', second: '-' });
      expect(claims.first).toEqual([{ id: 'b', owner: `host:1:run-${k}`, attempt: k, charged: k }]);
      await withLedger(file, { writeBehind: true }, (l) => l.reclaimOrphans(`host:9:check-${k}`, { now: now + 5000, retry: RETRY }));
    }
    await withLedger(file, { readOnly: true }, async (l) => {
      expect(await l.get('b')).toMatchObject({ state: 'dead', attempts: 3 });
      for (const id of ['a', 'c', 'd', 'e', 'f']) expect(await l.get(id), id).toMatchObject({ state: 'pending', attempts: 0 });
    });
  });
});
