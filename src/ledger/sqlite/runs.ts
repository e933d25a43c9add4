import type { Database } from 'better-sqlite3';
import type { RunOutcome, RunRecord, RunStart, RunStats } from '../types.js';
import { toRunRecord, toRunStats, type RunRow, type RunStatsRow } from '../run-rows.js';

export const START_RUN_SQL = `INSERT INTO runs (run_id, owner, started_at, scheduled_for)
  VALUES (@runId, @owner, @startedAt, @scheduledFor)`;

/**
 * A run a later one marked `died` stays died if it turns out alive and finishes after all (a
 * PostgreSQL pod whose lock session was cut while it went on): its outcome was counted in
 * cronsafe_runs_total{outcome="died"}, which must never go down. Its end and counts are kept.
 */
export const FINISH_RUN_SQL = `UPDATE runs SET finished_at = @finishedAt,
  outcome = CASE WHEN outcome = 'died' THEN outcome ELSE @outcome END, counts = @counts
  WHERE run_id = @runId`;

/** Newest first; seq breaks ties between runs started in the same millisecond. */
export const RECENT_RUNS_SQL = `SELECT run_id, owner, started_at, finished_at, outcome, scheduled_for, counts
  FROM runs ORDER BY started_at DESC, seq DESC LIMIT ?`;

/**
 * One row per outcome (NULL: still running, or a crash no later run has seen yet): the runs
 * kept plus those retention folded into run_totals (prune.ts), so totals never go back.
 */
export const RUN_STATS_SQL = `SELECT outcome, sum(runs) AS runs, min(first_started) AS first_started,
  max(last_started) AS last_started, max(last_finished) AS last_finished
  FROM (SELECT outcome, count(*) AS runs, min(started_at) AS first_started,
      max(started_at) AS last_started, max(finished_at) AS last_finished
    FROM runs GROUP BY outcome
    UNION ALL SELECT outcome, runs, first_started, last_started, last_finished FROM run_totals)
  GROUP BY outcome`;

/** The order of RECENT_RUNS_SQL, so lastRunStart() is recentRuns(1)[0]; @atOrBefore bounds started_at (NULL: none). */
export const LAST_RUN_START_SQL = `SELECT run_id AS runId, started_at AS startedAt, scheduled_for AS scheduledFor
  FROM runs WHERE @atOrBefore IS NULL OR started_at <= @atOrBefore ORDER BY started_at DESC, seq DESC LIMIT 1`;

/** Any run for occurrence @occurrence (index runs_scheduled_for). */
export const OCCURRENCE_RAN_SQL = `SELECT 1 FROM runs WHERE scheduled_for = ? LIMIT 1`;

/** Unfinished runs (runs_unfinished) last seen alive before @before. */
export const MARK_DIED_SQL = `UPDATE runs SET outcome = 'died', finished_at = coalesce(heartbeat_at, started_at)
  WHERE finished_at IS NULL AND coalesce(heartbeat_at, started_at) < @before
  RETURNING run_id`;

/** SQLite keeps counts as JSON text. */
type SqliteRunRow = Omit<RunRow, 'counts'> & { counts: string | null };

/** Run history (synchronous; the Ledger wraps them). Events are in events.ts. */
export interface RunOps {
  startRun(run: { runId: string; owner: string; startedAt: number; scheduledFor?: number | null }): void;
  finishRun(runId: string, finishedAt: number, outcome: RunOutcome, counts: Record<string, number>): void;
  recentRuns(limit: number): RunRecord[];
  lastRunStart(atOrBefore?: number): RunStart | null;
  occurrenceRan(occurrence: number): boolean;
  runStats(): RunStats;
  markRunsDied(before: number): string[];
}


export function makeRunOps(db: Database): RunOps {
  const start = db.prepare(START_RUN_SQL);
  const finish = db.prepare(FINISH_RUN_SQL);
  const recent = db.prepare(RECENT_RUNS_SQL);
  const lastStart = db.prepare(LAST_RUN_START_SQL);
  const stats = db.prepare(RUN_STATS_SQL);
  const ran = db.prepare(OCCURRENCE_RAN_SQL).pluck();
  const died = db.prepare(MARK_DIED_SQL).pluck();

  return {
    startRun(run) {
      start.run({ runId: run.runId, owner: run.owner, startedAt: run.startedAt, scheduledFor: run.scheduledFor ?? null });
    },
    finishRun(runId, finishedAt, outcome, counts) {
      const { changes } = finish.run({ runId, finishedAt, outcome, counts: JSON.stringify(counts) });
      if (changes === 0) throw new Error(`finishRun: no run ${runId} was started in this ledger`);
    },
    recentRuns(limit) {
      return (recent.all(limit) as SqliteRunRow[]).map((r) =>
        toRunRecord({ ...r, counts: r.counts === null ? null : (JSON.parse(r.counts) as Record<string, number>) }),
      );
    },
    lastRunStart: (atOrBefore) => (lastStart.get({ atOrBefore: atOrBefore ?? null }) as RunStart | undefined) ?? null,
    occurrenceRan: (occurrence) => ran.get(occurrence) !== undefined,
    runStats: () => toRunStats(stats.all() as RunStatsRow[]),
    markRunsDied: (before) => died.all({ before }) as string[],
  };
}
