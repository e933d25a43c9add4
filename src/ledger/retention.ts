/**
 * Retention (issue 17): the ledger verbs that keep it from growing forever. Each verb is
 * one bounded step (at most `limit` rows, one transaction): the runner loops over them at
 * the end of a pass and stops between steps when the pass is told to stop, so pruning
 * never delays a drain (src/runner/prune.ts).
 *
 * Totals never go down: a deleted run is first folded into per-outcome totals
 * (run_totals) that runStats() adds to what is left, and the greatest occurrence of the
 * deleted runs and events is kept for lastOccurrenceRecorded(). Event totals already live
 * in the counters table. Unfinished runs and the newest RUNS_KEPT_AT_ANY_AGE runs are never
 * deleted (the daemon and `schedule` read the newest start; `status` and the failure-streak
 * gauge the newest 20).
 */
/**
 * Runs kept whatever their age: `retention.days` deletes only older ones. `status` shows the
 * newest 10 and cronsafe_consecutive_failed_runs reads the newest 20 (STREAK_WINDOW); with
 * the age limit alone, a job that runs once a month kept one run.
 */
export const RUNS_KEPT_AT_ANY_AGE = 20;

export interface PruneRunsOptions {
  /** Keep this many newest runs (by start; finished or not). */
  keep: number;
  /** Delete finished runs that started before this instant (epoch ms), whatever `keep` says, past the newest RUNS_KEPT_AT_ANY_AGE. */
  before: number;
  /** Rows per step. */
  limit: number;
}

export interface PruneEventsOptions {
  /** Keep this many newest events. */
  keep: number;
  /** Delete events recorded before this instant (epoch ms). */
  before: number;
  limit: number;
}

/**
 * One step of the missing-file walk over the items, in id order. The walk resumes where
 * the last step stopped, in this pass or an earlier one (its position is kept in the
 * ledger), and starts over after the last id: each pass walks a bounded slice, so a large
 * ledger costs every pass the same, and is covered whole over several complete passes.
 */
export interface MarkMissingOptions {
  /** The pass whose scan was complete (the rows it wrote carry it). */
  passId: string;
  /**
   * When that scan began (epoch ms). Neither ledger rewrites a done row on every discovery;
   * each refreshes its `seen_at` at most once per SEEN_GRANULARITY_MS, so a row counts as
   * unseen only when its seen_at is older than scanStartedAt minus that. No later than the
   * clock any of the scan's discovery batches read (produce.ts), or a clock stepped back
   * during the scan makes rows those batches left alone look unseen.
   */
  scanStartedAt: number;
  /** The mark written (epoch ms). */
  now: number;
  /** Rows looked at per step (not rows marked). */
  limit: number;
}

export interface MarkMissingStep {
  /** Rows marked missing in this step. */
  marked: number;
  /** This step reached the last id: the next one starts from the first. */
  wrapped: boolean;
}

/** Where the missing-file walk stands (a `meta` row: the last id it looked at, '' for the start). */
export const WALK_KEY = 'retention.missingWalkAfter';

/** How stale a done row's seen_at may be (a day; either ledger): a file is found missing at most this late. */
export const SEEN_GRANULARITY_MS = 24 * 3600 * 1000;

export interface RetentionLedger {
  /** Fold finished runs beyond retention into run totals and delete them; returns how many. */
  pruneRuns(opts: PruneRunsOptions): Promise<number>;
  /** Delete events beyond retention (their totals are in the counters already); returns how many. */
  pruneEvents(opts: PruneEventsOptions): Promise<number>;
  /**
   * After a complete scan: done items the scan did not see get `missing_since = now` (kept
   * when already set). A discovery of the item clears it. Pending items are forgetUnseen's.
   */
  markMissing(opts: MarkMissingOptions): Promise<MarkMissingStep>;
  /**
   * Done items missing since before `before` are deleted (counted as gone); should the
   * file come back, it is a new item. Dead items are never removed. Returns how many.
   */
  forgetMissing(opts: { before: number; limit: number }): Promise<number>;
  /**
   * Give free pages back to the file system, at most `maxPages` per call (SQLite
   * incremental vacuum). PostgreSQL: nothing to do here (autovacuum makes the space reusable).
   */
  reclaimSpace(maxPages: number): Promise<ReclaimedSpace>;
}

export interface ReclaimedSpace {
  /** Pages given back by this call. */
  freed: number;
  /** Free pages left in the file. */
  free: number;
  /**
   * false: a SQLite file made before cronsafe 0.x set auto_vacuum=INCREMENTAL; its free
   * pages are reused but the file only shrinks after a one-time VACUUM (docs/operations.md).
   */
  shrinkable: boolean;
}
