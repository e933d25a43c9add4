import { toRunRecord, toRunStats, type RunRow, type RunStatsRow } from '../run-rows.js';
import type { RunOutcome, RunRecord, RunStart, RunStats } from '../types.js';
import type { PostgresExecutor } from './connection.js';
import { ident, q, type Query } from './query.js';

export const startRunQuery = (
  schema: string,
  run: { runId: string; owner: string; startedAt: number; scheduledFor?: number | null },
): Query =>
  q(
    `INSERT INTO ${ident(schema)}.runs (run_id, owner, started_at, scheduled_for) VALUES ($1, $2, $3, $4)`,
    run.runId,
    run.owner,
    run.startedAt,
    run.scheduledFor ?? null,
  );

/** A run marked `died` stays died (see FINISH_RUN_SQL, SQLite): cronsafe_runs_total{outcome="died"} never goes down. */
export const finishRunQuery = (schema: string, runId: string, finishedAt: number, outcome: RunOutcome, counts: Record<string, number>): Query =>
  q(
    `UPDATE ${ident(schema)}.runs SET finished_at = $2, outcome = CASE WHEN outcome = 'died' THEN outcome ELSE $3 END, counts = $4::jsonb
WHERE run_id = $1 RETURNING run_id`,
    runId,
    finishedAt,
    outcome,
    JSON.stringify(counts),
  );

/** Newest first; seq breaks ties between runs started in the same millisecond. */
export const recentRunsQuery = (schema: string, limit: number): Query =>
  q(
    `SELECT run_id, owner, started_at, finished_at, outcome, scheduled_for, counts
FROM ${ident(schema)}.runs ORDER BY started_at DESC, seq DESC LIMIT $1`,
    limit,
  );

/** The order of recentRunsQuery, so lastRunStart() is recentRuns(1)[0]; $1 bounds started_at (null: none). */
export const lastRunStartQuery = (schema: string, atOrBefore: number | null = null): Query =>
  q(
    `SELECT run_id AS "runId", started_at AS "startedAt", scheduled_for AS "scheduledFor"
FROM ${ident(schema)}.runs WHERE $1::bigint IS NULL OR started_at <= $1 ORDER BY started_at DESC, seq DESC LIMIT 1`,
    atOrBefore,
  );

/** Any run for occurrence $1 (index runs_scheduled_for). */
export const occurrenceRanQuery = (schema: string, occurrence: number): Query =>
  q(`SELECT 1 AS ran FROM ${ident(schema)}.runs WHERE scheduled_for = $1 LIMIT 1`, occurrence);

/**
 * One row per outcome (NULL: still running, or a crash no later run has seen yet): the runs
 * kept plus those retention folded into run_totals (prune.ts), so totals never go back.
 */
export const runStatsQuery = (schema: string): Query =>
  q(`SELECT outcome, sum(runs)::integer AS runs, min(first_started) AS first_started,
  max(last_started) AS last_started, max(last_finished) AS last_finished
FROM (SELECT outcome, count(*) AS runs, min(started_at) AS first_started,
    max(started_at) AS last_started, max(finished_at) AS last_finished
  FROM ${ident(schema)}.runs GROUP BY outcome
  UNION ALL SELECT outcome, runs, first_started, last_started, last_finished FROM ${ident(schema)}.run_totals) AS r
GROUP BY outcome`);

/** Unfinished runs (runs_unfinished) last seen alive before $1. */
export const markDiedQuery = (schema: string, before: number): Query =>
  q(
    `UPDATE ${ident(schema)}.runs SET outcome = 'died', finished_at = coalesce(heartbeat_at, started_at)
WHERE finished_at IS NULL AND coalesce(heartbeat_at, started_at) < $1 RETURNING run_id`,
    before,
  );

/** Run history (each one statement or transaction). Events are in events.ts. */
export interface RunOps {
  startRun(run: { runId: string; owner: string; startedAt: number; scheduledFor?: number | null }): Promise<void>;
  finishRun(runId: string, finishedAt: number, outcome: RunOutcome, counts: Record<string, number>): Promise<void>;
  recentRuns(limit: number): Promise<RunRecord[]>;
  lastRunStart(atOrBefore?: number): Promise<RunStart | null>;
  occurrenceRan(occurrence: number): Promise<boolean>;
  runStats(): Promise<RunStats>;
  markRunsDied(before: number): Promise<string[]>;
}

export function makeRunOps(ex: PostgresExecutor, schema: string): RunOps {
  return {
    async startRun(run) {
      await ex.tx('startRun', (exec) => exec(startRunQuery(schema, run)));
    },
    async finishRun(runId, finishedAt, outcome, counts) {
      const rows = await ex.tx('finishRun', (exec) => exec(finishRunQuery(schema, runId, finishedAt, outcome, counts)));
      if (rows.length === 0) throw new Error(`finishRun: no run ${runId} was started in this ledger`);
    },
    async recentRuns(limit) {
      return (await ex.query<RunRow>('recentRuns', recentRunsQuery(schema, limit))).map(toRunRecord);
    },
    async lastRunStart(atOrBefore) {
      const [r] = await ex.query<RunStart>('lastRunStart', lastRunStartQuery(schema, atOrBefore ?? null));
      return r ?? null;
    },
    async occurrenceRan(occurrence) {
      return (await ex.query<{ ran: number }>('occurrenceRan', occurrenceRanQuery(schema, occurrence))).length > 0;
    },
    async runStats() {
      return toRunStats(await ex.query<RunStatsRow>('runStats', runStatsQuery(schema)));
    },
    async markRunsDied(before) {
      const rows = await ex.tx('markRunsDied', (exec) => exec<{ run_id: string }>(markDiedQuery(schema, before)));
      return rows.map((r) => r.run_id);
    },
  };
}
