import type { StateConfig } from '../config/types.js';
import { ConfigError } from '../errors.js';
import { openSqliteLedger } from './sqlite/index.js';
import type { Ledger } from './types.js';

/** The schema a PostgreSQL ledger lives in when `state.schema` is not set. */
export const DEFAULT_POSTGRES_SCHEMA = 'cronsafe';

/**
 * Open the ledger the config names. A ConfigError (exit 78) when the choice cannot
 * work, so a CronJob with a bad `state` fails at once instead of being retried.
 * The PostgreSQL adapter (and pg) is loaded only when it is used.
 */
export async function openLedger(state: StateConfig): Promise<Ledger> {
  if (state.postgres !== undefined) {
    const { openPostgresLedger } = await import('./postgres/index.js');
    return openPostgresLedger({ url: state.postgres, schema: state.schema ?? DEFAULT_POSTGRES_SCHEMA });
  }
  if (state.sqlite === undefined) {
    throw new ConfigError('state.sqlite is required (the path of the ledger file)', undefined, 'state.sqlite');
  }
  return openSqliteLedger(state.sqlite);
}
