import type { StateConfig } from '../config/types.js';
import { ConfigError } from '../errors.js';
import { LedgerOwnedByAnotherJob } from './identity.js';
import { openSqliteLedger } from './sqlite/index.js';
import type { Ledger } from './types.js';

/** The schema a PostgreSQL ledger lives in when `state.schema` is not set. */
export const DEFAULT_POSTGRES_SCHEMA = 'cronsafe';

/** Who opens the ledger (the config), so that a ledger of another job is refused. */
export interface OpenAs {
  /** config.name: recorded as the ledger's owner on first use; another name is refused. */
  job: string;
  /** For the message. */
  configPath?: string;
}

/**
 * Open the ledger the config names. A ConfigError (exit 78) when the choice cannot
 * work, so a CronJob with a bad `state` fails at once instead of being retried: among
 * those, a ledger that belongs to another job (`as.job`), refused before any item is read.
 * The PostgreSQL adapter (and pg) is loaded only when it is used.
 */
export async function openLedger(state: StateConfig, as?: OpenAs): Promise<Ledger> {
  try {
    if (state.postgres !== undefined) {
      const { openPostgresLedger } = await import('./postgres/index.js');
      return await openPostgresLedger({ url: state.postgres, schema: state.schema ?? DEFAULT_POSTGRES_SCHEMA, job: as?.job });
    }
    if (state.sqlite === undefined) {
      throw new ConfigError('state.sqlite is required (the path of the ledger file)', undefined, 'state.sqlite');
    }
    return await openSqliteLedger(state.sqlite, { job: as?.job });
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
