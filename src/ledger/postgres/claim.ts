import { wellFormed } from '../rows.js';
import type { Claim, ClaimOptions, DiscoveredItem, DiscoverOptions, FenceOutcome, PassSiblings } from '../types.js';
import type { PostgresExecutor } from './connection.js';
import { claimColumns, completeWrite, fencedOutcomes, fencedWriteCtes, type Applied, type ClaimColumns } from './finish.js';
import { ident, q, type Query } from './query.js';
import { adoptBaselineQuery, refreshParams, refreshQuery } from './refresh.js';

/** A discovered batch as parallel arrays (unnest), ids de-duplicated and made well-formed. */
export interface BatchColumns {
  ids: string[];
  sizes: (number | null)[];
  mtimes: (number | null)[];
}

/**
 * Discovery, step 1: insert the batch's new ids as pending (ON CONFLICT DO NOTHING:
 * idempotent across pods, two pods discovering one file end with one row). Rows go in
 * id order, so pods inserting overlapping batches take row locks in one order. RETURNING
 * names the rows this transaction created (and so holds locked).
 */
export const insertNewQuery = (schema: string, b: BatchColumns, runId: string, now: number): Query =>
  q(
    `INSERT INTO ${ident(schema)}.items (id, size, mtime_ms, seen_run, available_at, first_seen_at, updated_at)
SELECT d.id, d.size, d.mtime_ms, $4, $5, $5, $5
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
 * Discovery, step 2, for ids that were already known: record their stat and mark the
 * pending ones as seen by this run (the end-of-scan sweep claims those). Only rows where
 * that changes something are written: with N pods each scanning the whole source, an
 * unconditional update would rewrite every row N times per pass. SKIP LOCKED: a row
 * another pod holds in an open transaction is being claimed or settled by it right now;
 * waiting for it would make the pods queue behind each other on the same batch.
 */
export const touchKnownQuery = (schema: string, b: BatchColumns, runId: string): Query =>
  q(
    `WITH d AS (SELECT * FROM unnest($1::text[], $2::bigint[], $3::float8[]) AS d(id, size, mtime_ms)),
t AS (
  SELECT it.id FROM ${ident(schema)}.items AS it JOIN d ON it.id = d.id
  WHERE (it.state = 'pending' AND it.seen_run IS DISTINCT FROM $4)
     OR (d.size IS NOT NULL AND d.size IS DISTINCT FROM it.size)
     OR (d.mtime_ms IS NOT NULL AND d.mtime_ms IS DISTINCT FROM it.mtime_ms)
  ORDER BY it.id
  FOR UPDATE OF it SKIP LOCKED)
UPDATE ${ident(schema)}.items AS i SET size = coalesce(d.size, i.size), mtime_ms = coalesce(d.mtime_ms, i.mtime_ms),
  seen_run = CASE WHEN i.state = 'pending' THEN $4 ELSE i.seen_run END
FROM t JOIN d ON d.id = t.id
WHERE i.id = t.id`,
    b.ids,
    b.sizes,
    b.mtimes,
    runId,
  );

/**
 * A claim records the stat of the version it claims (the row's, just refreshed by
 * discovery): the baseline `refresh: on-change` compares later discoveries with. The
 * arguments are parameter references ($n) of the statement's owner, now and lease end.
 */
const claimSet = (owner: string, now: string, leaseUntil: string): string =>
  `SET state = 'claimed', owner = ${owner}, attempts = i.attempts + 1, lease_until = ${leaseUntil},
  claimed_size = i.size, claimed_mtime_ms = i.mtime_ms, updated_at = ${now}`;
/** $owner, $now, $leaseUntil are parameters 2, 3, 4 of the claim-only statements. */
const CLAIM_SET = claimSet('$2', '$3', '$4');

export interface ClaimParams {
  owner: string;
  now: number;
  leaseUntil: number;
}

/**
 * Which ids of a discovered batch are claimable now (pending, past their backoff), in
 * batch order. Read only: the claim itself comes later, when a handler slot is free.
 */
export const claimableQuery = (schema: string, ids: string[], now: number): Query =>
  q(
    `SELECT it.id FROM unnest($1::text[]) WITH ORDINALITY AS b(id, ord)
JOIN ${ident(schema)}.items AS it ON it.id = b.id
WHERE it.state = 'pending' AND it.available_at <= $2
ORDER BY b.ord`,
    ids,
    now,
  );

/**
 * Claim those of `ids` still claimable (pending, past their backoff), for the handler
 * slots free now. FOR UPDATE SKIP LOCKED: a row another transaction is claiming right
 * now is skipped, never waited for and never handed out twice; the state is re-checked
 * on the row's latest version under the lock (READ COMMITTED).
 */
export const claimBatchQuery = (schema: string, ids: string[], p: ClaimParams): Query =>
  q(
    `WITH c AS (
  SELECT it.id FROM ${ident(schema)}.items AS it
  WHERE it.id = ANY($1::text[]) AND it.state = 'pending' AND it.available_at <= $3
  ORDER BY it.id
  FOR UPDATE OF it SKIP LOCKED)
UPDATE ${ident(schema)}.items AS i ${CLAIM_SET}
FROM c WHERE i.id = c.id
RETURNING i.id, i.attempts, i.released`,
    ids,
    p.owner,
    p.now,
    p.leaseUntil,
  );

/**
 * A shared pass's claim (SharedPassLedger.settleOffered): at most `limit` of the offered
 * ids (in the caller's order), those still pending and past their backoff, the first ones
 * first; rows other pods hold are skipped (SKIP LOCKED, under LIMIT: only rows locked here
 * count toward it). Offering more ids than slots lets a pod pass over the candidates a
 * sibling scanning the same directory just took, instead of coming back with fewer claims
 * than slots. `ord` says how far down the list the claim got. The claim marks the row as
 * the pass's: whoever claims it, it is then one of the pass's claims (siblingsQuery).
 *
 * `done`: the caller's finished attempts, completed (fenced, counted) in the same statement,
 * so that a pod's claims in the ledger never outnumber its slots: a kill right after the
 * claim leaves at most `concurrency` claims to charge, as on SQLite. Without completions the
 * statement is the claim alone.
 */
export const settleOfferedQuery = (schema: string, done: ClaimColumns, ids: string[], p: ClaimParams, pass: string, limit: number): Query => {
  // Parameter numbers: with completions as in completeQuery ($1-$5), the claim's after them.
  const claim = (at: (n: number) => string): string => `c AS (
  SELECT it.id, b.ord FROM unnest(${at(1)}::text[]) WITH ORDINALITY AS b(id, ord)
  JOIN ${ident(schema)}.items AS it ON it.id = b.id
  WHERE it.state = 'pending' AND it.available_at <= ${at(2)}
  ORDER BY b.ord LIMIT ${at(6)}
  FOR UPDATE OF it SKIP LOCKED),
cl AS (
  UPDATE ${ident(schema)}.items AS i ${claimSet(at(3), at(2), at(4))}, seen_run = ${at(5)}
  FROM c WHERE i.id = c.id
  RETURNING i.id, i.attempts, i.released, c.ord)`;
  const claimed = `SELECT id, attempts, released, ord, NULL::text AS owner FROM cl`;
  if (done.ids.length === 0) {
    return q(`WITH ${claim((n) => `$${n}`)}\n${claimed}`, ids, p.now, p.owner, p.leaseUntil, pass, limit);
  }
  // $2 of the claim is completeQuery's $4 (now); the others follow $5.
  const at = (n: number): string => (n === 2 ? '$4' : `$${n === 1 ? 6 : n + 4}`);
  return q(
    `WITH ${fencedWriteCtes(schema, completeWrite(schema, '$4'), 'items_done', '$5')},
${claim(at)}
${claimed}
UNION ALL
SELECT id, attempt, NULL, NULL, owner FROM w`,
    done.ids,
    done.owners,
    done.attempts,
    p.now,
    done.ids.length,
    ids,
    p.owner,
    p.leaseUntil,
    pass,
    limit,
  );
};

/**
 * The sweep: pending items of the pass ($5) whose backoff has passed, earliest first,
 * whoever scanned them (SKIP LOCKED too), never one the caller holds ($1). The order is
 * the index items_pending_pass's (migration 003): a range scan that stops after $6 rows.
 */
export const claimDueQuery = (schema: string, runId: string, p: ClaimParams, limit: number, exclude: readonly string[] = []): Query =>
  q(
    `WITH c AS (
  SELECT id FROM ${ident(schema)}.items
  WHERE state = 'pending' AND seen_run = $5 AND available_at <= $3 AND NOT (id = ANY($1::text[]))
  ORDER BY available_at, id LIMIT $6
  FOR UPDATE SKIP LOCKED)
UPDATE ${ident(schema)}.items AS i ${CLAIM_SET}
FROM c WHERE i.id = c.id
RETURNING i.id, i.attempts, i.released, i.available_at`,
    exclude,
    p.owner,
    p.now,
    p.leaseUntil,
    runId,
    limit,
  );

export const nextDueQuery = (schema: string, runId: string): Query =>
  q(`SELECT min(available_at) AS t FROM ${ident(schema)}.items WHERE state = 'pending' AND seen_run = $1`, runId);

/**
 * Where the pass's other pods stand, for a pod that has nothing left of its own (no claim
 * held, nothing claimable): their claims of the pass by lease (live ones may come back, as
 * a hand-back or a failure; expired ones are its to reclaim). First, every claim `owner`
 * still has in the ledger goes back to pending, not charged: the caller holds none, so these
 * are claims committed on a try whose acknowledgement was lost (the retry claimed others).
 * Few rows either way: claims are at most `concurrency` per pod (items_claimed_owner).
 */
export const siblingsQuery = (schema: string, pass: string, owner: string, now: number): Query =>
  q(
    `WITH stray AS (
  UPDATE ${ident(schema)}.items AS i SET state = 'pending', owner = NULL, lease_until = NULL,
    released = i.released + 1, available_at = $3, updated_at = $3,
    last_error = 'claim handed back unstarted: its owner never heard it was committed'
  WHERE i.state = 'claimed' AND i.owner = $2
  RETURNING i.id)
SELECT (SELECT count(*) FROM stray) AS stray,
  count(*) FILTER (WHERE lease_until >= $3) AS live,
  count(*) FILTER (WHERE lease_until < $3) AS expired
FROM ${ident(schema)}.items WHERE state = 'claimed' AND seen_run = $1 AND owner <> $2`,
    pass,
    owner,
    now,
  );

/**
 * Statistics for a table that was empty a moment ago: a first pass plans every statement
 * against a never-analyzed `items` (autovacuum looks once a minute), and the plans are bad
 * (claims by id scan every pending row). One pod at a time: a second ANALYZE would queue
 * behind the first for nothing, so it is skipped when another holds the try-lock.
 */
export const analyzeLockQuery = (schema: string): Query => q(`SELECT pg_try_advisory_xact_lock(hashtext($1), 3) AS ok`, schema);
export const analyzeQuery = (schema: string): Query => q(`ANALYZE ${ident(schema)}.items`);

/** A pod analyzes `items` once its discovery has inserted this many rows, then after 10x as many. */
export const ANALYZE_AFTER_ROWS = 1024;

/** The claim verbs of the PostgreSQL ledger (each one retried transaction or statement). */
export interface ClaimOps {
  discover(items: DiscoveredItem[], opts: DiscoverOptions): Promise<string[]>;
  claim(ids: string[], opts: ClaimOptions): Promise<Claim[]>;
  /** Complete `done` and claim from the offer, in one statement on the claim session. */
  settleOffered(done: Claim[], offered: string[], opts: ClaimOptions & { limit: number }): Promise<{ complete: FenceOutcome[]; claims: Claim[]; considered: number }>;
  claimDue(opts: ClaimOptions & { limit: number; exclude?: readonly string[] }): Promise<Claim[]>;
  nextDueAt(runId: string): Promise<number | null>;
  siblings(pass: string, owner: string, now: number): Promise<PassSiblings>;
}

interface ClaimedRow {
  id: string;
  attempts: number;
  released: number;
}

/** The batch minus the ids in `drop` (parallel arrays kept aligned). */
function without(b: BatchColumns, drop: Set<string>): BatchColumns {
  const out: BatchColumns = { ids: [], sizes: [], mtimes: [] };
  b.ids.forEach((id, i) => {
    if (drop.has(id)) return;
    out.ids.push(id);
    out.sizes.push(b.sizes[i] ?? null);
    out.mtimes.push(b.mtimes[i] ?? null);
  });
  return out;
}

const toClaim = (r: ClaimedRow, owner: string): Claim => ({ id: r.id, owner, attempt: r.attempts, charged: r.attempts - r.released });
const claimParams = (opts: ClaimOptions): ClaimParams => ({ owner: opts.owner, now: opts.now, leaseUntil: opts.now + opts.leaseMs });

export function makeClaimOps(ex: PostgresExecutor, schema: string): ClaimOps {
  let inserted = 0;
  let analyzeAt = ANALYZE_AFTER_ROWS;
  const analyze = async (): Promise<void> => {
    analyzeAt = inserted * 10;
    // Only a plan is at stake: a failure (a role that may not ANALYZE, a lost connection) is
    // left to autovacuum.
    await ex
      .tx('analyze', async (exec) => {
        const [lock] = await exec<{ ok: boolean }>(analyzeLockQuery(schema));
        if (lock?.ok) await exec(analyzeQuery(schema));
      })
      .catch(() => undefined);
  };

  return {
    async discover(items, opts) {
      if (items.length === 0) return [];
      const refresh = refreshParams(opts.refresh); // throws before anything is written
      const batch: BatchColumns = { ids: [], sizes: [], mtimes: [] };
      const seen = new Set<string>();
      for (const it of items) {
        // One row per id: a repeat would make the upsert touch a row twice (an error in
        // PostgreSQL).
        const id = wellFormed(it.id);
        if (seen.has(id)) continue;
        seen.add(id);
        batch.ids.push(id);
        batch.sizes.push(it.size ?? null);
        batch.mtimes.push(it.mtimeMs ?? null);
      }
      let created = 0;
      const claimable = await ex.tx('discover', async (exec) => {
        const made = new Set((await exec<{ id: string }>(insertNewQuery(schema, batch, opts.runId, opts.now))).map((r) => r.id));
        created = made.size;
        if (made.size < batch.ids.length) await exec(touchKnownQuery(schema, without(batch, made), opts.runId));
        if (refresh !== null) {
          await exec(refreshQuery(schema, batch, refresh, opts.now, opts.runId));
          if (refresh.onChange) await exec(adoptBaselineQuery(schema, batch.ids));
        }
        return (await exec<{ id: string }>(claimableQuery(schema, batch.ids, opts.now))).map((r) => r.id);
      });
      inserted += created;
      if (inserted >= analyzeAt) await analyze();
      return claimable;
    },

    async claim(ids, opts) {
      if (ids.length === 0) return [];
      const wanted = ids.map(wellFormed);
      const rows = await ex.tx('claim', (exec) => exec<ClaimedRow>(claimBatchQuery(schema, wanted, claimParams(opts))));
      // RETURNING order is unspecified; hand claims out in the order asked.
      const order = new Map(wanted.map((id, i) => [id, i] as const));
      rows.sort((a, b) => (order.get(a.id) ?? 0) - (order.get(b.id) ?? 0));
      return rows.map((r) => toClaim(r, opts.owner));
    },

    async settleOffered(done, offered, opts) {
      if (done.length === 0 && (offered.length === 0 || opts.limit <= 0)) return { complete: [], claims: [], considered: 0 };
      const wanted = offered.map(wellFormed);
      const rows = await ex.claim<ClaimedRow & { ord: number | null; owner: string | null }>(
        'claim',
        settleOfferedQuery(schema, claimColumns(done), wanted, claimParams(opts), opts.runId, Math.max(0, opts.limit)),
      );
      const applied: Applied[] = [];
      const claimed: (ClaimedRow & { ord: number })[] = [];
      for (const r of rows) {
        if (r.owner !== null) applied.push({ id: r.id, owner: r.owner, attempt: r.attempts });
        else claimed.push(r as ClaimedRow & { ord: number });
      }
      // RETURNING order is unspecified; hand claims out in the order offered.
      claimed.sort((a, b) => a.ord - b.ord);
      const considered = claimed.length < opts.limit ? offered.length : claimed[claimed.length - 1]!.ord;
      const complete = await fencedOutcomes(ex, schema, 'complete', done, applied, (c) => ({ id: c.id, result: 'applied', state: 'done' }));
      return { complete, claims: claimed.map((r) => toClaim(r, opts.owner)), considered };
    },

    async claimDue(opts) {
      if (opts.limit <= 0) return [];
      const exclude = opts.exclude?.map(wellFormed);
      const rows = await ex.claim<ClaimedRow & { available_at: number }>('claimDue', claimDueQuery(schema, opts.runId, claimParams(opts), opts.limit, exclude));
      // The longest-waiting item goes first.
      rows.sort((a, b) => a.available_at - b.available_at || (a.id < b.id ? -1 : 1));
      return rows.map((r) => toClaim(r, opts.owner));
    },

    async nextDueAt(runId) {
      const [row] = await ex.query<{ t: number | null }>('nextDueAt', nextDueQuery(schema, runId));
      return row?.t ?? null;
    },

    async siblings(pass, owner, now) {
      const [row] = await ex.query<PassSiblings>('siblings', siblingsQuery(schema, pass, owner, now));
      return { live: row?.live ?? 0, expired: row?.expired ?? 0, stray: row?.stray ?? 0 };
    },
  };
}
