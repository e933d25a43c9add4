import type { RunOutcome, RunRecord, RunStats } from './types.js';

/** A `runs` row; `counts` as the driver returns it (pg: parsed JSONB; SQLite: parse it first). */
export interface RunRow {
  run_id: string;
  owner: string;
  started_at: number;
  finished_at: number | null;
  outcome: RunOutcome | null;
  scheduled_for: number | null;
  counts: Record<string, number> | null;
}

export const toRunRecord = (r: RunRow): RunRecord => ({
  runId: r.run_id,
  owner: r.owner,
  startedAt: r.started_at,
  finishedAt: r.finished_at,
  outcome: r.outcome,
  scheduledFor: r.scheduled_for,
  counts: r.counts,
});

/** One row per outcome of the run-stats query, folded into RunStats. */
export interface RunStatsRow {
  outcome: RunOutcome | null;
  runs: number;
  first_started: number;
  last_started: number;
  last_finished: number | null;
}

export function toRunStats(rows: RunStatsRow[]): RunStats {
  const out: RunStats = {
    byOutcome: { completed: 0, drained: 0, failed: 0, 'skipped-locked': 0, stale: 0, died: 0 },
    firstStartedAt: null,
    lastStartedAt: null,
    lastSuccessAt: null,
  };
  for (const r of rows) {
    if (r.outcome !== null) out.byOutcome[r.outcome] = (out.byOutcome[r.outcome] ?? 0) + r.runs;
    if (r.outcome === 'completed') out.lastSuccessAt = r.last_finished;
    out.firstStartedAt = Math.min(out.firstStartedAt ?? Infinity, r.first_started);
    out.lastStartedAt = Math.max(out.lastStartedAt ?? -Infinity, r.last_started);
  }
  return out;
}
