import type { Database } from 'better-sqlite3';
import type { LedgerEventKind, RunOutcome, RunRecord } from '../types.js';
import type { CounterName, Counters } from './counters.js';

export const START_RUN_SQL = `INSERT INTO runs (run_id, owner, started_at, scheduled_for)
  VALUES (@runId, @owner, @startedAt, @scheduledFor)`;

export const FINISH_RUN_SQL = `UPDATE runs SET finished_at = @finishedAt, outcome = @outcome, counts = @counts
  WHERE run_id = @runId`;

/** Newest first; seq breaks ties between runs started in the same millisecond. */
export const RECENT_RUNS_SQL = `SELECT run_id, owner, started_at, finished_at, outcome, scheduled_for, counts
  FROM runs ORDER BY started_at DESC, seq DESC LIMIT ?`;

export const RECORD_EVENT_SQL = `INSERT INTO events (kind, at, detail) VALUES (?, ?, ?)`;

/**
 * Totals each event kind feeds. A start that finds the lock held is an overrun
 * too (DESIGN.md: cronsafe_overruns_total counts both).
 */
const EVENT_COUNTERS: Record<LedgerEventKind, CounterName[]> = {
  overrun: ['overruns'],
  'lock-skip': ['overruns', 'lock_skips'],
  missed: [],
  stale: [],
};

interface RunRow {
  run_id: string;
  owner: string;
  started_at: number;
  finished_at: number | null;
  outcome: RunOutcome | null;
  scheduled_for: number | null;
  counts: string | null;
}

/** Run history and operator events (synchronous; the Ledger wraps them). */
export interface RunOps {
  startRun(run: { runId: string; owner: string; startedAt: number; scheduledFor?: number | null }): void;
  finishRun(runId: string, finishedAt: number, outcome: RunOutcome, counts: Record<string, number>): void;
  recentRuns(limit: number): RunRecord[];
  recordEvent(kind: LedgerEventKind, at: number, detail?: Record<string, unknown>): void;
}

export function makeRunOps(db: Database, counters: Counters): RunOps {
  const start = db.prepare(START_RUN_SQL);
  const finish = db.prepare(FINISH_RUN_SQL);
  const recent = db.prepare(RECENT_RUNS_SQL);
  const record = db.prepare(RECORD_EVENT_SQL);

  const recordTx = db.transaction((kind: LedgerEventKind, at: number, detail?: Record<string, unknown>) => {
    const feeds = EVENT_COUNTERS[kind] as CounterName[] | undefined; // callers outside TypeScript
    if (feeds === undefined) throw new Error(`recordEvent: unknown event kind ${JSON.stringify(kind)}`);
    record.run(kind, at, detail === undefined ? null : JSON.stringify(detail));
    for (const name of feeds) counters.bump(name, 1);
  });

  return {
    startRun(run) {
      start.run({ runId: run.runId, owner: run.owner, startedAt: run.startedAt, scheduledFor: run.scheduledFor ?? null });
    },
    finishRun(runId, finishedAt, outcome, counts) {
      const { changes } = finish.run({ runId, finishedAt, outcome, counts: JSON.stringify(counts) });
      if (changes === 0) throw new Error(`finishRun: no run ${runId} was started in this ledger`);
    },
    recentRuns(limit) {
      return (recent.all(limit) as RunRow[]).map((r) => ({
        runId: r.run_id,
        owner: r.owner,
        startedAt: r.started_at,
        finishedAt: r.finished_at,
        outcome: r.outcome,
        scheduledFor: r.scheduled_for,
        counts: r.counts === null ? null : (JSON.parse(r.counts) as Record<string, number>),
      }));
    },
    recordEvent: (kind, at, detail) => recordTx.immediate(kind, at, detail),
  };
}
