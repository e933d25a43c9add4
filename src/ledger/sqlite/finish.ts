import type { Database } from 'better-sqlite3';
import { decideAfterFailure } from '../backoff.js';
import { fenceReason, type ClaimHolder } from '../fencing.js';
import type { Claim, FailOptions, FenceOutcome, Failure } from '../types.js';
import type { Counters } from './counters.js';
import { batchJson, wellFormed } from '../well-formed.js';
import { CLAIMED_SUSPECT } from './claim.js';

/** A success written behind (write-behind.ts), with when it was recorded. */
export type Recorded<T> = T & { at?: number };

/** The fence: the write applies only while this exact claim (owner + attempt) still holds. */
const GUARD = `id = @id AND state = 'claimed' AND owner = @owner AND attempts = @attempt`;

/**
 * Complete a whole batch in one statement (claims as JSON [[id, owner, attempt, at?], ...]:
 * `at`, when given, is when the success was recorded, written behind later; else `@now`);
 * RETURNING names the rows that passed the fence, the rest are fenced.
 * The unary `+` keeps the planner on the primary key (see CLAIMABLE in claim.ts).
 */
export const COMPLETE_SQL = `
UPDATE items SET state = 'done', owner = NULL, lease_until = NULL, done_at = c.at, updated_at = c.at
FROM (SELECT j.value ->> 0 AS id, j.value ->> 1 AS owner, j.value ->> 2 AS attempt, coalesce(j.value ->> 3, @now) AS at
      FROM json_each(@claims) AS j) AS c
WHERE items.id = c.id AND +items.state = 'claimed' AND +items.owner = c.owner AND +items.attempts = c.attempt
RETURNING items.id`;

/**
 * A start and its success written together (write-behind.ts flushes both in one
 * transaction): pending straight to done, as APPLY_STARTS_SQL then COMPLETE_SQL would leave
 * the row, without writing the claim in between (its row and owner index) only to undo it.
 * Records as JSON [[id, attempt, at, rowid, doneAt], ...] (`at` the start, `doneAt` the
 * success); the guard is the start's (see APPLY_STARTS_SQL), and the completion's fence
 * holds by construction: the same owner and attempt. RETURNING names the rows it applied
 * to; the caller sends the rest the two-step way.
 */
const START_AND_COMPLETE = `
UPDATE items SET state = 'done', owner = NULL, lease_until = NULL, attempts = c.attempt,
  claimed_size = items.size, claimed_mtime_ms = items.mtime_ms, done_at = c.done_at, updated_at = c.done_at
FROM (SELECT j.value ->> 0 AS id, j.value ->> 1 AS attempt, j.value ->> 2 AS at, j.value ->> 3 AS rid,
             j.value ->> 4 AS done_at
      FROM json_each(@records) AS j) AS c
WHERE +items.state = 'pending' AND +items.attempts = c.attempt - 1 AND +items.updated_at <= c.at`;

export const START_AND_COMPLETE_SQL = `${START_AND_COMPLETE} AND items.id = c.id
RETURNING items.id`;

/**
 * START_AND_COMPLETE_SQL for records that carry the rowid discovery read: the row is found
 * by rowid in the table itself. Scanned in the directory's order, ids land all over the id
 * index, so finding each one there is a page read; rows were inserted in discovery order,
 * so the rowids of a flush sit on a few adjacent pages. The id must match too (`+`: checked
 * on the row, not looked up), so a rowid that names another row (renumbered by a VACUUM)
 * applies nothing, and the record goes the two-step way like any other miss.
 */
export const START_AND_COMPLETE_BY_ROWID_SQL = `${START_AND_COMPLETE} AND items.rowid = c.rid AND +items.id = c.id
RETURNING items.id`;

export const FAIL_READ_SQL = `SELECT released FROM items WHERE ${GUARD}`;

export const FAIL_TO_PENDING_SQL = `
UPDATE items SET state = 'pending', owner = NULL, lease_until = NULL, available_at = @availableAt,
  last_error = @error, updated_at = @now
WHERE ${GUARD}`;

export const FAIL_TO_DEAD_SQL = `
UPDATE items SET state = 'dead', owner = NULL, lease_until = NULL, last_error = @error,
  dead_at = @now, updated_at = @now
WHERE ${GUARD}`;

/**
 * The interrupted attempt is handed back (released + 1), so it is not charged. A suspect's
 * (claim.ts: its charge before this claim was a run that died) keeps that last error: the
 * hand-back changed nothing about it, and with the reason written over it, it would run
 * beside other items at its next sweep, and take them down with it if it is the poison.
 */
export const RELEASE_SQL = `
UPDATE items SET state = 'pending', owner = NULL, lease_until = NULL, released = released + 1,
  available_at = @now, updated_at = @now,
  last_error = CASE WHEN ${CLAIMED_SUSPECT} THEN last_error ELSE @reason END
WHERE ${GUARD}`;

/**
 * A claim whose handler never started (a stop came while it was being written) is undone:
 * the attempt it counted is taken back, the last error kept. Not a hand-back: no attempt ran.
 */
export const UNCLAIM_SQL = `
UPDATE items SET state = 'pending', owner = NULL, lease_until = NULL, attempts = attempts - 1, updated_at = @now
WHERE ${GUARD}`;

/** The item's file is gone: the row goes, so a file that comes back is new again. */
export const FORGET_SQL = `DELETE FROM items WHERE ${GUARD}`;

export const HOLDER_SQL = `SELECT state, owner, attempts FROM items WHERE id = ?`;

/** The fenced verbs of the SQLite ledger (synchronous; the Ledger wraps them). */
export interface FinishOps {
  complete(claims: Claim[], now: number): FenceOutcome[];
  /** Pending items the pass `passId` did not see are gone (counted), at most `limit`; returns how many. */
  forgetUnseen(passId: string, limit?: number): number;
  fail(failures: Failure[], opts: FailOptions): FenceOutcome[];
  release(claims: Claim[], now: number, reason: string, unstarted?: boolean): FenceOutcome[];
  /**
   * One failed attempt (pending with backoff, or dead), counted in the totals.
   * Must run inside the caller's transaction; reclaimOrphans and settle reuse it.
   */
  failOne(claim: Claim, error: string, opts: FailOptions): FenceOutcome;
  /** complete() without its own transaction (settle runs it inside its own). */
  completeIn(claims: Recorded<Claim>[], now: number): FenceOutcome[];
  /**
   * Starts (not yet in the ledger) whose attempt also succeeded at `doneAt`, written as one
   * transition inside the caller's transaction; returns the ids it applied to, counted as done.
   */
  startAndCompleteIn(records: { id: string; attempt: number; at: number; rowid?: number; doneAt: number }[]): Set<string>;
  /** One hand-back, inside the caller's transaction. */
  releaseOne(claim: Claim, now: number, reason: string, unstarted?: boolean): FenceOutcome;
  forget(claims: Claim[], now: number): FenceOutcome[];
  /** One forget, inside the caller's transaction. */
  forgetOne(claim: Claim): FenceOutcome;
}

/**
 * At most @limit (-1: all) pending rows of other passes. Three ranges of the pending partial
 * index (seen_run, available_at), each a search: `seen_run IS NOT @passId` would scan the
 * whole index from its start at every step, past the rows this pass saw.
 */
export const FORGET_UNSEEN_SQL = `DELETE FROM items WHERE rowid IN (
  SELECT rowid FROM items WHERE state = 'pending' AND seen_run < @passId
  UNION ALL SELECT rowid FROM items WHERE state = 'pending' AND seen_run > @passId
  UNION ALL SELECT rowid FROM items WHERE state = 'pending' AND seen_run IS NULL
  LIMIT @limit)`;

export function makeFinishOps(db: Database, counters: Counters): FinishOps {
  const unseen = db.prepare(FORGET_UNSEEN_SQL);
  const forgetUnseenTx = db.transaction((passId: string, limit?: number): number => {
    const n = unseen.run({ passId, limit: limit ?? -1 }).changes;
    if (n > 0) counters.bump('items_gone', n);
    return n;
  });
  const complete = db.prepare(COMPLETE_SQL).pluck();
  const startAndComplete = db.prepare(START_AND_COMPLETE_SQL).pluck();
  const startAndCompleteByRowid = db.prepare(START_AND_COMPLETE_BY_ROWID_SQL).pluck();
  const failRead = db.prepare(FAIL_READ_SQL).pluck();
  const toPending = db.prepare(FAIL_TO_PENDING_SQL);
  const toDead = db.prepare(FAIL_TO_DEAD_SQL);
  const release = db.prepare(RELEASE_SQL);
  const unclaim = db.prepare(UNCLAIM_SQL);
  const holder = db.prepare(HOLDER_SQL);
  const forget = db.prepare(FORGET_SQL);

  // Only ever called inside the transaction of the rejected write, so the count is exact.
  const fenced = (claim: Claim): FenceOutcome => {
    counters.bump('items_fenced', 1);
    return {
      id: claim.id,
      result: 'fenced',
      reason: fenceReason(claim, (holder.get(wellFormed(claim.id)) as ClaimHolder | undefined) ?? null),
    };
  };
  const guard = (c: Claim) => ({ id: wellFormed(c.id), owner: c.owner, attempt: c.attempt });

  const failOne = (claim: Claim, error: string, opts: FailOptions): FenceOutcome => {
    const released = failRead.get(guard(claim)) as number | undefined;
    if (released === undefined) return fenced(claim);
    // Charged from the row, not from the caller's copy of the claim.
    const decision = decideAfterFailure(claim.attempt - released, opts.retry, opts.now, opts.random ?? Math.random);
    counters.bump('items_failed', 1);
    if (decision.state === 'dead') {
      toDead.run({ ...guard(claim), error, now: opts.now });
      counters.bump('dead_lettered', 1);
      return { id: claim.id, result: 'applied', state: 'dead' };
    }
    toPending.run({ ...guard(claim), error, now: opts.now, availableAt: decision.availableAt });
    return { id: claim.id, result: 'applied', state: 'pending', availableAt: decision.availableAt };
  };

  const completeIn = (claims: Recorded<Claim>[], now: number): FenceOutcome[] => {
    if (claims.length === 0) return [];
    const batch = batchJson(claims.map((c) => (c.at === undefined ? [c.id, c.owner, c.attempt] : [c.id, c.owner, c.attempt, c.at])));
    const applied = new Set(complete.all({ now, claims: batch }) as string[]);
    counters.bump('items_done', applied.size);
    return claims.map((c) => {
      // delete(): a claim listed twice is applied once; the repeat reports as fenced.
      // RETURNING gives stored ids, so an ill-formed one is looked up as stored.
      const done = applied.delete(c.id) || applied.delete(wellFormed(c.id));
      return done ? { id: c.id, result: 'applied', state: 'done' } : fenced(c);
    });
  };
  const completeTx = db.transaction(completeIn);

  const startAndCompleteIn = (records: { id: string; attempt: number; at: number; rowid?: number; doneAt: number }[]): Set<string> => {
    const applied = new Set<string>();
    const byRowid = records.filter((r) => r.rowid !== undefined);
    const byId = byRowid.length === records.length ? [] : records.filter((r) => r.rowid === undefined);
    if (byRowid.length > 0) {
      for (const id of startAndCompleteByRowid.all({ records: batchJson(byRowid.map((r) => [r.id, r.attempt, r.at, r.rowid, r.doneAt])) }) as string[]) applied.add(id);
    }
    if (byId.length > 0) {
      for (const id of startAndComplete.all({ records: batchJson(byId.map((r) => [r.id, r.attempt, r.at, null, r.doneAt])) }) as string[]) applied.add(id);
    }
    counters.bump('items_done', applied.size);
    return applied;
  };

  const failTx = db.transaction((failures: Failure[], opts: FailOptions): FenceOutcome[] =>
    failures.map((f) => failOne(f.claim, f.error, opts)),
  );

  const releaseOne = (c: Claim, now: number, reason: string, unstarted = false): FenceOutcome => {
    if ((unstarted ? unclaim.run({ ...guard(c), now }) : release.run({ ...guard(c), now, reason })).changes === 0) return fenced(c);
    counters.bump('items_released', 1);
    return { id: c.id, result: 'applied', state: 'pending', availableAt: now };
  };
  const forgetOne = (c: Claim): FenceOutcome => {
    if (forget.run(guard(c)).changes === 0) return fenced(c);
    counters.bump('items_gone', 1);
    return { id: c.id, result: 'applied', state: 'gone' };
  };
  const forgetTx = db.transaction((claims: Claim[]): FenceOutcome[] => claims.map(forgetOne));

  const releaseTx = db.transaction((claims: Claim[], now: number, reason: string, unstarted: boolean): FenceOutcome[] =>
    claims.map((c) => releaseOne(c, now, reason, unstarted)),
  );

  return {
    complete: (claims, now) => (claims.length === 0 ? [] : completeTx.immediate(claims, now)),
    forgetUnseen: (passId, limit) => forgetUnseenTx.immediate(passId, limit),
    fail: (failures, opts) => (failures.length === 0 ? [] : failTx.immediate(failures, opts)),
    release: (claims, now, reason, unstarted = false) => (claims.length === 0 ? [] : releaseTx.immediate(claims, now, reason, unstarted)),
    failOne,
    completeIn,
    startAndCompleteIn,
    releaseOne,
    forget: (claims) => (claims.length === 0 ? [] : forgetTx.immediate(claims)),
    forgetOne,
  };
}
