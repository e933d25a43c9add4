import { deadPages } from '../dead-pages.js';
import { toItemRecord, type ItemRow } from '../item-rows.js';
import type { DeadItem, DeadQuery, ItemCounts, ItemRecord } from '../types.js';
import { wellFormed } from '../well-formed.js';
import type { Exec, PostgresExecutor } from './connection.js';
import { appliedVersionsQuery, assertLedgerSchema, migrationsTableQuery } from './migrate.js';
import { MIGRATIONS } from './migrations/index.js';
import { LedgerNeedsMigration, LedgerTooNew, NoLedgerYet } from '../no-ledger.js';
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

/**
 * One page of deadPages: dead items strictly after ($1, $2) in (dead_at, id) order.
 * A range on items_dead (dead_at), then an incremental sort of each dead_at tie by id.
 */
export const deadPageQuery = (schema: string, at: number, id: string, n: number): Query =>
  q(
    `SELECT id, attempts, last_error AS "lastError", dead_at AS "deadAt"
FROM ${ident(schema)}.items WHERE state = 'dead' AND dead_at >= $1 AND (dead_at, id) > ($1, $2)
ORDER BY dead_at, id LIMIT $3`,
    at,
    id,
    n,
  );

/**
 * The oldest schema version whose tables every reader (status, dead-letter list, plan) reads
 * as this cronsafe's: 007 only restates the check on `items.state` (the same four states). A
 * ledger of 6 was refused (exit 1, "`cronsafe run` migrates it") while an upgrade's first run
 * had not migrated it yet, or was waiting for its lock. Raise it with a migration that adds or
 * changes what they read.
 */
export const READS_SAME_SINCE = 6;

/**
 * For a read-only open (no migration): the schema must hold a ledger of this cronsafe's
 * version (or one from READS_SAME_SINCE on); otherwise say which way it differs, rather than fail on a column.
 * No ledger at all is NoLedgerYet (its message is completed by the caller, with where).
 * Returns its version; `older`: one older than this cronsafe's is not refused.
 */
export async function checkReadableSchema(exec: Exec, schema: string, older = false): Promise<number> {
  const known = Math.max(...MIGRATIONS.map((m) => m.version));
  const [table] = await exec<{ present: boolean }>(migrationsTableQuery(schema));
  if (!table?.present) {
    await assertLedgerSchema(exec, schema, false); // another program's tables: not "no ledger yet"
    throw new NoLedgerYet(`schema ${schema} holds no cronsafe ledger yet: no run has created it (check state.schema)`);
  }
  const [row] = await exec<{ versions: number[] }>(appliedVersionsQuery(schema));
  const v = Math.max(0, ...(row?.versions ?? []));
  if (v !== known) await assertLedgerSchema(exec, schema, true); // a Rails-style schema_migrations is not a version to report
  // `older` (schedule, which reads only the runs' starts: openOlderPostgresRunStarts): read as it is.
  if (v < known && older) {
    if (v < 1) throw new NoLedgerYet(`schema ${schema} holds no cronsafe ledger yet: its first run is creating it now`);
    return v;
  }
  // Migrations since READS_SAME_SINCE change nothing a reader reads: such a ledger is read as it is.
  if (v < known && v >= READS_SAME_SINCE) return v;
  if (v < known) {
    throw new LedgerNeedsMigration(`ledger schema ${schema} has schema version ${v}, older than this cronsafe's (${known}); \`cronsafe run\` migrates it (this command does not)`);
  }
  if (v > known || Number.isNaN(v)) {
    throw new LedgerTooNew(`ledger schema ${schema} has schema version ${v}, newer than this cronsafe knows (${known}); upgrade cronsafe`);
  }
  return v;
}

/** Read-only item queries (each one statement). */
export interface ReadOps {
  counts(): Promise<ItemCounts>;
  get(id: string): Promise<ItemRecord | null>;
  listDead(limit?: number): Promise<DeadItem[]>;
  deadPages(query?: DeadQuery): AsyncIterable<DeadItem[]>;
}

export function makeReadOps(ex: PostgresExecutor, schema: string): ReadOps {
  return {
    async counts() {
      const [c] = await ex.query<ItemCounts>('counts', countsQuery(schema));
      return { pending: c?.pending ?? 0, claimed: c?.claimed ?? 0, done: c?.done ?? 0, dead: c?.dead ?? 0 };
    },
    async get(id) {
      const [r] = await ex.query<ItemRow>('get', getQuery(schema, wellFormed(id)));
      return r === undefined ? null : toItemRecord(r);
    },
    listDead: (limit) => ex.query<DeadItem>('listDead', listDeadQuery(schema, limit ?? null)),
    deadPages: (query) => deadPages((after, n) => ex.query<DeadItem>('deadPages', deadPageQuery(schema, after.at, after.id, n)), query),
  };
}
