import type { StateConfig } from '../config/types.js';
import { ConfigError } from '../errors.js';
import { openSqliteLedger } from './sqlite/index.js';
import type { Ledger } from './types.js';

/**
 * Open the ledger the config names. A ConfigError (exit 78) when the choice cannot
 * work, so a CronJob with a bad `state` fails at once instead of being retried.
 */
export async function openLedger(state: StateConfig): Promise<Ledger> {
  if (state.postgres !== undefined) {
    throw new ConfigError('state.postgres is not supported yet', undefined, 'state.postgres');
  }
  if (state.sqlite === undefined) {
    throw new ConfigError('state.sqlite is required (the path of the ledger file)', undefined, 'state.sqlite');
  }
  return openSqliteLedger(state.sqlite);
}
