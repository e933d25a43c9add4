/**
 * A read-only open found no ledger: no run has created it yet (SQLite: no file; PostgreSQL:
 * no cronsafe tables in the schema). Its own class so that the commands that only look
 * (plan, schedule) can answer "never ran" on either adapter without creating one, while
 * status and dead-letter list still report it as an unavailable store.
 */
export class NoLedgerYet extends Error {
  override name = 'NoLedgerYet';
}

/**
 * A read-only open found a ledger of an older schema, which a writable open migrates. Its
 * own class so that schedule opens for writing in that case only (an upgrade), never on any
 * failure: that wrote cronsafe's tables into whatever state.sqlite named.
 */
export class LedgerNeedsMigration extends Error {
  override name = 'LedgerNeedsMigration';
}

/**
 * The place the config names holds another program's tables, not a ledger (PostgreSQL: a
 * schema with tables and no `schema_migrations` of ours, or a Rails-style one). Nothing was
 * written; a config error naming state.schema (open.ts), as SQLite's foreign database is.
 */
export class NotALedger extends Error {
  override name = 'NotALedger';
}
