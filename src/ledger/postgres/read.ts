import { ident, q, type Query } from './query.js';

/** Item counts by state in one pass (no index on plain `state`: every transition would rewrite it). */
export const countsQuery = (schema: string): Query =>
  q(`SELECT
  count(*) FILTER (WHERE state = 'pending') AS pending,
  count(*) FILTER (WHERE state = 'claimed') AS claimed,
  count(*) FILTER (WHERE state = 'done') AS done,
  count(*) FILTER (WHERE state = 'dead') AS dead
FROM ${ident(schema)}.items`);

export const getQuery = (schema: string, id: string): Query =>
  q(
    `SELECT id, state, attempts, released, owner, lease_until, available_at, last_error, size, mtime_ms, done_at
FROM ${ident(schema)}.items WHERE id = $1`,
    id,
  );

/** Oldest dead first; a NULL limit means no limit. */
export const listDeadQuery = (schema: string, limit: number | null): Query =>
  q(
    `SELECT id, attempts, last_error AS "lastError", dead_at AS "deadAt"
FROM ${ident(schema)}.items WHERE state = 'dead' ORDER BY dead_at, id LIMIT $1`,
    limit,
  );

export type { ItemRow } from '../rows.js';
