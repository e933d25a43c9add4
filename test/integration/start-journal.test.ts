import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { journalPath, readJournal } from '../../src/ledger/sqlite/start-journal.js';
import { fill } from '../helpers/fill.js';

/** The start journal's file under hostile conditions (ledger/sqlite/start-journal.ts). */
const T0 = 1_700_000_000_000;
const root = mkdtempSync(path.join(tmpdir(), 'cronsafe-journal-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const fresh = (): string => path.join(root, `t${++n}`, 'job.db');
const owner = 'host:1:run';
const opts = { owner, runId: owner, now: T0, leaseMs: 90_000 };
const none = { complete: [], fail: [], release: [], gone: [] };

describe('the start journal', () => {
  it('deleted mid-run: what it held is written into the ledger, and a new file takes the next records', async () => {
    const file = fresh();
    const run = await openSqliteLedger(file, { writeBehind: true });
    try {
      await run.discover(['a', 'b', 'c'].map((id) => ({ id })), { runId: owner, now: T0 });
      await run.settle(none, T0, { ids: ['a'], opts });
      unlinkSync(journalPath(file)); // an operator, a cleaner
      await run.settle(none, T0 + 1, { ids: ['b'], opts: { ...opts, now: T0 + 1 } });
      const raw = new Database(file, { readonly: true });
      // a's start was only in the deleted file: written now, not lost.
      expect(raw.prepare("SELECT state, attempts FROM items WHERE id = 'a'").get()).toEqual({ state: 'claimed', attempts: 1 });
      raw.close();
      const again = readJournal(journalPath(file));
      expect(again.starts.map((s) => s.id)).toEqual(['b']);
    } finally {
      await run.close();
    }
    expect(existsSync(journalPath(file))).toBe(false);
  });

  it("a success keeps the time it was recorded as its done_at, however late it is written into the ledger", async () => {
    // done_at decides retention and schedule.refresh; a flush (a read, the timer, close) used
    // to stamp its own clock on every success it wrote, and a replay of a dead run's journal
    // the replay's.
    for (const how of ['flush', 'replay'] as const) {
      const file = fresh();
      const run = await openSqliteLedger(file, { writeBehind: true });
      await run.discover(['a', 'b', 'c'].map((id) => ({ id })), { runId: owner, now: T0 });
      const [a, b] = (await run.settle(none, T0, { ids: ['a', 'b'], opts })).claims;
      // a: started in an earlier flush; b and c: started and succeeded in the same one.
      await run.get('a');
      const { claims: [c] } = await run.settle({ ...none, complete: [a!] }, T0 + 5_000, { ids: ['c'], opts: { ...opts, now: T0 + 5_000 } });
      await run.settle({ ...none, complete: [b!, c!] }, T0 + 9_000);
      if (how === 'flush') await run.close();
      else {
        // The run dies (it is never closed) with its successes only in the journal; the next run writes them.
        const next = await openSqliteLedger(file, { writeBehind: true });
        await next.reclaimOrphans('host:2:next', { now: T0 + 60_000, retry: { maxAttempts: 3, backoffMs: 0, backoffMaxMs: 0 } });
        await next.close();
      }
      const raw = new Database(file, { readonly: true });
      expect(raw.prepare('SELECT id, state, done_at FROM items ORDER BY id').all(), how).toEqual([
        { id: 'a', state: 'done', done_at: T0 + 5_000 },
        { id: 'b', state: 'done', done_at: T0 + 9_000 },
        { id: 'c', state: 'done', done_at: T0 + 9_000 },
      ]);
      raw.close();
    }
  });

  it('a FIFO at its path: readers (status) do not hang, the run fails naming the file', async () => {
    const file = fresh();
    mkdirSync(path.dirname(file), { recursive: true });
    expect(spawnSync('mkfifo', [journalPath(file)]).status).toBe(0);
    expect(readJournal(journalPath(file))).toEqual({ starts: [], done: [], released: [] });
    expect(() => readJournal(journalPath(file), true)).toThrow(`cronsafe's start journal ${journalPath(file)}`);
    const run = await openSqliteLedger(file, { writeBehind: true });
    try {
      await run.discover([{ id: 'a' }], { runId: owner, now: T0 });
      await expect(run.settle(none, T0, { ids: ['a'], opts })).rejects.toThrow(`cronsafe's start journal ${journalPath(file)}`);
      await expect(run.reclaimOrphans('x', { now: T0, retry: { maxAttempts: 3, backoffMs: 0, backoffMaxMs: 0 } })).rejects.toThrow(journalPath(file));
    } finally {
      await run.close().catch(() => undefined);
    }
  });

  it('a directory at its path: the error names the file; it is never removed', async () => {
    const file = fresh();
    mkdirSync(journalPath(file), { recursive: true });
    const run = await openSqliteLedger(file, { writeBehind: true });
    try {
      await run.discover([{ id: 'a' }], { runId: owner, now: T0 });
      await expect(run.settle(none, T0, { ids: ['a'], opts })).rejects.toThrow(journalPath(file));
    } finally {
      await run.close().catch(() => undefined);
    }
    expect(existsSync(journalPath(file))).toBe(true);
    // Nothing was started: the claim was never journalled, so nothing is charged.
    const raw = new Database(file, { readonly: true });
    expect(raw.prepare("SELECT state, attempts FROM items WHERE id = 'a'").get()).toEqual({ state: 'pending', attempts: 0 });
    raw.close();
  });

  it('sits beside the ledger file a symbolic link points to, as SQLite\'s -wal does', async () => {
    const real = fresh();
    const link = path.join(root, `link-${n}.db`);
    await (await openSqliteLedger(real)).close();
    spawnSync('ln', ['-s', real, link]);
    const run = await openSqliteLedger(link, { writeBehind: true });
    try {
      await run.discover([{ id: 'a' }], { runId: owner, now: T0 });
      await run.settle(none, T0, { ids: ['a'], opts });
      expect(existsSync(journalPath(real))).toBe(true);
      expect(existsSync(journalPath(link))).toBe(false);
      expect(readFileSync(journalPath(real), 'utf8')).toContain('S\t"a"\t1');
    } finally {
      await run.close();
    }
  });

  // The start records of attempts still running are carried over each flush (for a
  // hand-back written in place on a full volume). Claims settled by the ledger's own verbs
  // (complete, fail, release, forget) were carried too, for good: each flush rewrote them
  // all, and a pass over a ledger seeded that way took minutes.
  it('claims settled by the ledger\'s verbs are not carried over the next flush', async () => {
    const file = fresh();
    const run = await openSqliteLedger(file, { writeBehind: true });
    try {
      const ids = Array.from({ length: 500 }, (_, i) => `item-${i}`);
      await run.discover(ids.map((id) => ({ id })), { runId: owner, now: T0 });
      const claims = await run.claim(ids.slice(0, 400), opts);
      await run.complete(claims.slice(0, 100), T0);
      await run.fail(claims.slice(100, 200).map((claim) => ({ claim, error: 'x' })), { now: T0, retry: { maxAttempts: 5, backoffMs: 1000, backoffMaxMs: 1000 } });
      await run.release(claims.slice(200, 300), T0, 'back');
      await run.forget(claims.slice(300, 400), T0);
      // One attempt started through the write-behind, and flushed (a read flushes).
      const [live] = (await run.settle(none, T0 + 1, { ids: [ids[400]!], opts: { ...opts, now: T0 + 1 } })).claims;
      await run.get(ids[400]!);
      const carried = readFileSync(journalPath(file), 'utf8').split('\n').filter((l) => l.startsWith('S\t'));
      expect(carried).toEqual([expect.stringContaining(JSON.stringify(live!.id))]);
    } finally {
      await run.close();
    }
  });

  it('a full file system cuts a batch short: none of its starts is left to charge, the file is as before', async (ctx) => {
    // tmpfs gives a write the rest of the page the file already has, then ENOSPC: a record
    // that fits in there is whole, though the batch failed and no handler of it started.
    const dir = path.join(root, `full-${++n}`);
    mkdirSync(dir);
    if (process.getuid?.() !== 0 || spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir]).status !== 0) ctx.skip();
    try {
      const file = path.join(dir, 'job.db');
      const ids = Array.from({ length: 200 }, (_, i) => `item-${String(i).padStart(3, '0')}-${'x'.repeat(60)}`);
      const run = await openSqliteLedger(file, { writeBehind: true });
      await run.discover(ids.map((id) => ({ id })), { runId: owner, now: T0 });
      await run.settle(none, T0, { ids: [ids[0]!], opts });
      const before = readFileSync(journalPath(file), 'utf8');
      fill(path.join(dir, 'filler'));
      const batch = ids.slice(1, 101);
      await expect(run.settle(none, T0 + 1, { ids: batch, opts: { ...opts, now: T0 + 1 } })).rejects.toThrow(/ENOSPC/);
      expect(readFileSync(journalPath(file), 'utf8')).toBe(before);
      // The crash that follows (or a failed close): the next run replays the journal.
      await run.close().catch(() => undefined);
      unlinkSync(path.join(dir, 'filler'));
      const next = await openSqliteLedger(file, { writeBehind: true });
      try {
        await next.reclaimOrphans('next', { now: T0 + 2, retry: { maxAttempts: 3, backoffMs: 0, backoffMaxMs: 0 } });
        const raw = new Database(file, { readonly: true });
        const charged = raw.prepare('SELECT id FROM items WHERE attempts > 0 ORDER BY id').pluck().all();
        raw.close();
        expect(charged).toEqual([ids[0]]);
      } finally {
        await next.close();
      }
    } finally {
      spawnSync('umount', ['-l', dir]);
    }
  });

  // The ledger's file system full (the chart's one volume for queue, outputs and ledger): a
  // hand-back is a ledger write too, and failed, so the next run charged the attempt as a
  // dead run's. It is journalled instead, by overwriting its start record's type byte (no
  // new block needed), whether the start is still only in the journal or was written into
  // the ledger by an earlier flush (its record carried over the flush). An attempt that was
  // not handed back (its run killed) is still charged.
  it('the ledger full: a hand-back is journalled in place and not charged; an attempt not handed back is', async (ctx) => {
    for (const how of ['journal only', 'flushed'] as const) {
      const dir = path.join(root, `full-${++n}`);
      mkdirSync(dir);
      if (process.getuid?.() !== 0 || spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir]).status !== 0) ctx.skip();
      try {
        const file = path.join(dir, 'job.db');
        const run = await openSqliteLedger(file, { writeBehind: true });
        await run.discover(['a', 'b'].map((id) => ({ id })), { runId: owner, now: T0 });
        const [a] = (await run.settle(none, T0, { ids: ['a', 'b'], opts })).claims;
        if (how === 'flushed') await run.get('a'); // a read flushes: the starts are claims in the ledger
        fill(path.join(dir, 'filler'));
        const out = await run.settle({ ...none, release: [{ claim: a!, reason: 'not charged: the output file system is full' }] }, T0 + 1);
        expect(out.release, how).toEqual([{ id: 'a', result: 'applied', state: 'pending', availableAt: T0 + 1 }]);
        expect(readJournal(journalPath(file)).released.map((r) => [r.id, r.attempt]), how).toEqual([['a', 1]]);
        // The run is killed with the ledger still full, b running: its connection is never
        // closed. (A run that ends instead, closing its ledger, hands b back too, since its
        // attempt is over: ledger-full.test.ts, 'without output.directory'.)
        unlinkSync(path.join(dir, 'filler'));
        // Read before the next run (status): the hand-back shows, b is still claimed.
        const reader = await openSqliteLedger(file);
        try {
          expect(await reader.counts(), how).toMatchObject({ pending: 1, claimed: 1 });
          expect(await reader.get('a'), how).toMatchObject({ state: 'pending', attempts: how === 'flushed' ? 1 : 0, released: how === 'flushed' ? 1 : 0 });
        } finally {
          await reader.close();
        }
        const next = await openSqliteLedger(file, { writeBehind: true });
        try {
          await next.reclaimOrphans('next', { now: T0 + 2, retry: { maxAttempts: 3, backoffMs: 0, backoffMaxMs: 0 } });
          const raw = new Database(file, { readonly: true });
          const rows = raw.prepare('SELECT id, state, attempts, released FROM items ORDER BY id').all();
          raw.close();
          expect(rows, how).toEqual([
            { id: 'a', state: 'pending', attempts: 1, released: 1 },
            { id: 'b', state: 'pending', attempts: 1, released: 0 },
          ]);
        } finally {
          await next.close();
        }
      } finally {
        spawnSync('umount', ['-l', dir]);
      }
    }
  });

  it('a journal left by a cronsafe from before segments (its run killed, then an upgrade) is replayed, not read as empty', async () => {
    // Before segments the O line named the owner alone (`O <owner>`) and the file was emptied
    // at each flush: all of it was unwritten. Read as nothing, the killed run's starts went
    // uncharged and its successes were done again by the new version.
    const file = fresh();
    const first = await openSqliteLedger(file, { writeBehind: true });
    await first.discover(['a', 'b', 'c'].map((id) => ({ id })), { runId: owner, now: T0 });
    await first.close();
    const old = 'vm:41:old-run';
    const records = [`O\t${JSON.stringify(old)}`, 'S\t"a"\t1\t' + (T0 + 1), 'S\t"b"\t1\t' + (T0 + 2), 'D\t"a"\t1\t' + (T0 + 3)];
    const fd = openSync(journalPath(file), 'w', 0o600);
    writeSync(fd, records.join('\n') + '\n');
    closeSync(fd);
    expect(readJournal(journalPath(file), false, 7).starts.map((r) => [r.id, r.owner, r.segment])).toEqual([
      ['a', old, 8],
      ['b', old, 8],
    ]);

    const next = await openSqliteLedger(file, { writeBehind: true });
    expect(await next.get('a')).toMatchObject({ state: 'done', attempts: 1 }); // read through the journal
    expect(await next.reclaimOrphans('host:2:next', { now: T0 + 60_000, retry: { maxAttempts: 3, backoffMs: 0, backoffMaxMs: 0 } })).toBe(1);
    await next.close();
    expect(existsSync(journalPath(file))).toBe(false);
    const raw = new Database(file, { readonly: true });
    expect(raw.prepare('SELECT id, state, attempts, done_at FROM items ORDER BY id').all()).toEqual([
      { id: 'a', state: 'done', attempts: 1, done_at: T0 + 3 },
      { id: 'b', state: 'pending', attempts: 1, done_at: null }, // charged: its handler had started
      { id: 'c', state: 'pending', attempts: 0, done_at: null },
    ]);
    raw.close();
  });
});
