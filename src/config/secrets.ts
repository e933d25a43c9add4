import { parseUrl, redactor, safeDecode, urlSecrets, type Redact } from '../redact.js';
import type { Config } from './types.js';

/**
 * What a handler's output must not carry into cronsafe's text (its log lines, an item's
 * last error, an Event): the password of state.postgres (however it was given: in the
 * file, through `${VAR}` or CRONSAFE_STATE_POSTGRES, percent-encoded or not), libpq's
 * PGPASSWORD, and the Pushgateway URL's password and tokens. A handler may print them
 * without meaning to: `env`, `set -x`, a traceback that quotes a connection string.
 */
export function configRedactor(config: Config, env: NodeJS.ProcessEnv = process.env): Redact {
  const urls = [config.state.postgres, config.metrics?.pushgateway].filter((u): u is string => u !== undefined);
  return redactor([...urls.flatMap(urlSecrets), env.PGPASSWORD ?? '']);
}

/**
 * The ledger's password (state.postgres's, as written and decoded), for the command handler's
 * environment: an inherited variable holding it, alone or in a URL (`state.postgres: ${PGURL}`),
 * is cronsafe's, as CRONSAFE_STATE_POSTGRES is, and not passed on. Values shorter than 3
 * characters are left alone, as the redactor leaves them.
 */
export function ledgerSecrets(config: Config): string[] {
  return config.state.postgres === undefined ? [] : urlSecrets(config.state.postgres).filter((s) => s.length >= 3);
}

/**
 * The names state.postgres's URL gives in the clear (its user and database): a variable whose
 * whole value is one of them (USER=postgres, POSTGRES_DB=app) is not told from one holding a
 * password equal to it (the image's postgres:postgres), and is passed on. A URL holding the
 * password is withheld still.
 */
export function ledgerNames(config: Config): string[] {
  const u = config.state.postgres === undefined ? undefined : parseUrl(config.state.postgres.trim());
  if (u === undefined) return [];
  const db = u.pathname.replace(/^\//, '');
  return [u.username, safeDecode(u.username), db, safeDecode(db)].filter((s) => s !== '');
}
