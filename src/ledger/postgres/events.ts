import { eventCounters, pairedEventCounters, pairs } from '../events.js';
import type { LedgerEventKind } from '../types.js';
import type { PostgresExecutor } from './connection.js';
import { bumpQuery } from './counters.js';
import { ident, q, type Query } from './query.js';

export const recordEventQuery = (schema: string, kind: LedgerEventKind, at: number, detail: Record<string, unknown> | undefined, occurrence: number | null): Query =>
  q(
    `INSERT INTO ${ident(schema)}.events (kind, at, detail, occurrence) VALUES ($1, $2, $3::jsonb, $4)`,
    kind,
    at,
    detail === undefined ? null : JSON.stringify(detail),
    occurrence,
  );

/**
 * An occurrence's overrun and lock-skip events so far (pairedEventCounters), read after
 * taking a transaction lock (key 4 of the schema's hashtext; 1-3 are the run lock's and
 * ANALYZE's) so that two processes recording events for one occurrence see each other's.
 */
export const lockOccurrenceEventsQuery = (schema: string): Query => q(`SELECT pg_advisory_xact_lock(hashtext($1), 4)`, schema);
export const occurrenceOverrunsQuery = (schema: string, occurrence: number): Query =>
  q(
    `SELECT count(*) FILTER (WHERE kind = 'overrun')::int AS overruns, count(*) FILTER (WHERE kind = 'lock-skip')::int AS "lockSkips"
  FROM ${ident(schema)}.events WHERE occurrence = $1`,
    occurrence,
  );

export const countEventsQuery = (schema: string, kind: LedgerEventKind, since: number): Query =>
  q(`SELECT count(*) AS n FROM ${ident(schema)}.events WHERE kind = $1 AND at >= $2`, kind, since);

/** The latest occurrence accounted for by a run or an event, kept or pruned; greatest() skips NULLs. */
export const lastOccurrenceQuery = (schema: string): Query =>
  q(`SELECT greatest((SELECT max(scheduled_for) FROM ${ident(schema)}.runs),
  (SELECT max(occurrence) FROM ${ident(schema)}.events),
  (SELECT max(last_scheduled_for) FROM ${ident(schema)}.run_totals),
  (SELECT max(last_occurrence) FROM ${ident(schema)}.event_totals)) AS o`);

/** Operator events and the schedule's bookkeeping (each one statement or transaction). */
export interface EventOps {
  recordEvent(kind: LedgerEventKind, at: number, detail?: Record<string, unknown>, occurrence?: number): Promise<void>;
  countEvents(kind: LedgerEventKind, since?: number): Promise<number>;
  lastOccurrenceRecorded(): Promise<number | null>;
}

export function makeEventOps(ex: PostgresExecutor, schema: string): EventOps {
  return {
    async recordEvent(kind, at, detail, occurrence) {
      let feeds = eventCounters(kind, occurrence);
      await ex.tx('recordEvent', async (exec) => {
        if (pairs(kind, occurrence)) {
          await exec(lockOccurrenceEventsQuery(schema));
          const [earlier] = await exec<{ overruns: number; lockSkips: number }>(occurrenceOverrunsQuery(schema, occurrence));
          feeds = pairedEventCounters(kind, occurrence, earlier ?? { overruns: 0, lockSkips: 0 });
        }
        await exec(recordEventQuery(schema, kind, at, detail, occurrence ?? null));
        const bump = bumpQuery(schema, Object.fromEntries(feeds.map((n) => [n, 1])));
        if (bump) await exec(bump);
      });
    },
    async countEvents(kind, since) {
      const [r] = await ex.query<{ n: number }>('countEvents', countEventsQuery(schema, kind, since ?? Number.MIN_SAFE_INTEGER));
      return r?.n ?? 0;
    },
    async lastOccurrenceRecorded() {
      const [r] = await ex.query<{ o: number | null }>('lastOccurrenceRecorded', lastOccurrenceQuery(schema));
      return r?.o ?? null;
    },
  };
}
