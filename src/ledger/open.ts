import type { Config, StateConfig } from '../config/types.js';
import { ConfigError, coerceError } from '../errors.js';
import { LedgerOwnedByAnotherJob } from './identity.js';
import type { Ledger } from './types.js';

/** The schema a PostgreSQL ledger lives in when `state.schema` is not set. */
export const DEFAULT_POSTGRES_SCHEMA = 'cronsafe';

/** Who opens the ledger (the config), so that a ledger of another job is refused. */
export interface OpenAs {
  /** config.name: recorded as the ledger's owner on first use; another name is refused. */
  job: string;
  /** For the message. */
  configPath?: string;
  /**
   * Only read (status, dead-letter list): no migration and no write (the owner is checked,
   * never recorded), so it works on a read-only state directory or with a read-only
   * database role. A ledger that does not exist yet, or whose schema is older or newer
   * than this cronsafe's, is an error that says so. Write verbs on such a ledger fail.
   */
  readOnly?: boolean;
  /** The run's own connection, under its lock: SQLite writes claims behind (sqlite/write-behind.ts). */
  writeBehind?: boolean;
}

/**
 * Open the ledger the config names. A ConfigError (exit 78) when the choice cannot
 * work, so a CronJob with a bad `state` fails at once instead of being retried: among
 * those, a ledger that belongs to another job (`as.job`), refused before any item is read.
 * Each adapter (with better-sqlite3 or pg) is loaded only when it is used, so the
 * commands that never open a ledger do not pay for loading one. `as.readOnly`: see OpenAs.
 */
export async function openLedger(state: StateConfig, as?: OpenAs): Promise<Ledger> {
  try {
    if (state.postgres !== undefined) {
      const { openPostgresLedger } = await import('./postgres/index.js');
      return await openPostgresLedger({ url: state.postgres, schema: state.schema ?? DEFAULT_POSTGRES_SCHEMA, job: as?.job, readOnly: as?.readOnly });
    }
    if (state.sqlite === undefined) {
      throw new ConfigError('state.sqlite is required (the path of the ledger file)', undefined, 'state.sqlite');
    }
    const { openSqliteLedger } = await import('./sqlite/index.js');
    return await openSqliteLedger(state.sqlite, { job: as?.job, readOnly: as?.readOnly, writeBehind: as?.writeBehind });
  } catch (err) {
    if (err instanceof LedgerOwnedByAnotherJob) throw ownedByAnother(state, err, as?.configPath);
    throw err;
  }
}

function ownedByAnother(state: StateConfig, err: LedgerOwnedByAnotherJob, configPath?: string): ConfigError {
  const where = configPath ? `${configPath}: ` : '';
  const owner = JSON.stringify(err.owner);
  const job = JSON.stringify(err.job);
  if (state.postgres !== undefined) {
    const schema = state.schema ?? DEFAULT_POSTGRES_SCHEMA;
    return new ConfigError(
      `${where}state.schema: the PostgreSQL schema "${schema}" is the ledger of job ${owner}, and this config's name is ${job}. ` +
        'Two jobs must not share a ledger (each would take the other\'s items as its own): give this job its own state.schema, or fix name.',
      configPath,
      'state.schema',
    );
  }
  return new ConfigError(
    `${where}state.sqlite: ${state.sqlite} is the ledger of job ${owner}, and this config's name is ${job}. ` +
      "Two jobs must not share a ledger (each would take the other's items as its own): give this job its own state.sqlite " +
      '(or leave it unset: the default, <config dir>/.cronsafe/<name>.db, is one file per name), or fix name.',
    configPath,
    'state.sqlite',
  );
}

/** The state store cannot be reached or opened: exit 1 (counts toward the Job's backoffLimit). */
export class StateUnavailable extends Error {
  override name = 'StateUnavailable';
}

/**
 * Open the ledger; an unreachable store is fatal (exit 1) with a clear message naming the
 * store and its path, a ledger of another job a config error (exit 78). `readOnly`: for
 * commands that only look (status, dead-letter list); see OpenAs.readOnly.
 */
export async function openState(config: Config, opts: { readOnly?: boolean; writeBehind?: boolean } = {}): Promise<Ledger> {
  try {
    // [issue 10, case 1] the ledger belongs to config.name: another job's is refused.
    return await openLedger(config.state, { job: config.name, configPath: config.configPath, readOnly: opts.readOnly, writeBehind: opts.writeBehind });
  } catch (err) {
    if (err instanceof ConfigError) throw err; // [issue 10, case 1]
    throw new StateUnavailable(`state store unavailable (${storeLabel(config)}): ${coerceError(err).message}`);
  }
}

/** The store in use, for messages: `sqlite <path>` or `postgres` (its errors name host and database). */
export const storeLabel = (config: Config): string =>
  config.state.postgres !== undefined ? 'postgres' : `sqlite ${config.state.sqlite ?? '(no path)'}`;
