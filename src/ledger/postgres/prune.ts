import {
  RUNS_KEPT_AT_ANY_AGE,
  SEEN_GRANULARITY_MS,
  WALK_KEY,
  type MarkMissingOptions,
  type PruneEventsOptions,
  type PruneRunsOptions,
  type RetentionLedger,
} from '../retention.js';
import type { PostgresExecutor } from './connection.js';
import { ident, q, type Query } from './query.js';

// Retention on PostgreSQL (src/ledger/retention.ts): each builder is one statement over at
// most `limit` rows. Pods of a shared pass may prune at once: SKIP LOCKED lets them take
// different rows, and what is folded is what DELETE ... RETURNING actually removed, so a
// row is never counted twice.

const NEWEST = 'ORDER BY started_at DESC, seq DESC';

/** Finished runs beyond retention folded into run_totals, then deleted; never the newest RUNS_KEPT_AT_ANY_AGE. */
export const pruneRunsQuery = (schema: string, o: PruneRunsOptions): Query => {
  const s = ident(schema);
  return q(
    `WITH d AS (
  DELETE FROM ${s}.runs WHERE seq IN (
    SELECT seq FROM ${s}.runs
    WHERE finished_at IS NOT NULL
      AND seq NOT IN (SELECT seq FROM ${s}.runs ${NEWEST} LIMIT ${RUNS_KEPT_AT_ANY_AGE})
      AND (started_at < $2 OR seq NOT IN (SELECT seq FROM ${s}.runs ${NEWEST} LIMIT $1))
    ORDER BY started_at, seq LIMIT $3
    FOR UPDATE SKIP LOCKED)
  RETURNING outcome, started_at, finished_at, scheduled_for),
f AS (
  INSERT INTO ${s}.run_totals AS t (outcome, runs, first_started, last_started, last_finished, last_scheduled_for)
  SELECT outcome, count(*), min(started_at), max(started_at), max(finished_at), max(scheduled_for) FROM d GROUP BY outcome
  ON CONFLICT (outcome) DO UPDATE SET
    runs = t.runs + EXCLUDED.runs,
    first_started = least(t.first_started, EXCLUDED.first_started),
    last_started = greatest(t.last_started, EXCLUDED.last_started),
    last_finished = greatest(t.last_finished, EXCLUDED.last_finished),
    last_scheduled_for = greatest(t.last_scheduled_for, EXCLUDED.last_scheduled_for))
SELECT count(*)::integer AS n FROM d`,
    o.keep,
    o.before,
    o.limit,
  );
};

/** Events beyond retention: their greatest occurrence kept in event_totals (counts are in counters). */
export const pruneEventsQuery = (schema: string, o: PruneEventsOptions): Query => {
  const s = ident(schema);
  return q(
    `WITH d AS (
  DELETE FROM ${s}.events WHERE seq IN (
    SELECT seq FROM ${s}.events
    WHERE at < $2 OR seq < (SELECT seq FROM ${s}.events ORDER BY seq DESC OFFSET $1 - 1 LIMIT 1)
    ORDER BY seq LIMIT $3
    FOR UPDATE SKIP LOCKED)
  RETURNING kind, occurrence),
f AS (
  INSERT INTO ${s}.event_totals AS t (kind, events, last_occurrence)
  SELECT kind, count(*), max(occurrence) FROM d GROUP BY kind
  ON CONFLICT (kind) DO UPDATE SET
    events = t.events + EXCLUDED.events,
    last_occurrence = greatest(t.last_occurrence, EXCLUDED.last_occurrence))
SELECT count(*)::integer AS n FROM d`,
    o.keep,
    o.before,
    o.limit,
  );
};

/**
 * One chunk of the walk over items in id order, from where the last one stopped (meta). A done row the complete scan found has a
 * seen_at no older than the scan's start minus a day (discovery refreshes it once a day:
 * discover.ts), so an older (or NULL) one was not found: it is marked missing. Except a row
 * done since the scan started: discovery skips claimed rows, so a dead pod's claim taken over
 * and done in this pass kept its old seen_at (NULL on every row of a ledger from 0.1.0),
 * though its file was there for its handler. (SQLite's discovery marks claimed rows too.)
 */
export const markMissingQuery = (schema: string, o: MarkMissingOptions): Query => {
  const s = ident(schema);
  return q(
    `WITH w AS (SELECT coalesce((SELECT value FROM ${s}.meta WHERE key = $1), '') AS after),
c AS (SELECT id FROM ${s}.items WHERE id > (SELECT after FROM w) ORDER BY id LIMIT $2),
n AS (SELECT max(id) AS last, count(*) < $2 AS wrapped FROM c),
u AS (
  UPDATE ${s}.items AS i SET missing_since = $3
  FROM c WHERE i.id = c.id AND i.state = 'done' AND (i.missing_since IS NULL OR i.missing_since < i.done_at)
    AND (i.seen_at IS NULL OR i.seen_at < $4::bigint - ${SEEN_GRANULARITY_MS}) AND coalesce(i.done_at, 0) < $4::bigint
  RETURNING 1),
m AS (
  INSERT INTO ${s}.meta (key, value) SELECT $1, CASE WHEN n.wrapped THEN '' ELSE n.last END FROM n
  ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value)
SELECT (SELECT wrapped FROM n) AS wrapped, (SELECT count(*) FROM u)::integer AS marked`,
    WALK_KEY,
    o.limit,
    o.now,
    o.scanStartedAt,
  );
};

/**
 * Done rows missing since before $1, at most $2 (items_missing), whose mark is younger than
 * their completion (an older mark is void: see SQLite's prune.ts). Not an attempt: counted nowhere.
 */
export const forgetMissingQuery = (schema: string, before: number, limit: number): Query => {
  const s = ident(schema);
  return q(
    `WITH d AS (
  DELETE FROM ${s}.items WHERE id IN (
    SELECT id FROM ${s}.items WHERE missing_since < $1 AND state = 'done' AND done_at <= missing_since
    LIMIT $2 FOR UPDATE SKIP LOCKED)
  RETURNING 1)
SELECT count(*)::integer AS n FROM d`,
    before,
    limit,
  );
};

/** Retention verbs (the Ledger's, retention.ts), one statement each. */
export type PruneOps = RetentionLedger;

export function makePruneOps(ex: PostgresExecutor, schema: string): PruneOps {
  return {
    async pruneRuns(opts) {
      const [r] = await ex.tx('pruneRuns', (exec) => exec<{ n: number }>(pruneRunsQuery(schema, opts)));
      return r?.n ?? 0;
    },
    async pruneEvents(opts) {
      const [r] = await ex.tx('pruneEvents', (exec) => exec<{ n: number }>(pruneEventsQuery(schema, opts)));
      return r?.n ?? 0;
    },
    async markMissing(opts) {
      const [r] = await ex.tx('markMissing', (exec) => exec<{ wrapped: boolean; marked: number }>(markMissingQuery(schema, opts)));
      return { marked: r?.marked ?? 0, wrapped: r?.wrapped ?? true };
    },
    async forgetMissing(opts) {
      const [r] = await ex.tx('forgetMissing', (exec) => exec<{ n: number }>(forgetMissingQuery(schema, opts.before, opts.limit)));
      return r?.n ?? 0;
    },
    /** Nothing to do: autovacuum makes deleted rows' space reusable; the table does not shrink by itself. */
    reclaimSpace: () => Promise.resolve({ freed: 0, free: 0, shrinkable: true }),
  };
}
