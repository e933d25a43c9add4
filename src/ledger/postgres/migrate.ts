import type { Exec } from './connection.js';
import { MIGRATIONS, type Migration } from './migrations/index.js';
import { ident, q, type Query } from './query.js';

/** Applied versions, or no rows at all before the first migration (the table may not exist yet). */
export const appliedVersionsQuery = (schema: string): Query =>
  q(`SELECT coalesce(array_agg(version ORDER BY version), '{}') AS versions FROM ${ident(schema)}.schema_migrations`);

/** Whether the schema_migrations table exists (to_regclass: NULL instead of an error). */
export const migrationsTableQuery = (schema: string): Query =>
  q(`SELECT to_regclass($1) IS NOT NULL AS present`, `${ident(schema)}.schema_migrations`);

/**
 * Serialises migrations of one schema across pods, for the rest of the transaction. Two
 * pods starting at once would otherwise both see "not applied" and race on CREATE.
 */
export const migrationLockQuery = (schema: string): Query =>
  q(`SELECT pg_advisory_xact_lock(hashtext('cronsafe:migrate'), hashtext($1))`, schema);

/**
 * Whether the schema exists. CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even
 * when the schema is there, so a role a DBA handed a schema to (`CREATE SCHEMA s
 * AUTHORIZATION app`), without CREATE on the database, must not run it.
 */
export const schemaExistsQuery = (schema: string): Query => q(`SELECT to_regnamespace($1) IS NOT NULL AS present`, ident(schema));

export const createSchemaSql = (schema: string): string => `CREATE SCHEMA IF NOT EXISTS ${ident(schema)}`;

export const createBookkeepingSql = (schema: string): string => `
CREATE TABLE IF NOT EXISTS ${ident(schema)}.schema_migrations (
  version    integer PRIMARY KEY,
  name       text NOT NULL,
  applied_at bigint NOT NULL
)`;

export const recordMigrationQuery = (schema: string, m: Migration, at: number): Query =>
  q(`INSERT INTO ${ident(schema)}.schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`, m.version, m.name, at);

/**
 * Bring `schema` up to date inside the caller's transaction; returns the versions applied.
 * The common case (nothing to do) takes no lock and runs no DDL, so a role without
 * CREATE on the database can use a schema made for it. Otherwise everything runs under
 * pg_advisory_xact_lock and in one transaction: PostgreSQL's DDL is transactional, so a
 * failing migration leaves nothing behind and records nothing.
 */
export async function migrate(exec: Exec, schema: string, migrations: readonly Migration[] = MIGRATIONS): Promise<number[]> {
  const known = Math.max(0, ...migrations.map((m) => m.version));
  const applied = async (): Promise<Set<number>> => {
    const [row] = await exec<{ present: boolean }>(migrationsTableQuery(schema));
    if (!row?.present) return new Set();
    const [v] = await exec<{ versions: number[] }>(appliedVersionsQuery(schema));
    return new Set(v?.versions ?? []);
  };
  const check = (done: Set<number>): void => {
    const newest = Math.max(0, ...done);
    if (newest > known) {
      // Running old code on a newer schema would silently misread it.
      throw new Error(`ledger schema ${schema} has schema version ${newest}, newer than this cronsafe knows (${known}); upgrade cronsafe`);
    }
  };
  let done = await applied();
  check(done);
  const todo = (): Migration[] => [...migrations].sort((a, b) => a.version - b.version).filter((m) => !done.has(m.version));
  if (todo().length === 0) return [];

  await exec(migrationLockQuery(schema));
  const [schemaRow] = await exec<{ present: boolean }>(schemaExistsQuery(schema));
  if (!schemaRow?.present) await exec(q(createSchemaSql(schema)));
  await exec(q(createBookkeepingSql(schema)));
  done = await applied(); // another pod may have finished while we waited for the lock
  check(done);
  const out: number[] = [];
  for (const m of todo()) {
    await exec(q(m.sql(ident(schema))));
    await exec(recordMigrationQuery(schema, m, Date.now()));
    out.push(m.version);
  }
  return out;
}
