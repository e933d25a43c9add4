import { eventCounters } from '../events.js';
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
      const feeds = eventCounters(kind, occurrence);
      const bump = bumpQuery(schema, Object.fromEntries(feeds.map((n) => [n, 1])));
      await ex.tx('recordEvent', async (exec) => {
        await exec(recordEventQuery(schema, kind, at, detail, occurrence ?? null));
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
