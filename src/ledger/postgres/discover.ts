import { batchColumns, batchWithout, type BatchColumns, type Unrecorded } from './batch.js';
import type { DiscoveredItem, DiscoverOptions } from '../types.js';
import { PostgresLedgerError } from './errors.js';
import type { PostgresExecutor } from './connection.js';
import { ident, q, type Query } from './query.js';
import { refreshParams } from '../refresh-params.js';
import { adoptBaselineQuery, refreshQuery } from './refresh.js';
import { SEEN_GRANULARITY_MS } from '../retention.js';

/**
 * Discovery, step 1: insert the batch's new ids as pending (ON CONFLICT DO NOTHING:
 * idempotent across pods, two pods discovering one file end with one row). Rows go in
 * id order, so pods inserting overlapping batches take row locks in one order. RETURNING
 * names the rows this statement created. A pod inserting ids another pod's statement is
 * inserting waits for that statement: it commits on its own, so the wait is short.
 */
export const insertNewQuery = (schema: string, b: BatchColumns, runId: string, now: number): Query =>
  q(
    `INSERT INTO ${ident(schema)}.items (id, size, mtime_ms, seen_run, available_at, first_seen_at, updated_at, seen_at)
SELECT d.id, d.size, d.mtime_ms, $4, $5, $5, $5, $5
FROM unnest($1::text[], $2::bigint[], $3::float8[]) AS d(id, size, mtime_ms)
ORDER BY d.id COLLATE "C"
ON CONFLICT (id) DO NOTHING
RETURNING id`,
    b.ids,
    b.sizes,
    b.mtimes,
    runId,
    now,
  );

/**
 * A row's available_at as discovery at now ($5) leaves it: a pending row never charged
 * (attempts = released: new, handed back, requeued) has no backoff to wait for, and one
 * written by a clock ahead (a pod's skewed clock, a clock stepped back since) held it back
 * from every other pod until then; it comes down to now (never later), as on SQLite.
 */
const AVAILABLE = (i: string): string =>
  `CASE WHEN ${i}.state = 'pending' AND ${i}.attempts = ${i}.released THEN least(${i}.available_at, $5::bigint) ELSE ${i}.available_at END`;

/**
 * Whether a known row must be written: pending and not yet marked by the pass ($4), or
 * available later than AVAILABLE says, or its
 * stat changed, or (retention) done with a seen_at a day older than now ($5) or marked
 * missing: a done row is rewritten about once a day, not once per pass (prune.ts).
 */
const STALE = (i: string, d: string): string => `(${i}.state = 'pending' AND (${i}.seen_run IS DISTINCT FROM $4 OR ${i}.available_at > ${AVAILABLE(i)}))
      OR (${i}.state = 'done' AND (${i}.seen_at IS NULL OR ${i}.seen_at < $5::bigint - ${SEEN_GRANULARITY_MS} OR ${i}.missing_since IS NOT NULL))
      OR (${d}.size IS NOT NULL AND ${d}.size IS DISTINCT FROM ${i}.size)
      OR (${d}.mtime_ms IS NOT NULL AND ${d}.mtime_ms IS DISTINCT FROM ${i}.mtime_ms)`;

/**
 * Discovery, step 2, for ids that were already known, in one statement: record their stat,
 * mark the pending ones as the pass's (its sweep claims those), and return the ids found, in
 * batch order, each saying whether it is claimable now (pending, past its backoff). Only rows where that changes something
 * are written: with N pods each scanning the whole source, an unconditional update would
 * rewrite every row N times per pass. SKIP LOCKED: a row another pod is claiming or
 * settling right now is not waited for. Each id is looked up by primary key (the subquery
 * is not flattened: OFFSET 0) and filtered after: a filter next to the join may make the
 * planner walk the whole pending index once per batch. What is returned is what the
 * statement saw at its start (the write changes neither state nor backoff: what it does to
 * available_at, AVAILABLE, the read computes too).
 */
export const knownQuery = (schema: string, b: BatchColumns, runId: string, now: number): Query =>
  q(
    `WITH d AS (SELECT * FROM unnest($1::text[], $2::bigint[], $3::float8[]) WITH ORDINALITY AS d(id, size, mtime_ms, ord)),
k AS (
  SELECT d.id, d.ord, d.size, d.mtime_ms, it.state, it.available_at, it.stale
  FROM d CROSS JOIN LATERAL (
    SELECT i.state, ${AVAILABLE('i')} AS available_at, ${STALE('i', 'd')} AS stale
    FROM ${ident(schema)}.items AS i WHERE i.id = d.id OFFSET 0) AS it),
t AS (
  SELECT l.id, k.size, k.mtime_ms FROM k CROSS JOIN LATERAL (
    SELECT i.id FROM ${ident(schema)}.items AS i WHERE i.id = k.id AND (${STALE('i', 'k')})
    FOR UPDATE SKIP LOCKED) AS l
  WHERE k.stale),
u AS (
  UPDATE ${ident(schema)}.items AS i SET size = coalesce(t.size, i.size), mtime_ms = coalesce(t.mtime_ms, i.mtime_ms),
    seen_run = CASE WHEN i.state = 'pending' THEN $4 ELSE i.seen_run END, seen_at = $5, missing_since = NULL, available_at = ${AVAILABLE('i')}
  FROM t WHERE i.id = t.id)
SELECT id, (state = 'pending' AND available_at <= $5) AS claimable FROM k ORDER BY ord`,
    b.ids,
    b.sizes,
    b.mtimes,
    runId,
    now,
  );

/** As knownQuery's write alone: for the refresh path, which must write between it and the read. */
export const touchKnownQuery = (schema: string, b: BatchColumns, runId: string, now: number): Query =>
  q(
    `WITH d AS (SELECT * FROM unnest($1::text[], $2::bigint[], $3::float8[]) AS d(id, size, mtime_ms)),
t AS (
  SELECT it.id FROM ${ident(schema)}.items AS it JOIN d ON it.id = d.id
  WHERE ${STALE('it', 'd')}
  ORDER BY it.id
  FOR UPDATE OF it SKIP LOCKED)
UPDATE ${ident(schema)}.items AS i SET size = coalesce(d.size, i.size), mtime_ms = coalesce(d.mtime_ms, i.mtime_ms),
  seen_run = CASE WHEN i.state = 'pending' THEN $4 ELSE i.seen_run END, seen_at = $5, missing_since = NULL, available_at = ${AVAILABLE('i')}
FROM t JOIN d ON d.id = t.id
WHERE i.id = t.id`,
    b.ids,
    b.sizes,
    b.mtimes,
    runId,
    now,
  );

/** As knownQuery's read alone (refresh path): which of `ids` are claimable now, in order. */
export const claimableQuery = (schema: string, ids: string[], now: number): Query =>
  q(
    `SELECT b.id FROM unnest($1::text[]) WITH ORDINALITY AS b(id, ord)
CROSS JOIN LATERAL (SELECT state, available_at FROM ${ident(schema)}.items WHERE id = b.id OFFSET 0) AS it
WHERE it.state = 'pending' AND it.available_at <= $2
ORDER BY b.ord`,
    ids,
    now,
  );

/**
 * The discovery session's settings (connection.ts) for the refresh path's transaction:
 * every discovery statement reaches the batch's rows by primary key. A plan that reads the
 * table instead costs the whole table per batch of 256 (a pass would cost its size
 * squared), and the planner picks one when it misjudges a batch against a table whose
 * statistics lag behind (a first pass grows it from nothing).
 */
export const byIndexOnlyQuery = (): Query => q(`SET LOCAL enable_seqscan = off; SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off`);

/**
 * Statistics for a table that was empty a moment ago: a first pass plans every statement
 * against a never-analyzed `items` (autovacuum looks once a minute). One pod at a time: a
 * second ANALYZE would queue behind the first for nothing, so it is skipped when another
 * holds the try-lock.
 */
export const analyzeLockQuery = (schema: string): Query => q(`SELECT pg_try_advisory_xact_lock(hashtext($1), 3) AS ok`, schema);
export const analyzeQuery = (schema: string): Query => q(`ANALYZE ${ident(schema)}.items`);

/**
 * A pod analyzes `items` once its discovery has found this many claimable rows, then after 10x
 * as many: rows it inserted, and rows made pending since the table was last analyzed (a
 * `requeue --all`, `dead-letter retry`, a refresh policy). Counting inserts alone, a pass after
 * a requeue of 100,000 done rows claimed against statistics that said no row was pending: each
 * claim read the whole pending index once per offered id (0.5 to 0.8 s a claim, 3.5x the pass).
 */
export const ANALYZE_AFTER_ROWS = 256;

/**
 * Ledger.discover on PostgreSQL. With DiscoverOptions.recordOnClaim (the runner's, on a
 * shared pass) and no refresh policy: the look-up alone (onClaim), the new ids left to the
 * pod's claims. Otherwise, without a refresh policy: an INSERT, then,
 * for the ids it did not create, one knownQuery, each in autocommit on the discovery
 * session; the first pod of a pass makes one round trip per batch. A pod that finds its
 * batches known looks them up first instead, and inserts only what it did not find. A lost commit (a server
 * crash) loses rows or marks that the next scan makes again, and the claims of lost rows,
 * committed after them, are lost as well. With a refresh policy: one transaction, in the
 * order the policy needs (touch, refresh, baseline, read).
 */
export function makeDiscover(ex: PostgresExecutor, schema: string, unrecorded: Unrecorded): (items: DiscoveredItem[], opts: DiscoverOptions) => Promise<string[]> {
  let found = 0;
  let analyzeAt = ANALYZE_AFTER_ROWS;
  const analyze = async (): Promise<void> => {
    analyzeAt = found * 10;
    // Only a plan is at stake: a failure (a role that may not ANALYZE, a lost connection) is
    // left to autovacuum.
    await ex
      .tx('analyze', async (exec) => {
        const [lock] = await exec<{ ok: boolean }>(analyzeLockQuery(schema));
        if (lock?.ok) await exec(analyzeQuery(schema));
      })
      .catch(() => undefined);
  };

  const insert = (b: BatchColumns, opts: DiscoverOptions): Promise<{ id: string }[]> =>
    ex.on<{ id: string }>('discovery', 'discover', { name: 'cronsafe-insert', ...insertNewQuery(schema, b, opts.runId, opts.now) });
  /** Ids of `b` found, the claimable ones added to `claimable`. */
  const lookUp = async (b: BatchColumns, opts: DiscoverOptions, claimable: Set<string>): Promise<Set<string>> => {
    const rows = await ex.on<{ id: string; claimable: boolean }>('discovery', 'discover', { name: 'cronsafe-known', ...knownQuery(schema, b, opts.runId, opts.now) });
    for (const r of rows) if (r.claimable) claimable.add(r.id);
    return new Set(rows.map((r) => r.id));
  };
  /**
   * Which statement goes first. A pod whose siblings scanned ahead of it finds every row
   * known: inserting first would cost it a conflict check per row, and a wait for the
   * sibling's insert in flight, before the look-up it needs anyway. So each pod follows
   * what its last batch found: mostly new, insert first (the first pod: one statement per
   * batch); mostly known, look up first and insert only the rest.
   */
  let knownFirst = false;

  async function plain(batch: BatchColumns, opts: DiscoverOptions): Promise<{ created: number; claimable: string[] }> {
    // New rows are claimable at once; the result follows the batch's order.
    const claimable = new Set<string>();
    if (knownFirst) {
      const found = await lookUp(batch, opts, claimable);
      knownFirst = found.size * 2 >= batch.ids.length;
      if (found.size === batch.ids.length) return { created: 0, claimable: batch.ids.filter((id) => claimable.has(id)) };
      const missing = batchWithout(batch, found);
      const made = await insert(missing, opts);
      for (const r of made) claimable.add(r.id);
      // Inserted by a sibling since the look-up: look again (rare), or its mark would be missed.
      if (made.length < missing.ids.length) await lookUp(batchWithout(missing, new Set(made.map((r) => r.id))), opts, claimable);
      return { created: made.length, claimable: batch.ids.filter((id) => claimable.has(id)) };
    }
    const made = await insert(batch, opts);
    knownFirst = made.length * 2 < batch.ids.length;
    if (made.length === batch.ids.length) return { created: made.length, claimable: batch.ids };
    for (const r of made) claimable.add(r.id);
    await lookUp(batchWithout(batch, new Set(made.map((r) => r.id))), opts, claimable);
    return { created: made.length, claimable: batch.ids.filter((id) => claimable.has(id)) };
  }

  /**
   * DiscoverOptions.recordOnClaim: the look-up alone (no write for a new id, a read of its
   * primary key); the ids it did not find are left to the claim, which inserts them claimed.
   */
  async function onClaim(batch: BatchColumns, opts: DiscoverOptions): Promise<{ created: number; claimable: string[] }> {
    const claimable = new Set<string>();
    const found = await lookUp(batch, opts, claimable);
    batch.ids.forEach((id, i) => {
      if (found.has(id)) return;
      unrecorded.set(id, { size: batch.sizes[i] ?? null, mtime: batch.mtimes[i] ?? null, pass: opts.runId });
      claimable.add(id);
    });
    return { created: 0, claimable: batch.ids.filter((id) => claimable.has(id)) };
  }

  /** One batch's discovery (the whole of it, or one long id: see below). */
  const discoverBatch = async (items: DiscoveredItem[], opts: DiscoverOptions, later: boolean): Promise<string[]> => {
    const refresh = refreshParams(opts.refresh); // throws before anything is written
    const batch = batchColumns(items);
    const { created, claimable } =
      refresh === null
        ? await (later ? onClaim(batch, opts) : plain(batch, opts))
        : await ex.tx('discover', async (exec) => {
            await exec(byIndexOnlyQuery());
            const made = new Set((await exec<{ id: string }>(insertNewQuery(schema, batch, opts.runId, opts.now))).map((r) => r.id));
            if (made.size < batch.ids.length) await exec(touchKnownQuery(schema, batchWithout(batch, made), opts.runId, opts.now));
            await exec(refreshQuery(schema, batch, refresh, opts.now, opts.runId));
            if (refresh.onChange) await exec(adoptBaselineQuery(schema, batch.ids));
            const ids = (await exec<{ id: string }>(claimableQuery(schema, batch.ids, opts.now))).map((r) => r.id);
            return { created: made.size, claimable: ids };
          });
    // New rows are claimable: `created` is counted in `claimable`.
    found += Math.max(created, claimable.length);
    if (found >= analyzeAt) await analyze();
    return claimable;
  };

  return async (items, opts) => {
    if (items.length === 0) return [];
    // An id too long for the primary key's btree index (PROGRAM_LIMIT_EXCEEDED, `index row
    // size ... exceeds btree version 4 maximum 2704`) failed its whole batch, so one file
    // nested deep with long names failed every run (exit 1, nothing of the backlog done, the
    // file unnamed). Long ids go one by one, after the rest of the batch; one refused is left
    // out and told (onRefused). Compressible ids far longer than the limit fit, so only the
    // server can say which do not.
    const long = items.filter((i) => i.id.length > LONG_ID_BYTES / 3 && Buffer.byteLength(i.id) > LONG_ID_BYTES);
    // Long ids are recorded here, never by a claim: the claim's statement must not fail.
    const later = opts.recordOnClaim === true;
    if (long.length === 0) return discoverBatch(items, opts, later);
    const rest = items.filter((i) => !long.includes(i));
    const claimable = rest.length > 0 ? await discoverBatch(rest, opts, later) : [];
    for (const item of long) {
      try {
        claimable.push(...(await discoverBatch([item], opts, false)));
      } catch (err) {
        if (!(err instanceof PostgresLedgerError) || err.code !== PROGRAM_LIMIT_EXCEEDED) throw err;
        // The primary key took it once: recorded under a pass whose run group was shorter (the
        // pending items' index holds the group beside the id), which only a new pass changed.
        const recorded = (await ex.on('discovery', 'discover', { name: 'cronsafe-recorded', ...q(`SELECT 1 FROM ${ident(schema)}.items WHERE id = $1`, item.id) })).length > 0;
        opts.onRefused?.(item.id, `its id (${Buffer.byteLength(item.id)} bytes) is too long for the PostgreSQL ledger's index: ${err.message}`, recorded);
      }
    }
    return claimable;
  };
}

/**
 * Ids longer than this (UTF-8 bytes) are discovered one at a time: PostgreSQL's btree index
 * takes an entry of at most 2,704 bytes (8 kB pages), after compression, so some longer ids
 * fit and some do not. Shorter ids always fit.
 */
const LONG_ID_BYTES = 2048;
/** SQLSTATE 54000: an index row (or another value) larger than the server allows. */
const PROGRAM_LIMIT_EXCEEDED = '54000';
