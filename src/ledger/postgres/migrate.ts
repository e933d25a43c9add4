import { setTimeout as sleep } from 'node:timers/promises';
import type { Exec } from './connection.js';
import { MIGRATIONS, type Migration } from './migrations/index.js';
import { LedgerTooNew, NotALedger } from '../no-ledger.js';
import { JOB_KEY, LedgerOwnedByAnotherJob } from '../identity.js';
import { getMetaQuery } from './meta.js';
import { ident, q, type Query } from './query.js';
import { inMigration } from './errors.js';
import { ddlWithLockRetries, type MigrationLockWait } from './migrate-lock.js';
import { backoffDelayMs } from '../backoff.js';
import { StoppedBeforeLedger, stopName } from '../run-lock.js';

/** Applied versions, or no rows at all before the first migration (the table may not exist yet). */
export const appliedVersionsQuery = (schema: string): Query =>
  q(`SELECT coalesce(array_agg(version ORDER BY version), '{}') AS versions FROM ${ident(schema)}.schema_migrations`);

/** Whether the schema_migrations table exists (to_regclass: NULL instead of an error). */
export const migrationsTableQuery = (schema: string): Query =>
  q(`SELECT to_regclass($1) IS NOT NULL AS present`, `${ident(schema)}.schema_migrations`);

/** The columns of `<schema>.schema_migrations`: ours are `version integer, name text, applied_at bigint`. */
export const migrationsColumnsQuery = (schema: string): Query =>
  q(
    `SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute AS a
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`,
    `${ident(schema)}.schema_migrations`,
  );

/**
 * The tables (and views) in the schema, none when it does not exist. An extension's own
 * (`CREATE EXTENSION pg_stat_statements` puts two views in `public`, PostGIS its
 * `spatial_ref_sys`) are no program's data: a schema holding only those is used.
 */
export const schemaTablesQuery = (schema: string): Query =>
  q(
    `SELECT c.relname AS name FROM pg_class AS c
WHERE c.relnamespace = to_regnamespace($1) AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND NOT EXISTS (SELECT 1 FROM pg_depend AS d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')
ORDER BY c.relname`,
    ident(schema),
  );

const OUR_COLUMNS: Record<string, string> = { version: 'integer', name: 'text', applied_at: 'bigint' };

/**
 * Refuse a schema that holds another program's tables (NotALedger: exit 78 naming
 * state.schema), before anything is written to it. A Rails-style `schema_migrations`
 * (`version varchar`, 20240101000000) read as "schema version 20240101000000, newer than this
 * cronsafe knows; upgrade cronsafe"; other tables without one got cronsafe's added among them.
 * Asked only when the schema is not a ledger of this version (a first start, an upgrade, a
 * newer version), so a start with nothing to migrate pays nothing.
 */
export async function assertLedgerSchema(exec: Exec, schema: string, migrationsTable: boolean): Promise<void> {
  if (migrationsTable) {
    const columns = await exec<{ name: string; type: string }>(migrationsColumnsQuery(schema));
    const types = new Map(columns.map((c) => [c.name, c.type]));
    if (Object.entries(OUR_COLUMNS).every(([name, type]) => types.get(name) === type)) return;
    const shown = columns.map((c) => `${c.name} ${c.type}`).join(', ');
    throw new NotALedger(
      `schema ${schema} holds a schema_migrations table of something else (${shown}), not a cronsafe ledger; nothing was written to it. ${OWN_SCHEMA}`,
    );
  }
  const tables = (await exec<{ name: string }>(schemaTablesQuery(schema))).map((t) => t.name);
  if (tables.length === 0) return;
  // Another pod's first start committed its tables, schema_migrations among them, since the
  // caller looked (pods of a Job start at once on a new schema): read that, not "foreign".
  if (tables.includes('schema_migrations')) return assertLedgerSchema(exec, schema, true);
  const shown = tables.slice(0, 5).map((t) => JSON.stringify(t)).join(', ') + (tables.length > 5 ? `, and ${tables.length - 5} more` : '');
  throw new NotALedger(`schema ${schema} holds tables of something else (${shown}) and no cronsafe ledger; nothing was written to it. ${OWN_SCHEMA}`);
}

const OWN_SCHEMA = 'Point state.schema at a schema of its own for this job (a new name: the first run creates it)';

/**
 * Serialises migrations of one schema across pods, for the rest of the transaction. Two
 * pods starting at once would otherwise both see "not applied" and race on CREATE.
 */
export const migrationLockQuery = (schema: string): Query =>
  q(`SELECT pg_advisory_xact_lock(hashtext('cronsafe:migrate'), hashtext($1))`, schema);

/** migrationLockQuery without the wait: `ok` says whether it was taken. */
const tryMigrationLockQuery = (schema: string): Query =>
  q(`SELECT pg_try_advisory_xact_lock(hashtext('cronsafe:migrate'), hashtext($1)) AS ok`, schema);

/** Between tries of the migration lock while another pod migrates: 200 ms doubling to 2 s, with equal jitter (backoff.ts). */
const MIGRATION_LOCK_POLL = { backoffMs: 200, backoffMaxMs: 2_000 };

/**
 * Take the migration lock. With a `stop` (the daemon's), tried again and again instead of
 * waited for, so that the stop ends the wait (StoppedBeforeLedger): a daemon SIGTERMed while
 * another pod's migration held the lock (that pod waiting in turn for a session holding a lock
 * on the tables, up to 5 minutes) sat in pg_advisory_xact_lock until the drain's last resort
 * (exit 75). Without one (a run's start, whose stop ends its lock's session), it waits.
 */
async function takeMigrationLock(exec: Exec, schema: string, stop: AbortSignal | undefined): Promise<void> {
  if (stop === undefined) {
    await exec(migrationLockQuery(schema));
    return;
  }
  for (let n = 1; ; n++) {
    if (stop.aborted) throw new StoppedBeforeLedger(stopName(stop), `another pod's migration of schema ${schema} held the migration lock`);
    const [row] = await exec<{ ok: boolean }>(tryMigrationLockQuery(schema));
    if (row?.ok === true) return;
    await sleep(backoffDelayMs(n, MIGRATION_LOCK_POLL, Math.random), undefined, { signal: stop }).catch(() => undefined); // a stop ends the wait
  }
}

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
 * failing migration leaves nothing behind and records nothing. Each migration's DDL waits for
 * its table locks a few hundred ms at a time (ddlWithLockRetries), so that the running pods'
 * statements never queue behind it for long; `wait` says whom it waits for.
 */
export async function migrate(run: Exec, schema: string, migrations: readonly Migration[] = MIGRATIONS, job?: string, wait?: MigrationLockWait): Promise<number[]> {
  // Its statements' errors are marked: a statement_timeout that cancels one of them gets the hint to raise it (errors.ts).
  const exec: Exec = async (query) => {
    try {
      return await run(query);
    } catch (err) {
      throw inMigration(err);
    }
  };
  const known = Math.max(0, ...migrations.map((m) => m.version));
  let present = false;
  const applied = async (): Promise<Set<number>> => {
    const [row] = await exec<{ present: boolean }>(migrationsTableQuery(schema));
    present = row?.present === true;
    if (!present) return new Set();
    const [v] = await exec<{ versions: number[] }>(appliedVersionsQuery(schema));
    return new Set(v?.versions ?? []);
  };
  const check = async (done: Set<number>): Promise<void> => {
    const newest = Math.max(0, ...done);
    if (newest > known || Number.isNaN(newest)) {
      await assertLedgerSchema(exec, schema, present);
      // Running old code on a newer schema would silently misread it.
      throw new LedgerTooNew(`ledger schema ${schema} has schema version ${newest}, newer than this cronsafe knows (${known}); upgrade cronsafe`);
    }
  };
  let done = await applied();
  await check(done);
  const todo = (): Migration[] => [...migrations].sort((a, b) => a.version - b.version).filter((m) => !done.has(m.version));
  if (todo().length === 0) return [];
  await assertLedgerSchema(exec, schema, present);
  if (!present) await assertEncoding(exec);
  await assertJob(exec, schema, job);

  await takeMigrationLock(exec, schema, wait?.stop);
  const [schemaRow] = await exec<{ present: boolean }>(schemaExistsQuery(schema));
  if (!schemaRow?.present) await denied(exec(q(createSchemaSql(schema))), () => createDenied(schema));
  await denied(exec(q(createBookkeepingSql(schema))), () => migrateDenied(schema, done, known));
  done = await applied(); // another pod may have finished while we waited for the lock
  await check(done);
  const out: number[] = [];
  for (const m of todo()) {
    await denied(ddlWithLockRetries(exec, schema, q(m.sql(ident(schema))), m, wait), () => migrateDenied(schema, done, known));
    await exec(recordMigrationQuery(schema, m, Date.now()));
    out.push(m.version);
  }
  return out;
}

/**
 * Item ids (file names, any UTF-8) and handlers' errors are text: a database in another
 * encoding (LATIN1, WIN1252, EUC_JP ...) refuses the first one outside it with 22P05, and
 * every pass that meets that name stopped there (exit 1). Refused when the ledger would be
 * created in it (NotALedger naming state.postgres: exit 78), before anything is written;
 * SQL_ASCII keeps the bytes as given. A ledger made before this check is left as it is.
 */
async function assertEncoding(exec: Exec): Promise<void> {
  const [row] = await exec<{ encoding: string; db: string }>(q(`SELECT current_setting('server_encoding') AS encoding, current_database() AS db`));
  const encoding = row?.encoding ?? '';
  if (encoding === 'UTF8' || encoding === 'SQL_ASCII') return;
  throw new NotALedger(
    `database ${row?.db ?? ''} has encoding ${encoding}, which cannot hold every file name or handler error (they are UTF-8 text): ` +
      `the first one outside it would stop every pass. Nothing was written. Point state.postgres at a database created with ENCODING 'UTF8' ` +
      `(CREATE DATABASE <name> ENCODING 'UTF8' TEMPLATE template0)`,
    'state.postgres',
  );
}

/**
 * `job` (the config's name) may not migrate another job's ledger: a second job pointed at
 * it by mistake, on a newer cronsafe, upgraded it before it was refused (exit 78), and the
 * owner's pods then failed every start with 'newer than this cronsafe knows'.
 */
async function assertJob(exec: Exec, schema: string, job: string | undefined): Promise<void> {
  if (job === undefined) return;
  const [meta] = await exec<{ present: boolean }>(q(`SELECT to_regclass($1) IS NOT NULL AS present`, `${ident(schema)}.meta`));
  if (!meta?.present) return;
  const [row] = await exec<{ value: string }>(getMetaQuery(schema, JOB_KEY));
  if (row !== undefined && row.value !== job) throw new LedgerOwnedByAnotherJob(row.value, job);
}

/** SQLSTATE insufficient_privilege: `permission denied for schema s`, `must be owner of table items`. */
const INSUFFICIENT_PRIVILEGE = '42501';

/**
 * A step refused for want of a privilege says what it was doing and what it needs: the bare
 * `permission denied for schema cs`, under "take the run lock", sent operators to grant
 * USAGE (which the role had) when an upgrade needed to change tables a DBA had created.
 * The SQLSTATE and the server's words are kept.
 */
async function denied<T>(step: Promise<T>, why: () => string): Promise<T> {
  try {
    return await step;
  } catch (err) {
    const e = err as { code?: unknown; message?: unknown };
    if (e?.code !== INSUFFICIENT_PRIVILEGE || typeof e.message !== 'string') throw err;
    throw Object.assign(new Error(`${why()}: ${e.message}`, { cause: err }), { code: INSUFFICIENT_PRIVILEGE });
  }
}

const createDenied = (schema: string): string =>
  `cannot create schema ${schema} (the first start makes it and its tables): the role needs CREATE on the database, or a DBA creates the schema for it (CREATE SCHEMA ${ident(schema)} AUTHORIZATION <role>)`;

const migrateDenied = (schema: string, done: Set<number>, known: number): string => {
  const from = Math.max(0, ...done);
  const what = from === 0 ? `cannot create the ledger's tables in schema ${schema}` : `cannot migrate schema ${schema} from version ${from} to ${known} (this cronsafe's)`;
  return `${what}: the role needs CREATE on schema ${schema} and to own its tables; grant them, or start this cronsafe once with the role that owns them (docs/postgres.md)`;
};
