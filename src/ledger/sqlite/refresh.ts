import type { Database } from 'better-sqlite3';
import type { RefreshParams } from '../refresh-params.js';

// Refresh runs only when a policy asks for it, as statements of its own: the default
// (`never`) discovery path stays DISCOVER + CLAIM_BATCH and pays nothing for it.

/** A stat field counts as changed only when both sides are known and differ. */
const differs = (discovered: string, claimed: string): string =>
  `(${discovered} IS NOT NULL AND ${claimed} IS NOT NULL AND ${discovered} <> ${claimed})`;

/**
 * Finished rows of the batch that are outstanding again. `@doneBefore` NULL disables
 * the every-occurrence test (`done_at < NULL` is never true); `@onChange` is 0 or 1.
 * The stat compared is the batch's (j.value), not the row's: an item discovered
 * without stat data never counts as changed. Walks the batch by primary key like
 * CLAIMABLE in claim.ts (CROSS JOIN and unary `+`).
 */
const REFRESHABLE = `
  SELECT i.id FROM json_each(@batch) AS j CROSS JOIN items AS i ON i.id = j.value ->> 0
  WHERE (+i.state = 'done' AND +i.done_at < @doneBefore)
     OR (@onChange AND +i.state IN ('done', 'dead') AND (
          ${differs('j.value ->> 1', '+i.claimed_size')} OR ${differs('j.value ->> 2', '+i.claimed_mtime_ms')}))`;

/**
 * A new cycle: pending at once with attempts and released 0, so the next claim is
 * attempt 1 with the whole retry budget. last_error is kept, as retryDead keeps it.
 * seen_run becomes the pass's (@runId): discovery does not rewrite an unchanged done row
 * (discover.ts), and a pending row of another pass is neither swept by this one nor spared
 * by its end of scan (finish.ts, forgetUnseen), which would take it for a deleted file.
 */
export const REFRESH_SQL = `
UPDATE items SET state = 'pending', attempts = 0, released = 0, available_at = @now,
  done_at = NULL, dead_at = NULL, updated_at = @now, seen_run = @runId
WHERE id IN (${REFRESHABLE})`;

/**
 * on-change, for finished rows whose claimed version has no stat (claimed without
 * one, e.g. under `never`, which does not stat): the stat seen now becomes the
 * baseline, so later changes count. Without it, switching a ledger to on-change
 * would never notice a change to anything it had already finished.
 */
export const ADOPT_BASELINE_SQL = `
UPDATE items SET claimed_size = coalesce(claimed_size, size), claimed_mtime_ms = coalesce(claimed_mtime_ms, mtime_ms)
WHERE id IN (
  SELECT i.id FROM json_each(@batch) AS j CROSS JOIN items AS i ON i.id = j.value ->> 0
  WHERE +i.state IN ('done', 'dead') AND (+i.claimed_size IS NULL OR +i.claimed_mtime_ms IS NULL))`;

/**
 * Apply a refresh policy to a discovered batch (JSON [[id, size, mtimeMs], ...]).
 * Must run inside the discovery transaction, after the upsert and before claiming.
 */
export type ApplyRefresh = (batch: string, params: RefreshParams, now: number, runId: string) => void;

export function makeApplyRefresh(db: Database): ApplyRefresh {
  const refresh = db.prepare(REFRESH_SQL);
  const adopt = db.prepare(ADOPT_BASELINE_SQL);
  return (batch, params, now, runId) => {
    refresh.run({ batch, now, runId, doneBefore: params.doneBefore, onChange: params.onChange ? 1 : 0 });
    // After refresh: a refreshed row is pending, and its claim records the stat.
    if (params.onChange) adopt.run({ batch });
  };
}
