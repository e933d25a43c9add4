import type { Database } from 'better-sqlite3';
import { RUNS_KEPT_AT_ANY_AGE, SEEN_GRANULARITY_MS, type MarkMissingOptions, type MarkMissingStep, type PruneEventsOptions, type PruneRunsOptions, type ReclaimedSpace } from '../retention.js';

// Retention on SQLite (src/ledger/retention.ts): each verb is one IMMEDIATE transaction
// over at most `limit` rows, so a pass's writers never wait long behind it.

/** Newest first, as recentRuns orders them. */
const NEWEST = 'ORDER BY started_at DESC, seq DESC';

/**
 * Finished runs beyond retention, oldest first: past the newest @keep, or started before
 * @before; never one of the newest RUNS_KEPT_AT_ANY_AGE (the newest is the daemon's
 * lastRunStart; the failure streak reads 20), never an unfinished one.
 */
export const PRUNABLE_RUNS_SQL = `
SELECT seq FROM runs
WHERE finished_at IS NOT NULL
  AND seq NOT IN (SELECT seq FROM runs ${NEWEST} LIMIT ${RUNS_KEPT_AT_ANY_AGE})
  AND (started_at < @before OR seq NOT IN (SELECT seq FROM runs ${NEWEST} LIMIT @keep))
ORDER BY started_at, seq LIMIT @limit`;

/** max() of two nullable values, NULL only when both are (SQLite's max(a, b) is NULL if either is). */
const greater = (a: string, b: string): string => `max(coalesce(${a}, ${b}), coalesce(${b}, ${a}))`;
const lesser = (a: string, b: string): string => `min(coalesce(${a}, ${b}), coalesce(${b}, ${a}))`;

/** Fold the runs about to go into run_totals (runStats adds those to the runs left). */
export const FOLD_RUNS_SQL = `
INSERT INTO run_totals (outcome, runs, first_started, last_started, last_finished, last_scheduled_for)
SELECT outcome, count(*), min(started_at), max(started_at), max(finished_at), max(scheduled_for)
FROM runs WHERE seq IN (SELECT value FROM json_each(@seqs)) GROUP BY outcome
ON CONFLICT (outcome) DO UPDATE SET
  runs = runs + excluded.runs,
  first_started = ${lesser('first_started', 'excluded.first_started')},
  last_started = ${greater('last_started', 'excluded.last_started')},
  last_finished = ${greater('last_finished', 'excluded.last_finished')},
  last_scheduled_for = ${greater('last_scheduled_for', 'excluded.last_scheduled_for')}`;

export const DELETE_RUNS_SQL = `DELETE FROM runs WHERE seq IN (SELECT value FROM json_each(@seqs))`;

/** Events past the newest @keep, or recorded before @before, oldest first. */
export const PRUNABLE_EVENTS_SQL = `
SELECT seq FROM events
WHERE at < @before OR seq < (SELECT seq FROM events ORDER BY seq DESC LIMIT 1 OFFSET @keep - 1)
ORDER BY seq LIMIT @limit`;

export const FOLD_EVENTS_SQL = `
INSERT INTO event_totals (kind, events, last_occurrence)
SELECT kind, count(*), max(occurrence) FROM events WHERE seq IN (SELECT value FROM json_each(@seqs)) GROUP BY kind
ON CONFLICT (kind) DO UPDATE SET
  events = events + excluded.events,
  last_occurrence = ${greater('last_occurrence', 'excluded.last_occurrence')}`;

export const DELETE_EVENTS_SQL = `DELETE FROM events WHERE seq IN (SELECT value FROM json_each(@seqs))`;

/**
 * A mark older than the row's completion is void: the item was done again since (say,
 * requeued and processed), so its file was there. Such a row counts as unmarked, and the
 * forget step skips it. Discovery clears marks anyway; this covers what it cannot see.
 */
export const STILL_DONE_UNMARKED = '(missing_since IS NULL OR missing_since < done_at)';

/**
 * Where the missing-file walk stands on SQLite: the last rowid it looked at (0 for the start).
 * Not retention.ts's WALK_KEY (an id, PostgreSQL's walk): a ledger that walked by id before
 * starts this walk from the beginning once.
 */
export const WALK_ROWID_KEY = 'retention.missingWalkAfterRowid';

/**
 * The last rowid of the next @limit rows after @after, in rowid order, and how many there
 * are. The walk goes in the table's own order: by id it looked each row up through the id
 * index, one random page of the table per row (ids are inserted in the directory's hash
 * order): 0.17-0.19 s of CPU and 0.5-0.65 s of wall time over 100,000 done items under
 * load; by rowid it reads each page once, 0.02 s of CPU (docs/benchmarks.md). Any order that covers every row
 * serves: a row is marked only when no complete scan within a day found it.
 */
export const CHUNK_SQL = `SELECT max(rowid) AS last, count(*) AS n FROM (SELECT rowid FROM items WHERE rowid > @after ORDER BY rowid LIMIT @limit)`;

export const WALK_AT_SQL = `SELECT value FROM meta WHERE key = '${WALK_ROWID_KEY}'`;
export const WALK_TO_SQL = `INSERT INTO meta (key, value) VALUES ('${WALK_ROWID_KEY}', @after)
  ON CONFLICT (key) DO UPDATE SET value = excluded.value`;

/**
 * Done rows a complete scan did not find. Discovery writes every row it finds but a done one
 * it saw less than a day ago (discover.ts): that one keeps an older seen_run, and a seen_at
 * no older than the scan's discovery minus SEEN_GRANULARITY_MS. So a done row counts as
 * found when it carries the pass (@passId: written by this scan, or not done when found) or a
 * seen_at no older than @scanStartedAt minus a day: the scan found it, or some scan did
 * within the day before it began. A file deleted since is marked up to a day late, never
 * sooner. A NULL seen_at (a row from before migration 006 that no discovery has written
 * since) counts only its pass, as before. Not a row done since the scan began: it was
 * claimed in this pass, so its file was there (as PostgreSQL's markMissingQuery).
 * Never marking a row whose file exists rests on discovery: it writes any marked row it
 * finds (the mark goes), so a mark survives only complete scans that all missed the file.
 */
export const MARK_MISSING_SQL = `
UPDATE items SET missing_since = @now
WHERE rowid > @after AND rowid <= @end AND state = 'done' AND ${STILL_DONE_UNMARKED} AND seen_run IS NOT @passId
  AND (seen_at IS NULL OR seen_at < @scanStartedAt - ${SEEN_GRANULARITY_MS}) AND coalesce(done_at, 0) < @scanStartedAt`;

/** Walks items_missing: only marked rows, whose mark is younger than their completion. */
export const FORGET_MISSING_SQL = `
DELETE FROM items WHERE id IN (
  SELECT id FROM items WHERE missing_since < @before AND state = 'done' AND done_at <= missing_since LIMIT @limit)`;

/** The retention verbs of the SQLite ledger (synchronous; the Ledger wraps them). */
export interface PruneOps {
  pruneRuns(opts: PruneRunsOptions): number;
  pruneEvents(opts: PruneEventsOptions): number;
  markMissing(opts: MarkMissingOptions): MarkMissingStep;
  forgetMissing(opts: { before: number; limit: number }): number;
  reclaimSpace(maxPages: number): ReclaimedSpace;
}

export function makePruneOps(db: Database): PruneOps {
  const prunableRuns = db.prepare(PRUNABLE_RUNS_SQL).pluck();
  const foldRuns = db.prepare(FOLD_RUNS_SQL);
  const deleteRuns = db.prepare(DELETE_RUNS_SQL);
  const prunableEvents = db.prepare(PRUNABLE_EVENTS_SQL).pluck();
  const foldEvents = db.prepare(FOLD_EVENTS_SQL);
  const deleteEvents = db.prepare(DELETE_EVENTS_SQL);
  const chunk = db.prepare(CHUNK_SQL);
  const walkAt = db.prepare(WALK_AT_SQL).pluck();
  const walkTo = db.prepare(WALK_TO_SQL);
  const mark = db.prepare(MARK_MISSING_SQL);
  const forget = db.prepare(FORGET_MISSING_SQL);

  const pruneRuns = db.transaction((o: PruneRunsOptions): number => {
    const seqs = prunableRuns.all({ keep: o.keep, before: o.before, limit: o.limit }) as number[];
    if (seqs.length === 0) return 0;
    const json = JSON.stringify(seqs);
    foldRuns.run({ seqs: json });
    return deleteRuns.run({ seqs: json }).changes;
  });
  const pruneEvents = db.transaction((o: PruneEventsOptions): number => {
    const seqs = prunableEvents.all({ keep: o.keep, before: o.before, limit: o.limit }) as number[];
    if (seqs.length === 0) return 0;
    const json = JSON.stringify(seqs);
    foldEvents.run({ seqs: json });
    return deleteEvents.run({ seqs: json }).changes;
  });
  const markMissing = db.transaction((o: MarkMissingOptions): MarkMissingStep => {
    // Rowids are positive, so 0 comes before every one of them.
    const after = Number((walkAt.get() as string | undefined) ?? 0) || 0;
    const { last, n } = chunk.get({ after, limit: o.limit }) as { last: number | null; n: number };
    const marked = last === null ? 0 : mark.run({ after, end: last, now: o.now, passId: o.passId, scanStartedAt: o.scanStartedAt }).changes;
    const wrapped = n < o.limit;
    walkTo.run({ after: wrapped ? 0 : last });
    return { marked, wrapped };
  });
  const forgetMissing = db.transaction((o: { before: number; limit: number }): number => forget.run(o).changes);

  return {
    pruneRuns: (o) => pruneRuns.immediate(o),
    pruneEvents: (o) => pruneEvents.immediate(o),
    markMissing: (o) => markMissing.immediate(o),
    forgetMissing: (o) => forgetMissing.immediate(o),
    reclaimSpace(maxPages) {
      // A file made before migration 004 has auto_vacuum NONE: freed pages are reused by
      // later rows, but only a VACUUM would shrink it (docs/operations.md).
      const free = (): number => db.pragma('freelist_count', { simple: true }) as number;
      const before = free();
      if (db.pragma('auto_vacuum', { simple: true }) !== 2) return { freed: 0, free: before, shrinkable: false };
      if (before === 0) return { freed: 0, free: 0, shrinkable: true };
      db.pragma(`incremental_vacuum(${Math.max(1, Math.floor(maxPages))})`);
      const freed = before - free();
      // The file is truncated when the WAL is copied back; PASSIVE never waits on readers.
      if (freed > 0) db.pragma('wal_checkpoint(PASSIVE)');
      return { freed, free: before - freed, shrinkable: true };
    },
  };
}
