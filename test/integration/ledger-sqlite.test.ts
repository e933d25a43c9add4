import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { openLedger } from '../../src/ledger/open.js';
import { CLAIM_DUE_SQL, CLAIM_IDS_SQL, CLAIMABLE_ROWS_SQL } from '../../src/ledger/sqlite/claim.js';
import { CLAIMABLE_IDS_SQL, CLAIMABLE_SQL, DISCOVER_IDS_SQL, DISCOVER_SQL } from '../../src/ledger/sqlite/discover.js';
import { LAST_OCCURRENCE_SQL } from '../../src/ledger/sqlite/events.js';
import { COMPLETE_SQL, FORGET_UNSEEN_SQL } from '../../src/ledger/sqlite/finish.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { migrate } from '../../src/ledger/sqlite/migrate.js';
import { MIGRATIONS } from '../../src/ledger/sqlite/migrations/index.js';
import { ADOPT_BASELINE_SQL, REFRESH_SQL } from '../../src/ledger/sqlite/refresh.js';
import { CHUNK_SQL, MARK_MISSING_SQL } from '../../src/ledger/sqlite/prune.js';
import { RETRY_DEAD_PAGE, RETRY_DEAD_PAGE_SQL } from '../../src/ledger/sqlite/recover.js';
import { FINISHED_PAGE_SQL, PEEK_SQL, REQUEUE_SQL } from '../../src/ledger/sqlite/requeue.js';
import { loadConfig } from '../../src/config/load.js';
import { ledgerContract } from '../contract/ledger-contract.js';
import { storeContract } from '../contract/store-contract.js';
import { workspace } from '../helpers/cli.js';
import { discoverAndClaim, items, RETRY, T0 } from '../contract/ledger-fixtures.js';

const root = mkdtempSync(join(tmpdir(), 'cronsafe-ledger-'));
let n = 0;
/** A path in a directory of its own that does not exist yet (the ledger creates it). */
const freshFile = (): string => join(root, `t${++n}`, 'state', 'cronsafe.db');
afterAll(() => rmSync(root, { recursive: true, force: true }));

/**
 * Transactions committed into the ledger's WAL since it was last reset: its frames of the
 * current salt whose header gives the database size (a commit's last frame).
 */
function walCommits(file: string): number {
  const wal = readFileSync(`${file}-wal`);
  if (wal.length < 32) return 0;
  const pageSize = wal.readUInt32BE(8);
  const salt = wal.subarray(16, 24);
  let n = 0;
  for (let at = 32; at + 24 + pageSize <= wal.length; at += 24 + pageSize) {
    if (!wal.subarray(at + 8, at + 16).equals(salt)) break;
    if (wal.readUInt32BE(at + 4) !== 0) n++;
  }
  return n;
}

ledgerContract('sqlite', () => openSqliteLedger(freshFile()));
// As `cronsafe run` opens it: claims and successes written behind through the start journal.
ledgerContract('sqlite (write-behind)', () => openSqliteLedger(freshFile(), { writeBehind: true }));
storeContract('sqlite', () => loadConfig(workspace({ handler: { command: ['true'] } }).configPath), { shared: false });

describe('SQLite ledger specifics', () => {
  it.each([false, true])('deferCharged (write-behind %s): an item charged or handed back is left to the sweep, a fresh one is not', async (writeBehind) => {
    const ledger = await openSqliteLedger(freshFile(), { writeBehind });
    const opts = { owner: 'o', runId: 'r1', now: T0, leaseMs: 60_000 };
    const claims = await discoverAndClaim(ledger, items('failed', 'handed-back', 'fresh-done'), opts);
    const by = new Map(claims.map((c) => [c.id, c]));
    await ledger.fail([{ claim: by.get('failed')!, error: 'boom' }], { now: T0, retry: { ...RETRY, backoffMs: 0, backoffMaxMs: 0 } });
    await ledger.release([by.get('handed-back')!], T0, 'drain');
    await ledger.complete([by.get('fresh-done')!], T0);
    const next = { runId: 'r2', now: T0 + 1 };
    const found = items('new', 'failed', 'handed-back', 'fresh-done');
    expect(await ledger.discover(found, next)).toEqual(['new', 'failed', 'handed-back']);
    // A drain's hand-back too: offered first again, items that outlast the time between
    // drains would take every slot of every run (test/process/drained-again.test.ts).
    expect(await ledger.discover(found, { ...next, deferCharged: true })).toEqual(['new']);
    // Still pending and seen by the pass: the sweep takes them.
    const due = await ledger.claimDue({ ...opts, runId: 'r2', now: T0 + 1, limit: 10 });
    expect(due.map((c) => c.id).sort()).toEqual(['failed', 'handed-back', 'new']);
    await ledger.close();
  });

  it('a suspect handed back by a drain is still a suspect: the next sweep runs it alone', async () => {
    const ledger = await openSqliteLedger(freshFile(), { writeBehind: true });
    const retry = { ...RETRY, backoffMs: 0, backoffMaxMs: 0 };
    // Two runs died with the same three attempts in flight: all three are suspects.
    await discoverAndClaim(ledger, items('a', 'b', 'c'), { owner: 'dead', runId: 'r1', now: T0, leaseMs: 60_000 });
    await ledger.reclaimAbandoned('o1', { now: T0 + 1, retry });
    await ledger.discover(items('a', 'b', 'c'), { runId: 'r1b', now: T0 + 1, deferCharged: true });
    expect(await ledger.claimDue({ owner: 'dead2', runId: 'r1b', now: T0 + 1, leaseMs: 60_000, limit: 4 })).toHaveLength(3); // once: not suspects yet
    await ledger.reclaimAbandoned('o2', { now: T0 + 1, retry });
    expect(await ledger.discover(items('a', 'b', 'c'), { runId: 'r2', now: T0 + 2, deferCharged: true })).toEqual([]);
    const [alone, ...beside] = await ledger.claimDue({ owner: 'o2', runId: 'r2', now: T0 + 2, leaseMs: 60_000, limit: 4 });
    expect(beside).toEqual([]);
    // The pod is drained while the suspect runs: its attempt is handed back, not charged.
    await ledger.release([alone!], T0 + 3, 'interrupted: drain deadline reached');
    expect(await ledger.get(alone!.id)).toMatchObject({ state: 'pending', attempts: 3, released: 1, lastError: 'attempt 2 abandoned: the run that claimed it died' });
    // It may be the item that kills the process: it must not run beside the other suspects.
    expect(await ledger.discover(items('a', 'b', 'c'), { runId: 'r3', now: T0 + 4, deferCharged: true })).toEqual([]);
    expect(await ledger.claimDue({ owner: 'o3', runId: 'r3', now: T0 + 4, leaseMs: 60_000, limit: 4 })).toHaveLength(1);
    await ledger.close();
  });

  it.each([false, true])('a run killed after its stop was recorded (write-behind %s): its claims are handed back uncharged, once; a later crash is charged', async (writeBehind) => {
    const file = freshFile();
    const retry = { ...RETRY, backoffMs: 0, backoffMaxMs: 0 };
    const run = await openSqliteLedger(file, { writeBehind });
    await discoverAndClaim(run, items('a', 'b'), { owner: 'stopped', runId: 'r1', now: T0, leaseMs: 60_000 });
    await run.recordStopRequested!('stopped');
    // SIGKILLed: the journal and the claims stay as they are.
    const next = await openSqliteLedger(file, { writeBehind: true });
    expect(await next.reclaimAbandoned('o2', { now: T0 + 1, retry })).toBe(2);
    for (const id of ['a', 'b']) expect(await next.get(id)).toMatchObject({ state: 'pending', attempts: 1, released: 1 });
    // The record was that run's alone: the next run, killed without a stop, is charged.
    await next.discover(items('a', 'b'), { runId: 'r2', now: T0 + 2 });
    await next.claimDue({ owner: 'crashed', runId: 'r2', now: T0 + 2, leaseMs: 60_000, limit: 2 });
    expect(await next.reclaimAbandoned('o3', { now: T0 + 3, retry })).toBe(2);
    for (const id of ['a', 'b']) expect(await next.get(id)).toMatchObject({ state: 'pending', attempts: 2, released: 1, lastError: 'attempt 2 abandoned: the run that claimed it died' });
    await next.close();
    await run.close();
  });

  it('a discovery writes what was written behind in its own transaction: one commit, where there were two', async () => {
    const file = freshFile();
    const ledger = await openSqliteLedger(file, { writeBehind: true });
    const opts = { owner: 'o', runId: 'r1', now: T0, leaseMs: 60_000 };
    const none = { complete: [], fail: [], release: [], gone: [] };
    expect(await ledger.discover(items('a', 'b'), { runId: 'r1', now: T0 })).toEqual(['a', 'b']);
    // Claimed at a handler slot, then one succeeds and 'c' is claimed: both in the start journal only.
    const { claims } = await ledger.settle(none, T0, { ids: ['a', 'b'], opts });
    const byId = new Map(claims.map((c) => [c.id, c]));
    await ledger.settle({ ...none, complete: [byId.get('a')!] }, T0 + 1);
    const before = walCommits(file);
    expect(await ledger.discover(items('c'), { runId: 'r1', now: T0 + 2 })).toEqual(['c']);
    expect(walCommits(file) - before).toBe(1);
    // Both are in that commit: the records, then the discovery.
    const db = new Database(file, { readonly: true });
    const row = (id: string) => db.prepare('SELECT state, attempts, owner, done_at FROM items WHERE id = ?').get(id);
    expect(row('a')).toEqual({ state: 'done', attempts: 1, owner: null, done_at: T0 + 1 });
    expect(row('b')).toEqual({ state: 'claimed', attempts: 1, owner: 'o', done_at: null });
    expect(row('c')).toMatchObject({ state: 'pending', attempts: 0 });
    db.close();
    // And the write-behind goes on from there: 'b' succeeds, 'c' is claimed and succeeds.
    const [c] = (await ledger.settle({ ...none, complete: [byId.get('b')!] }, T0 + 3, { ids: ['c'], opts: { ...opts, now: T0 + 3 } })).claims;
    await ledger.settle({ ...none, complete: [c!] }, T0 + 4);
    expect(await ledger.get('b')).toMatchObject({ state: 'done', attempts: 1 });
    expect(await ledger.get('c')).toMatchObject({ state: 'done', attempts: 1 });
    await ledger.close();
  });

  it('creates the parent directory and runs in WAL mode', async () => {
    const file = freshFile();
    const ledger = await openSqliteLedger(file);
    await discoverAndClaim(ledger, [{ id: 'a' }], { owner: 'o', runId: 'r', now: 1, leaseMs: 1 });
    expect(existsSync(`${file}-wal`)).toBe(true);
    await ledger.close();
    const db = new Database(file, { readonly: true });
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    db.close();
  });

  it('keeps its data across close and reopen, and close is idempotent', async () => {
    const file = freshFile();
    const first = await openSqliteLedger(file);
    const [claim] = await discoverAndClaim(first, [{ id: 'a' }, { id: 'b' }], { owner: 'o', runId: 'r', now: 1, leaseMs: 1 });
    await first.complete(claim ? [claim] : [], 2);
    await first.recordEvent('overrun', 3);
    await first.close();
    await first.close();
    const second = await openSqliteLedger(file);
    expect(await second.counts()).toEqual({ pending: 0, claimed: 1, done: 1, dead: 0 });
    expect(await second.totals()).toMatchObject({ itemsDone: 1, overruns: 1 });
    await second.close();
  });

  it('applies each migration once, however often it is opened or migrated', async () => {
    const file = freshFile();
    for (let i = 0; i < 3; i++) await (await openSqliteLedger(file)).close();
    const db = new Database(file);
    expect(migrate(db)).toEqual([]);
    const rows = db.prepare('SELECT version, name FROM schema_migrations ORDER BY version').all();
    expect(rows).toEqual(MIGRATIONS.map((m) => ({ version: m.version, name: m.name })));
    db.close();
  });

  it('rolls a failing migration back entirely and does not record it', () => {
    const db = new Database(':memory:');
    migrate(db);
    const broken = [...MIGRATIONS, { version: 999, name: 'broken', sql: 'CREATE TABLE x (a); SELECT nope FROM nowhere;' }];
    expect(() => migrate(db, broken)).toThrow(/nowhere/);
    expect(db.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'x'").pluck().get()).toBe(0);
    expect(db.prepare('SELECT max(version) FROM schema_migrations').pluck().get()).toBe(MIGRATIONS.at(-1)?.version);
    db.close();
  });

  it('makes a new ledger in one transaction: a failing migration leaves no table at all (never a ledger half made)', () => {
    const db = new Database(':memory:');
    const broken = [...MIGRATIONS, { version: 999, name: 'broken', sql: 'CREATE TABLE x (a); SELECT nope FROM nowhere;' }];
    expect(() => migrate(db, broken)).toThrow(/nowhere/);
    expect(db.prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table'").pluck().get()).toBe(0);
    db.close();
  });

  it('refuses a ledger written by a newer cronsafe', async () => {
    const file = freshFile();
    await (await openSqliteLedger(file)).close();
    const db = new Database(file);
    db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(9999, 'future', 0);
    db.close();
    await expect(openSqliteLedger(file)).rejects.toThrow(/schema version 9999.*upgrade cronsafe/);
  });

  it('enforces the item state machine in the schema', async () => {
    const file = freshFile();
    await (await openSqliteLedger(file)).close();
    const db = new Database(file);
    const insert = db.prepare(
      'INSERT INTO items (id, state, owner, available_at, first_seen_at, updated_at) VALUES (?, ?, ?, 0, 0, 0)',
    );
    expect(() => insert.run('x', 'lost', null)).toThrow(/CHECK/);
    expect(() => insert.run('y', 'claimed', null)).toThrow(/CHECK/); // a claim without an owner
    expect(() => insert.run('z', 'pending', 'someone')).toThrow(/CHECK/);
    db.close();
  });

  it('keeps odd ids consistent between batch (JSON) and single-row paths', async () => {
    const ledger = await openSqliteLedger(freshFile());
    const ids = ['\ud800lone', 'quote"back\\slash\n', 'é/ü/💥', ' spaced '];
    const claims = await discoverAndClaim(ledger, ids.map((id) => ({ id })), { owner: 'o', runId: 'r', now: 1, leaseMs: 1 });
    expect(claims).toHaveLength(ids.length);
    expect((await ledger.complete(claims, 2)).map((o) => o.result)).toEqual(ids.map(() => 'applied'));
    for (const id of ids) expect((await ledger.get(id))?.state).toBe('done');
    expect(await ledger.complete(claims, 3)).toMatchObject(ids.map(() => ({ result: 'fenced' })));
    // A claim rebuilt by the caller from the original (ill-formed) id still matches.
    const [again] = await discoverAndClaim(ledger, [{ id: '\udc00x' }], { owner: 'o', runId: 'r', now: 4, leaseMs: 1 });
    const rebuilt = { id: '\udc00x', owner: 'o', attempt: again?.attempt ?? 0, charged: 1 };
    expect(await ledger.complete([rebuilt], 5)).toMatchObject([{ id: '\udc00x', result: 'applied' }]);
    await ledger.close();
  });

  it('walks a batch by primary key on the hot paths, never scanning items', () => {
    const db = new Database(':memory:');
    migrate(db);
    const params = { batch: '[]', claims: '[]', runId: 'r', now: 0, owner: 'o', leaseUntil: 0, doneBefore: 0, onChange: 1 };
    for (const sql of [DISCOVER_SQL, DISCOVER_IDS_SQL, CLAIMABLE_ROWS_SQL, CLAIM_IDS_SQL, CLAIMABLE_SQL, CLAIMABLE_IDS_SQL, COMPLETE_SQL, REFRESH_SQL, ADOPT_BASELINE_SQL]) {
      const stmt = db.prepare(`EXPLAIN QUERY PLAN ${sql}`);
      const used = Object.fromEntries(Object.entries(params).filter(([k]) => sql.includes(`@${k}`)));
      const plan = (stmt.all(used) as { detail: string }[]).map((r) => r.detail).join('\n');
      expect(plan).not.toMatch(/SCAN (items|i)\b/);
    }
    db.close();
  });

  it('takes the sweep from the pending index in its order, never sorting a wait\'s rows', () => {
    // A requeue behind the scan gives thousands of rows one available_at: a sort of them per
    // claim of `concurrency` made the sweep ~300 items/s (claim.ts, CLAIM_DUE_SQL).
    const db = new Database(':memory:');
    migrate(db);
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${CLAIM_DUE_SQL}`).all({ runId: 'r', now: 0, owner: 'o', leaseUntil: 0, limit: 8 }) as { detail: string }[]).map((r) => r.detail).join('\n');
    expect(plan).toMatch(/USING INDEX items_pending_due/);
    expect(plan).not.toMatch(/TEMP B-TREE/);
    db.close();
  });

  it('retries every dead item a page per transaction, across page boundaries, each counted once', async () => {
    const ledger = await openSqliteLedger(freshFile());
    const n = 2 * RETRY_DEAD_PAGE + 1;
    const ids = Array.from({ length: n }, (_, i) => `dead-${i}`);
    const claims = await discoverAndClaim(ledger, items(...ids), { owner: 'o', runId: 'r', now: T0, leaseMs: 1, limit: n });
    await ledger.fail(claims.map((claim) => ({ claim, error: 'boom' })), { now: T0, retry: { ...RETRY, maxAttempts: 1 }, random: () => 0 });
    expect((await ledger.counts()).dead).toBe(n);
    expect(await ledger.retryDead('all', T0 + 1)).toBe(n);
    expect(await ledger.counts()).toEqual({ pending: n, claimed: 0, done: 0, dead: 0 });
    expect((await ledger.totals()).requeued).toBe(n);
    expect(await ledger.retryDead('all', T0 + 2)).toBe(0);
    await ledger.close();
    // Each page walks the dead rows' partial index (LIMIT stops it), never the whole table.
    const db = new Database(':memory:');
    migrate(db);
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${RETRY_DEAD_PAGE_SQL}`).all({ now: 0, upTo: 0, limit: 1 }) as { detail: string }[]).map((r) => r.detail).join('\n');
    expect(plan).toMatch(/USING INDEX items_dead/);
    expect(plan).not.toMatch(/SCAN items(?! USING INDEX items_dead)/);
    db.close();
  });

  it('walks the done rows for missing files in the table\'s own order, not through the id index', () => {
    // By id, each row of a step was a lookup of a random table page (ids arrive in the
    // directory's hash order): 0.17-0.19 s of CPU over 100,000 done items, against 0.02 s.
    const db = new Database(':memory:');
    migrate(db);
    const params = { after: 0, end: 0, limit: 1, now: 0, passId: 'p', scanStartedAt: 0 };
    for (const sql of [CHUNK_SQL, MARK_MISSING_SQL]) {
      const used = Object.fromEntries(Object.entries(params).filter(([k]) => sql.includes(`@${k}`)));
      const plan = (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(used) as { detail: string }[]).map((r) => r.detail).join('\n');
      expect(plan).toMatch(/SEARCH items USING INTEGER PRIMARY KEY \(rowid>\?/);
      expect(plan).not.toMatch(/sqlite_autoindex_items|SCAN items/);
    }
    db.close();
  });

  it('finds the last occurrence by index seeks, not by scanning runs or events', () => {
    const db = new Database(':memory:');
    migrate(db);
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${LAST_OCCURRENCE_SQL}`).all() as { detail: string }[]).map((r) => r.detail);
    expect(plan.join('\n')).not.toMatch(/SCAN (runs|events)\b/);
    db.close();
  });

  it('upgrades a 001 ledger: missed/stale totals from its events, on-change baselines from its stats', async () => {
    const file = freshFile();
    await (await openSqliteLedger(file)).close(); // creates the directory
    rmSync(file);
    const db = new Database(file);
    migrate(db, MIGRATIONS.filter((m) => m.version === 1));
    const item = db.prepare(`INSERT INTO items (id, state, attempts, size, mtime_ms, available_at, first_seen_at, updated_at,
      done_at, dead_at) VALUES (?, ?, 1, ?, ?, 0, 0, 0, ?, ?)`);
    item.run('statted', 'done', 10, 100.5, 5, null);
    item.run('kept', 'done', 7, 7, 5, null);
    item.run('plain', 'done', null, null, 5, null);
    item.run('broken', 'dead', 1, 1, null, 5);
    const event = db.prepare('INSERT INTO events (kind, at) VALUES (?, 0)');
    for (const kind of ['missed', 'missed', 'stale', 'overrun']) event.run(kind);
    db.prepare("UPDATE counters SET value = 1 WHERE name = 'overruns'").run();
    db.close();

    const ledger = await openSqliteLedger(file);
    expect(await ledger.totals()).toMatchObject({ missed: 2, stale: 1, overruns: 1 });
    expect(await ledger.lastOccurrenceRecorded()).toBeNull();
    const opts = { owner: 'o', runId: 'r', now: 10, leaseMs: 1, refresh: { onChange: true } };
    // Changed since the last scan before the upgrade: caught. No stat before (plain): a baseline now.
    const first = [{ id: 'statted', size: 11 }, { id: 'kept', size: 7, mtimeMs: 7 }, { id: 'plain', size: 3 }, { id: 'broken', mtimeMs: 2 }];
    expect((await discoverAndClaim(ledger, first, opts)).map((c) => [c.id, c.attempt])).toEqual([['statted', 1], ['broken', 1]]);
    const second = [{ id: 'kept', size: 7, mtimeMs: 7 }, { id: 'plain', size: 4 }];
    expect((await discoverAndClaim(ledger, second, opts)).map((c) => c.id)).toEqual(['plain']);
    await ledger.close();
  });
});

describe('SQLite requeue while a pass runs', () => {
  it('pages, requeues and peeks by primary key, never scanning items', () => {
    const db = new Database(':memory:');
    migrate(db);
    const params = { id: '', n: 10, states: '["done"]', after: null, before: null, ids: '[]', now: 0 };
    for (const sql of [FINISHED_PAGE_SQL, REQUEUE_SQL, PEEK_SQL]) {
      const used = Object.fromEntries(Object.entries(params).filter(([k]) => sql.includes(`@${k}`)));
      const plan = (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(used) as { detail: string }[]).map((r) => r.detail).join('\n');
      expect(plan).toMatch(/USING INDEX sqlite_autoindex_items_1/);
      expect(plan).not.toMatch(/SCAN (items|i)\b/);
    }
    db.close();
  });

  it.each([false, true])('forgetUnseen with a limit (write-behind %s) forgets at most that many per call, of passes before and after the current one, never its own', async (writeBehind) => {
    const ledger = await openSqliteLedger(freshFile(), { writeBehind });
    // Pass ids on both sides of the current one ('pass-5'): the steps search both ranges.
    for (const [pass, prefix] of [['pass-1', 'old'], ['pass-9', 'later']] as const) {
      await ledger.discover(['a', 'b', 'c'].map((x) => ({ id: `${prefix}-${x}` })), { runId: pass, now: T0 });
    }
    await ledger.discover([{ id: 'seen-1' }, { id: 'seen-2' }], { runId: 'pass-5', now: T0 + 1 });
    const before = await ledger.attemptTotals();
    const steps: number[] = [];
    for (let n = -1; n !== 0; ) steps.push((n = await ledger.forgetUnseen('pass-5', 4)));
    expect(steps).toEqual([4, 2, 0]);
    for (const x of ['a', 'b', 'c']) {
      expect(await ledger.get(`old-${x}`)).toBeNull();
      expect(await ledger.get(`later-${x}`)).toBeNull();
    }
    for (const id of ['seen-1', 'seen-2']) expect((await ledger.get(id))?.state, id).toBe('pending');
    expect((await ledger.attemptTotals()).gone).toBe(before.gone + 6);
    await ledger.close();
  });

  it('each forgetUnseen step searches the pending index: no scan past the rows the pass saw', () => {
    const db = new Database(':memory:');
    migrate(db);
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${FORGET_UNSEEN_SQL}`).all({ passId: 'p', limit: 10 }) as { detail: string }[]).map((r) => r.detail).join('\n');
    expect(plan).toMatch(/SEARCH items USING COVERING INDEX items_pending_due \(seen_run<\?\)/);
    expect(plan).toMatch(/SEARCH items USING COVERING INDEX items_pending_due \(seen_run>\?\)/);
    expect(plan).not.toMatch(/SCAN items/);
    db.close();
  });

  it('a requeued item the running pass already scanned is its own: swept by it, never forgotten by its end of scan', async () => {
    const ledger = await openSqliteLedger(freshFile());
    const [first] = await discoverAndClaim(ledger, [{ id: 'a' }], { owner: 'o', runId: 'old-pass', now: 1, leaseMs: 1000 });
    await ledger.complete(first ? [first] : [], 2);
    expect(await ledger.discover([{ id: 'a' }], { runId: 'new-pass', now: 3 })).toEqual([]);
    expect(await ledger.requeue(['a'], { states: ['done'] }, 4)).toEqual(['a']);
    expect(await ledger.forgetUnseen('new-pass')).toBe(0);
    expect(await ledger.claimDue({ owner: 'o', runId: 'new-pass', now: 4, leaseMs: 1000, limit: 5 })).toMatchObject([{ id: 'a', attempt: 1 }]);
    await ledger.close();
  });
});

describe('openLedger', () => {
  it('opens the SQLite ledger named by state.sqlite', async () => {
    const ledger = await openLedger({ sqlite: freshFile() });
    expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 0, dead: 0 });
    await ledger.close();
  });

  it('opens the PostgreSQL ledger for state.postgres (checked before connecting; see ledger-postgres.test.ts)', async () => {
    await expect(openLedger({ postgres: 'postgres://x:pw@127.0.0.1:1/z', schema: 'Not-An-Identifier' })).rejects.toThrow(/schema name/);
  });
});
