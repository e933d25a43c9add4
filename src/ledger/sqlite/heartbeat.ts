import type { Database } from 'better-sqlite3';
import type { RunHeartbeat } from '../types.js';

export const HEARTBEAT_SQL = 'UPDATE runs SET heartbeat_at = ? WHERE run_id = ? AND finished_at IS NULL';

/** Few rows by construction (runs_unfinished): unfinished runs are the live one and crashed ones. */
export const BEATING_RUNS_SQL = `SELECT run_id AS runId, owner, started_at AS startedAt,
  coalesce(heartbeat_at, started_at) AS heartbeatAt
  FROM runs WHERE finished_at IS NULL AND coalesce(heartbeat_at, started_at) >= ?
  ORDER BY started_at DESC, seq DESC LIMIT 100`;

export interface HeartbeatOps {
  heartbeat(runId: string, at: number): void;
  beatingRuns(since: number): RunHeartbeat[];
}

export function makeHeartbeatOps(db: Database): HeartbeatOps {
  const beat = db.prepare(HEARTBEAT_SQL);
  const beating = db.prepare(BEATING_RUNS_SQL);
  return {
    heartbeat: (runId, at) => void beat.run(at, runId),
    beatingRuns: (since) => beating.all(since) as RunHeartbeat[],
  };
}
