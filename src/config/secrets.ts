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
 * Whether an inherited variable's value holds the ledger's password (state.postgres's, as
 * written and decoded), alone or in a URL (`state.postgres: ${PGURL}`, `${DB_PASSWORD}`):
 * cronsafe's, as CRONSAFE_STATE_POSTGRES is, and not a command handler's. Undefined without
 * such a password. A password under 3 characters is left alone, as the redactor leaves it;
 * a value that is the password alone but also the URL's user or database name (the postgres
 * image's postgres:postgres, so USER=postgres, POSTGRES_DB=postgres) may be that name, and
 * is passed on.
 */
export function holdsLedgerSecret(config: Config): ((value: string) => boolean) | undefined {
  const url = config.state.postgres;
  if (url === undefined) return undefined;
  const secrets = new Set(urlSecrets(url).filter((s) => s.length >= 3));
  if (secrets.size === 0) return undefined;
  const u = parseUrl(url.trim());
  const db = u?.pathname.replace(/^\//, '') ?? '';
  const names = new Set(u === undefined ? [] : [u.username, safeDecode(u.username), db, safeDecode(db)]);
  return (value) => (secrets.has(value) && !names.has(value)) || urlSecrets(value).some((s) => secrets.has(s));
}
