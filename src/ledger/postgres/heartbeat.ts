import type { RunHeartbeat } from '../types.js';
import type { PostgresExecutor } from './connection.js';
import { ident, q, type Query } from './query.js';

export const heartbeatQuery = (schema: string, runId: string, at: number): Query =>
  q(`UPDATE ${ident(schema)}.runs SET heartbeat_at = $2 WHERE run_id = $1 AND finished_at IS NULL`, runId, at);

/** Few rows by construction (runs_unfinished): unfinished runs are the live ones and crashed ones. */
export const beatingRunsQuery = (schema: string, since: number): Query =>
  q(
    `SELECT run_id AS "runId", owner, started_at AS "startedAt", coalesce(heartbeat_at, started_at) AS "heartbeatAt"
FROM ${ident(schema)}.runs WHERE finished_at IS NULL AND coalesce(heartbeat_at, started_at) >= $1
ORDER BY started_at DESC, seq DESC LIMIT 100`,
    since,
  );

/** A run's liveness, for the runs that may still be alive (one statement each). */
export interface HeartbeatOps {
  heartbeat(runId: string, at: number): Promise<void>;
  beatingRuns(since: number): Promise<RunHeartbeat[]>;
}

export function makeHeartbeatOps(ex: PostgresExecutor, schema: string): HeartbeatOps {
  return {
    async heartbeat(runId, at) {
      await ex.query('heartbeat', heartbeatQuery(schema, runId, at));
    },
    beatingRuns: (since) => ex.query<RunHeartbeat>('beatingRuns', beatingRunsQuery(schema, since)),
  };
}
