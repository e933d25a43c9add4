import { statSync } from 'node:fs';
import { ConfigError } from '../errors.js';

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
 * The ledger's schema is newer than this cronsafe knows (a newer cronsafe migrated it): only
 * an upgrade of cronsafe helps, so it is no outage to wait out (open.ts: StateTooNew).
 */
export class LedgerTooNew extends Error {
  override name = 'LedgerTooNew';
}

/**
 * The place the config names holds another program's tables, not a ledger (PostgreSQL: a
 * schema with tables and no `schema_migrations` of ours, or a Rails-style one), or cannot
 * hold one (a database whose encoding is not UTF8: `key` state.postgres). Nothing was
 * written; a config error naming `key` (open.ts), as SQLite's foreign database is.
 */
export class NotALedger extends Error {
  override name = 'NotALedger';
  constructor(
    message: string,
    readonly key: 'state.schema' | 'state.postgres' = 'state.schema',
  ) {
    super(message);
  }
}

/** The SQLite ledger file is not writable by this user: the message names it, its owner and mode. */
export class LedgerUnwritable extends Error {
  override name = 'LedgerUnwritable';
}

/**
 * Whether the SQLite ledger file is there: false only when it is not (ENOENT). A file this
 * user cannot reach (EACCES: a state directory of mode 0700 owned by the run's user) was read
 * as "no run has created it yet": status and dead-letter said so of a ledger that existed, and
 * plan counted every done item as new. Thrown instead, naming the file and why.
 */
export function sqliteLedgerFound(file: string): boolean {
  try {
    return statSync(file, { throwIfNoEntry: false }) !== undefined;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'EACCES') {
      throw new Error(`cannot reach the ledger file ${file}: a directory on its way is not searchable by this user (uid ${process.getuid?.() ?? '?'}) (EACCES); run this as the ledger's owner`, { cause: err });
    }
    if (e.code === 'ELOOP') {
      // No open ever gets through: the config is wrong, as `run` and `validate` say it (exit 78).
      throw new ConfigError(`state.sqlite: ${file} cannot be reached: its path runs into a loop of symbolic links (ELOOP)`, undefined, 'state.sqlite');
    }
    throw new Error(`cannot reach the ledger file ${file}: ${e.message}`, { cause: err });
  }
}
