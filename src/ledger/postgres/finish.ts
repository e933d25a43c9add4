import { decideAfterFailure } from '../backoff.js';
import { fenceReason, type ClaimHolder } from '../fencing.js';
import { wellFormed } from '../well-formed.js';
import type { Claim, FailOptions, FenceOutcome, Failure } from '../types.js';
import type { Exec, PostgresExecutor } from './connection.js';
import { bumpQuery, type Bumps } from './counters.js';
import { ident, q, type Query } from './query.js';
import { handBackError, suspect } from './suspect.js';

/** Claims as parallel arrays for unnest: the fence is (id, owner, attempt). */
export interface ClaimColumns {
  ids: string[];
  owners: string[];
  attempts: number[];
}

export const claimColumns = (claims: Claim[]): ClaimColumns => ({
  ids: claims.map((c) => wellFormed(c.id)),
  owners: claims.map((c) => c.owner),
  attempts: claims.map((c) => c.attempt),
});

/**
 * A last error as PostgreSQL's text can hold it: without NUL (22021, "invalid byte sequence
 * for encoding UTF8: 0x00"), which a handler's binary stderr carries. Stored raw, the write of
 * that item's failure failed, and with it the run (exit 1), run after run. The NUL becomes
 * U+FFFD, as a byte that is not UTF-8 already does.
 */
export const pgText = (s: string): string => (s.includes('\u0000') ? s.replaceAll('\u0000', '\ufffd') : s);

const CLAIMS = `unnest($1::text[], $2::text[], $3::integer[]) AS c(id, owner, attempt)`;
/** The fence: the write applies only while this exact claim (owner + attempt) still holds. */
const GUARD = `i.id = c.id AND i.state = 'claimed' AND i.owner = c.owner AND i.attempts = c.attempt`;

/**
 * The hot statements (every claim of a pod completes the attempts that freed its slots) bump
 * a shard of their counters, `name:shard`, chosen by the server process: one row per counter
 * would make every pod's claim wait for the others' commits on it. countersQuery sums the
 * shards. Deadlock-free as before: a statement bumps rows of one shard, in name order.
 */
const COUNTER_SHARD = `':' || (pg_backend_pid() % 16)`;

/** A first try's `ok` and `k`: the applied rows are the written ones (no `was` to read on the hot path). */
const FIRST_TRY = `ok AS (SELECT id, owner, attempt FROM w),
k AS (SELECT count(*) AS applied, 0 AS earlier FROM w)`;

/**
 * A retry's `ok` and `k`: the written rows and those `already` finds done by this very claim
 * before the statement (`was`). `i` is NULL for a claim whose row is gone (FORGOTTEN).
 */
const retryCtes = (schema: string, already: string): string => `was AS (
  SELECT DISTINCT c.id, c.owner, c.attempt FROM ${CLAIMS} LEFT JOIN ${ident(schema)}.items AS i ON i.id = c.id WHERE ${already}),
ok AS (SELECT id, owner, attempt FROM w UNION ALL SELECT id, owner, attempt FROM was),
k AS (SELECT (SELECT count(*) FROM w) AS applied, (SELECT count(*) FROM was) AS earlier)`;

/**
 * A fenced write of a whole batch and its counters as ONE statement (its own transaction):
 * one round trip and one commit per batch instead of BEGIN, write, counter bump, COMMIT.
 * `write` is the guarded UPDATE or DELETE over CLAIMS, returning (id, owner, attempt) of the
 * rows that passed the fence; `counter` counts those, items_fenced the rest of the batch
 * (`n` = the batch's length: a claim listed twice is applied once, its repeat is fenced).
 * Counter rows are written in name order, as bumpQuery does. fencedWriteCtes is the part
 * before the final SELECT (`ok` holds the claims that count as applied), for statements
 * that do more.
 *
 * `already`: on the executor's retry of the statement (PostgresExecutor.query's `again`), a
 * condition on the row `i` and claim `c` saying this very claim's write already took effect,
 * before the statement (`was`): the first try committed and its answer was lost (a
 * connection cut after the commit). Such a claim is applied, counted neither again nor as
 * fenced (the first try counted it); and as the first try committed, so did its count of
 * the batch's fenced claims, which the retry then does not count again. A completion leaves done_by and attempts on the row
 * (COMPLETED); a hand-back leaves no owner, but its own time and reason (HANDED_BACK,
 * UNCLAIMED); a forget, no row (FORGOTTEN). `false` for a first try (a completion of a claim
 * already done is fenced, as on SQLite). Read in the statement's snapshot, so a row this
 * statement writes (or deletes) is not in `was`.
 */
export const fencedWriteCtes = (schema: string, write: string, counter: FencedCounter, n: string, already = 'false'): string =>
  `w AS (
  ${write}
  RETURNING i.id, c.owner, c.attempt),
${already === 'false' ? FIRST_TRY : retryCtes(schema, already)},
bump AS (
  INSERT INTO ${ident(schema)}.counters AS t (name, value)
  SELECT v.name || ${COUNTER_SHARD}, v.by FROM k,
    LATERAL (VALUES ('${counter}', k.applied), ('items_fenced', CASE WHEN k.earlier > 0 THEN 0 ELSE ${n}::bigint - k.applied END)) AS v(name, by)
  WHERE v.by > 0 ORDER BY v.name
  ON CONFLICT (name) DO UPDATE SET value = t.value + EXCLUDED.value)`;

const fencedWrite = (schema: string, write: string, counter: FencedCounter, n: string, already?: string): string =>
  `WITH ${fencedWriteCtes(schema, write, counter, n, already)}
SELECT id, owner, attempt FROM ok`;

type FencedCounter = 'items_done' | 'items_released' | 'items_gone';

/** claimed -> done for the claims in $1-$3 (CLAIMS) still held, at `now` (a parameter reference). */
export const completeWrite = (schema: string, now: string): string =>
  `UPDATE ${ident(schema)}.items AS i SET state = 'done', owner = NULL, lease_until = NULL,
    done_at = ${now}, done_by = c.owner, updated_at = ${now}
  FROM ${CLAIMS} WHERE ${GUARD}`;

/**
 * The row as completeWrite left it for this claim: done by its owner, on its attempt (a
 * later attempt, or another owner's completion, leaves other values). fencedWriteCtes's
 * `already` for a completion.
 */
export const COMPLETED = `i.state = 'done' AND i.done_by = c.owner AND i.attempts = c.attempt`;

/** Complete a whole batch in one statement, counters included; `again`: its retry (fencedWriteCtes's `already`). */
export const completeQuery = (schema: string, c: ClaimColumns, now: number, again = false): Query =>
  q(fencedWrite(schema, completeWrite(schema, '$4'), 'items_done', '$5', again ? COMPLETED : 'false'), c.ids, c.owners, c.attempts, now, c.ids.length);

/**
 * The row as a hand-back left it for this claim (releaseQuery's `already`). A handed-back row
 * keeps no owner, but what this write put there tells it: pending on the claim's attempt, at
 * this very `now` ($4: the writer's own clock, to the millisecond), with this reason ($5),
 * unless the claim was a suspect's (handBackError kept its 'abandoned' error). Another pod's
 * hand-back of the claim (recover.ts: its owner died draining) writes its own time and
 * reason; a later attempt's change, another attempt number or state. available_at may have
 * come down since (a sibling's discovery at its own, earlier clock: discover.ts, AVAILABLE).
 */
const HANDED_BACK = `i.state = 'pending' AND i.attempts = c.attempt AND i.released > 0 AND i.updated_at = $4 AND i.available_at <= $4
  AND (i.last_error = $5 OR ${suspect('i')})`;

/** The row as unclaimQuery left it for this claim: pending, its attempt taken back, at this very `now` ($4). As HANDED_BACK. */
const UNCLAIMED = `i.state = 'pending' AND i.attempts = c.attempt - 1 AND i.updated_at = $4`;

/**
 * A claim whose handler never started (a stop came while it was being written) is undone:
 * the attempt it counted is taken back, the last error kept, as SQLite's UNCLAIM_SQL.
 */
const unclaimQuery = (schema: string, c: ClaimColumns, now: number, again: boolean): Query =>
  q(
    fencedWrite(
      schema,
      `UPDATE ${ident(schema)}.items AS i SET state = 'pending', owner = NULL, lease_until = NULL,
    attempts = i.attempts - 1, updated_at = $4
  FROM ${CLAIMS} WHERE ${GUARD}`,
      'items_released',
      '$5',
      again ? UNCLAIMED : 'false',
    ),
    c.ids,
    c.owners,
    c.attempts,
    now,
    c.ids.length,
  );

/**
 * The interrupted attempt is handed back (released + 1), so it is not charged. A suspect's
 * keeps its 'abandoned' last error (suspect.ts): the hand-back changed nothing about it.
 * `again`: the executor's retry (fencedWriteCtes's `already`).
 */
export const releaseQuery = (schema: string, c: ClaimColumns, now: number, reason: string, unstarted = false, again = false): Query =>
  unstarted
    ? unclaimQuery(schema, c, now, again)
    : q(
        fencedWrite(
          schema,
          `UPDATE ${ident(schema)}.items AS i SET state = 'pending', owner = NULL, lease_until = NULL,
    released = i.released + 1, available_at = $4, last_error = ${handBackError('i', '$5')}, updated_at = $4
  FROM ${CLAIMS} WHERE ${GUARD}`,
          'items_released',
          '$6',
          again ? HANDED_BACK : 'false',
        ),
        c.ids,
        c.owners,
        c.attempts,
        now,
        pgText(reason),
        c.ids.length,
      );

/**
 * The claim's row is gone, as forgetQuery left it (its `already`). Nothing on a deleted row
 * says whose delete it was, but a row is only ever deleted as gone (this forget; a sibling's
 * end of scan, forgetUnseenQuery; retention forgetting a missing file): the item is gone
 * whoever deleted it, and counted as gone once, by that delete.
 */
const FORGOTTEN = `i.id IS NULL`;

/** The item's file is gone: the row goes, so a file that comes back is new again. `again`: the executor's retry (fencedWriteCtes's `already`). */
export const forgetQuery = (schema: string, c: ClaimColumns, again = false): Query =>
  q(
    fencedWrite(schema, `DELETE FROM ${ident(schema)}.items AS i USING ${CLAIMS} WHERE ${GUARD}`, 'items_gone', '$4', again ? FORGOTTEN : 'false'),
    c.ids,
    c.owners,
    c.attempts,
    c.ids.length,
  );

/**
 * Lock the rows the claims still hold, in id order, and read what a failure decision
 * needs. The decision is made in TypeScript (backoff.ts, shared with SQLite) and written
 * by applyFailuresQuery in the same transaction, while the rows stay locked.
 */
export const lockHeldQuery = (schema: string, c: ClaimColumns): Query =>
  q(
    `SELECT i.id, c.owner, c.attempt, i.released FROM ${ident(schema)}.items AS i JOIN ${CLAIMS} ON ${GUARD}
ORDER BY i.id FOR UPDATE OF i`,
    c.ids,
    c.owners,
    c.attempts,
  );

/**
 * A failure's retry (the first try's commit may have lost its answer): the claims whose row is
 * as applyFailuresQuery left it for them, before this transaction. A failed row keeps no
 * owner, but what the failure wrote tells it: pending or dead on the claim's attempt, at this
 * very `now` (the writer's own clock, to the millisecond), with this claim's error. Another
 * pod's failure of the claim (recover.ts: its lease ran out) writes its own time and an
 * 'abandoned' error; a later attempt's, another attempt number.
 */
export const failedBeforeQuery = (schema: string, c: ClaimColumns, errors: string[], now: number): Query =>
  q(
    `SELECT DISTINCT i.id, c.owner, c.attempt, i.state, i.available_at FROM ${ident(schema)}.items AS i
JOIN unnest($1::text[], $2::text[], $3::integer[], $4::text[]) AS c(id, owner, attempt, error) ON i.id = c.id
WHERE i.state IN ('pending', 'dead') AND i.attempts = c.attempt AND i.updated_at = $5 AND i.last_error = c.error`,
    c.ids,
    c.owners,
    c.attempts,
    errors,
    now,
  );

/** Decided failures as parallel arrays: each row goes to `pending` (with availableAt) or `dead`. */
export interface FailureColumns {
  ids: string[];
  states: ('pending' | 'dead')[];
  availableAts: (number | null)[];
  errors: string[];
}

export const applyFailuresQuery = (schema: string, f: FailureColumns, now: number): Query =>
  q(
    `UPDATE ${ident(schema)}.items AS i SET state = u.state, owner = NULL, lease_until = NULL,
  available_at = coalesce(u.available_at, i.available_at), last_error = u.error,
  dead_at = CASE WHEN u.state = 'dead' THEN $5 ELSE i.dead_at END, updated_at = $5
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[]) AS u(id, state, available_at, error)
WHERE i.id = u.id AND i.state = 'claimed'`,
    f.ids,
    f.states,
    f.availableAts,
    f.errors,
    now,
  );

/** The current holders of items whose write was fenced, to say why (slow path only). */
export const holdersQuery = (schema: string, ids: string[]): Query =>
  q(`SELECT id, state, owner, attempts FROM ${ident(schema)}.items WHERE id = ANY($1::text[])`, ids);

/** A claim still held (locked by lockHeldQuery or an orphan query) and why it failed. */
export interface HeldFailure {
  claim: Claim;
  released: number;
  error: string;
}

/**
 * Decide and write failures of locked, still-held claims: pending with backoff, or dead
 * once charged (attempts minus hand-backs, from the row) reaches maxAttempts.
 */
export async function applyFailures(exec: Exec, schema: string, held: HeldFailure[], opts: FailOptions): Promise<{ outcomes: FenceOutcome[]; bumps: Bumps }> {
  const cols: FailureColumns = { ids: [], states: [], availableAts: [], errors: [] };
  const outcomes: FenceOutcome[] = [];
  let dead = 0;
  for (const h of held) {
    const decision = decideAfterFailure(h.claim.attempt - h.released, opts.retry, opts.now, opts.random ?? Math.random);
    cols.ids.push(wellFormed(h.claim.id));
    cols.states.push(decision.state);
    cols.availableAts.push(decision.state === 'pending' ? decision.availableAt : null);
    cols.errors.push(pgText(h.error));
    if (decision.state === 'dead') {
      dead++;
      outcomes.push({ id: h.claim.id, result: 'applied', state: 'dead' });
    } else {
      outcomes.push({ id: h.claim.id, result: 'applied', state: 'pending', availableAt: decision.availableAt });
    }
  }
  if (held.length > 0) await exec(applyFailuresQuery(schema, cols, opts.now));
  return { outcomes, bumps: { items_failed: held.length, dead_lettered: dead } };
}

/** The fenced verbs of the PostgreSQL ledger: one transaction each, retried when transient. */
export interface FinishOps {
  complete(claims: Claim[], now: number): Promise<FenceOutcome[]>;
  fail(failures: Failure[], opts: FailOptions): Promise<FenceOutcome[]>;
  release(claims: Claim[], now: number, reason: string, unstarted?: boolean): Promise<FenceOutcome[]>;
  forget(claims: Claim[], now: number): Promise<FenceOutcome[]>;
}

/** Which claim a returned row belongs to: the whole fencing token, not just the id. */
export const claimKey = (id: string, owner: string, attempt: number): string => `${wellFormed(id)}\0${owner}\0${attempt}`;
const keyOf = (c: Claim): string => claimKey(c.id, c.owner, c.attempt);

/** A row a fenced write applied to: the claim's whole token. */
export type Applied = { id: string; owner: string; attempt: number };

/**
 * Outcomes in claim order of a fenced write that applied to `rows`: a claim listed twice is
 * applied once and the repeat reports as fenced (as in SQLite). Only when some were fenced,
 * a read says why (after the commit: the reason is for people, the counts were written with
 * the change).
 */
export async function fencedOutcomes(
  ex: PostgresExecutor,
  schema: string,
  what: string,
  claims: Claim[],
  rows: Applied[],
  ok: (c: Claim) => FenceOutcome,
): Promise<FenceOutcome[]> {
  // A row is updated at most once per statement, so ids are unique among `rows`.
  const byId = new Map<string, Applied>();
  for (const r of rows) byId.set(r.id, r);
  let fencedCount = 0;
  const outs = claims.map((c): FenceOutcome | Claim => {
    const id = wellFormed(c.id);
    const r = byId.get(id);
    if (r === undefined || r.owner !== c.owner || r.attempt !== c.attempt) {
      fencedCount++;
      return c;
    }
    byId.delete(id); // a repeat is fenced
    return ok(c);
  });
  if (fencedCount === 0) return outs as FenceOutcome[];
  const fenced = outs.filter((o): o is Claim => !('result' in o));
  const holders = await ex.query<ClaimHolder & { id: string }>(what, holdersQuery(schema, fenced.map((c) => wellFormed(c.id))));
  const holderOf = new Map(holders.map((r) => [r.id, r]));
  return outs.map((o) => ('result' in o ? o : { id: o.id, result: 'fenced', reason: fenceReason(o, holderOf.get(wellFormed(o.id)) ?? null) }));
}

/**
 * Outcomes in claim order. `applied` maps the tokens the fenced write applied to; a claim
 * listed twice is applied once and the repeat reports as fenced (as in SQLite). Fenced
 * writes are counted and explained in the same transaction.
 */
async function settle(exec: Exec, schema: string, claims: Claim[], applied: Map<string, FenceOutcome>, bumps: Bumps, countFenced = true): Promise<FenceOutcome[]> {
  const outs = claims.map((c): FenceOutcome | Claim => {
    const out = applied.get(keyOf(c));
    applied.delete(keyOf(c));
    return out ?? c;
  });
  const fenced = outs.filter((o): o is Claim => !('result' in o));
  let holders = new Map<string, ClaimHolder>();
  if (fenced.length > 0) {
    const rows = await exec<ClaimHolder & { id: string }>(holdersQuery(schema, fenced.map((c) => wellFormed(c.id))));
    holders = new Map(rows.map((r) => [r.id, r]));
  }
  const bump = bumpQuery(schema, { ...bumps, items_fenced: countFenced ? fenced.length : 0 });
  if (bump) await exec(bump);
  return outs.map((o) =>
    'result' in o ? o : { id: o.id, result: 'fenced', reason: fenceReason(o, holders.get(wellFormed(o.id)) ?? null) },
  );
}

/**
 * fail's transaction: lock the claims still held, decide and write their failures, count
 * them. `again`: the executor's retry, whose first try may have committed with its answer
 * lost (a connection cut after the commit): a claim whose failure that first try wrote
 * (failedBeforeQuery) is applied as its row says, counted neither again (the first try
 * counted it) nor as fenced; nor are the batch's fenced claims then (the first try, which
 * committed, counted them). Read after the lock (which waits for a first try still
 * committing, whose write the read then sees) and before the writes, so a row this
 * transaction writes is not taken for the first try's.
 */
export async function failClaims(exec: Exec, schema: string, failures: Failure[], opts: FailOptions, again = false): Promise<FenceOutcome[]> {
  const claims = failures.map((f) => f.claim);
  const cols = claimColumns(claims);
  const rows = await exec<Applied & { released: number }>(lockHeldQuery(schema, cols));
  const released = new Map(rows.map((r) => [claimKey(r.id, r.owner, r.attempt), r.released]));
  const held: HeldFailure[] = [];
  for (const f of failures) {
    const r = released.get(keyOf(f.claim));
    if (r === undefined) continue;
    released.delete(keyOf(f.claim)); // a repeat is fenced
    held.push({ claim: f.claim, released: r, error: f.error });
  }
  const applied = new Map<string, FenceOutcome>();
  let committed = false;
  if (again) {
    const before = await exec<Applied & { state: 'pending' | 'dead'; available_at: string | number }>(
      failedBeforeQuery(schema, cols, failures.map((f) => pgText(f.error)), opts.now),
    );
    committed = before.length > 0;
    const rowOf = new Map(before.map((r) => [claimKey(r.id, r.owner, r.attempt), r]));
    for (const c of claims) {
      const r = rowOf.get(keyOf(c));
      if (r === undefined) continue;
      applied.set(keyOf(c), r.state === 'dead' ? { id: c.id, result: 'applied', state: 'dead' } : { id: c.id, result: 'applied', state: 'pending', availableAt: Number(r.available_at) });
    }
  }
  const { outcomes, bumps } = await applyFailures(exec, schema, held, opts);
  held.forEach((h, i) => applied.set(keyOf(h.claim), outcomes[i]!));
  return settle(exec, schema, claims, applied, bumps, !committed);
}

export function makeFinishOps(ex: PostgresExecutor, schema: string): FinishOps {
  /**
   * complete / release / forget: one statement writes the batch and its counters
   * (fencedWrite). Only when some claims were fenced, a read says why, after the commit: the
   * reason is for people, the counts were already written with the change.
   */
  const guarded = (what: string, query: (c: ClaimColumns, again: boolean) => Query, ok: (c: Claim) => FenceOutcome) =>
    async (claims: Claim[]): Promise<FenceOutcome[]> => {
      if (claims.length === 0) return [];
      const cols = claimColumns(claims);
      const rows = await ex.query<Applied>(what, query(cols, false), query(cols, true));
      return fencedOutcomes(ex, schema, what, claims, rows, ok);
    };

  return {
    complete: (claims, now) =>
      guarded('complete', (c, again) => completeQuery(schema, c, now, again), (c) => ({ id: c.id, result: 'applied', state: 'done' }))(claims),

    release: (claims, now, reason, unstarted) =>
      guarded(
        'release',
        (c, again) => releaseQuery(schema, c, now, reason, unstarted, again),
        (c) => ({ id: c.id, result: 'applied', state: 'pending', availableAt: now }),
      )(claims),

    forget: (claims) =>
      guarded('forget', (c, again) => forgetQuery(schema, c, again), (c) => ({ id: c.id, result: 'applied', state: 'gone' }))(claims),

    fail: (failures, opts) =>
      failures.length === 0 ? Promise.resolve([]) : ex.tx('fail', (exec, attempt) => failClaims(exec, schema, failures, opts, attempt > 1)),
  };
}

/**
 * Every pending item the pass `pass` did not see is forgotten (its file is gone: the caller
 * completed its scan), counted as gone, in one statement.
 */
export const forgetUnseenQuery = (schema: string, pass: string): Query =>
  q(
    `WITH d AS (DELETE FROM ${ident(schema)}.items WHERE state = 'pending' AND seen_run IS DISTINCT FROM $1 RETURNING 1),
k AS (SELECT count(*) AS n FROM d),
bump AS (
  INSERT INTO ${ident(schema)}.counters AS t (name, value) SELECT 'items_gone', k.n FROM k WHERE k.n > 0
  ON CONFLICT (name) DO UPDATE SET value = t.value + EXCLUDED.value)
SELECT n::integer AS n FROM k`,
    pass,
  );
