import type { RefreshParams } from '../refresh-params.js';
import type { BatchColumns } from './batch.js';
import { ident, q, type Query } from './query.js';

// Refresh runs only when a policy asks for it: the default (`never`) discovery path
// stays upsert + claim and pays nothing for it. Same rules as the SQLite adapter.

/** A stat field counts as changed only when both sides are known and differ. */
const differs = (discovered: string, claimed: string): string =>
  `(${discovered} IS NOT NULL AND ${claimed} IS NOT NULL AND ${discovered} <> ${claimed})`;

/**
 * Finished rows of the batch that are outstanding again start a new cycle: pending at
 * once, attempts and released 0. `$4` NULL disables every-occurrence (`done_at < NULL`
 * is never true). The stat compared is the batch's, not the row's: an item discovered
 * without stat data never counts as changed. last_error is kept. A refreshed row is
 * pending again, so it is marked as seen by this run, for this run's sweep.
 */
export const refreshQuery = (schema: string, b: BatchColumns, p: RefreshParams, now: number, runId: string): Query =>
  q(
    `UPDATE ${ident(schema)}.items AS i SET state = 'pending', attempts = 0, released = 0, available_at = $6,
  done_at = NULL, done_by = NULL, dead_at = NULL, seen_run = $7, updated_at = $6
FROM unnest($1::text[], $2::bigint[], $3::float8[]) AS d(id, size, mtime_ms)
WHERE i.id = d.id AND (
  (i.state = 'done' AND i.done_at < $4::bigint)
  OR ($5::boolean AND i.state IN ('done', 'dead') AND (
    ${differs('d.size', 'i.claimed_size')} OR ${differs('d.mtime_ms', 'i.claimed_mtime_ms')})))`,
    b.ids,
    b.sizes,
    b.mtimes,
    p.doneBefore,
    p.onChange,
    now,
    runId,
  );

/**
 * on-change, for finished rows whose claimed version has no stat (claimed without one,
 * e.g. under `never`): the stat seen now becomes the baseline, so later changes count.
 */
export const adoptBaselineQuery = (schema: string, ids: string[]): Query =>
  q(
    `UPDATE ${ident(schema)}.items SET claimed_size = coalesce(claimed_size, size),
  claimed_mtime_ms = coalesce(claimed_mtime_ms, mtime_ms)
WHERE id = ANY($1::text[]) AND state IN ('done', 'dead') AND (claimed_size IS NULL OR claimed_mtime_ms IS NULL)`,
    ids,
  );
