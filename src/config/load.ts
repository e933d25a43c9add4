/**
 * Loading a config file: find it, parse the YAML, interpolate the environment,
 * validate, apply defaults, make paths absolute, check the paths that must exist.
 * Every failure is one ConfigError (exit 78) naming the file and the key.
 */
import * as path from 'node:path';
import { coerceError, ConfigError, inConfigFile } from '../errors.js';
import { envNotUtf8 } from './env-bytes.js';
import { interpolate } from './interpolate.js';
import { describeValue, fail, fallbackMessage, formatIssues, type KeyProblem } from './messages.js';
import { pathProblems, stateProblems } from './check-paths.js';
import { readYaml } from './read-yaml.js';
import { resolveConfig } from './resolve.js';
import { SSL_MODES } from './schema-fields.js';
import { configSchema } from './schema.js';
import { parseUrl } from '../redact.js';
import { knownKeysAt, schemaAt } from './schema-walk.js';
import type { Config } from './types.js';

export { redactUrl } from '../redact.js';
export { MAX_CONFIG_BYTES } from './read-yaml.js';
export { configSummary } from './summary.js';

/** Overrides `state.postgres` (and drops `state.sqlite`) when set and non-empty. */
export const POSTGRES_ENV = 'CRONSAFE_STATE_POSTGRES';

/** Where the config is: `-c FILE`, else `$CRONSAFE_CONFIG`, else `./cronsafe.yaml`; always absolute. */
export function resolveConfigPath(cliPath?: string, env: NodeJS.ProcessEnv = process.env): string {
  const chosen = cliPath || env.CRONSAFE_CONFIG || 'cronsafe.yaml';
  if (path.isAbsolute(chosen)) return path.resolve(chosen);
  // A relative path is read from the working directory. A shell left in a directory that was
  // removed since (a release directory a deploy replaced) has none: getcwd(3) fails, and every
  // command ended with Node's raw stack, `Error: ENOENT: no such file or directory, uv_cwd`.
  let cwd: string;
  try {
    cwd = process.cwd();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? coerceError(err).message;
    throw new ConfigError(
      `config file ${chosen} cannot be found: it is relative to the current directory, which no longer exists (${code}: removed since this shell entered it?); cd to an existing directory, or give -c (or CRONSAFE_CONFIG) an absolute path`,
    );
  }
  return path.resolve(cwd, chosen);
}

/**
 * handler.env's `__proto__` key, which zod's record skips without an issue (it would replace
 * the parsed object's prototype), as would every environment built from it with
 * Object.assign: it passed validate and set nothing. The one record in the schema.
 */
function protoEnvKey(value: Record<string, unknown>): KeyProblem[] {
  const env = (value.handler as { env?: unknown } | null | undefined)?.env;
  if (typeof env !== 'object' || env === null || !Object.hasOwn(env, '__proto__')) return [];
  return [{ key: 'handler.env.__proto__', message: "cannot be passed: cronsafe builds the handler's environment as a JavaScript object, where __proto__ is not a key; use another name" }];
}

/**
 * PGSSLMODE with a value libpq refuses (`verify_full`, `Require`, `required`): the pg driver
 * takes it for none given and connects without TLS, where psql refuses to connect at all.
 * Read by the driver only when the URL has no TLS parameter of its own (pg-connection-string:
 * `ssl`, or a non-empty `sslmode`, `sslcert`, `sslkey`, `sslrootcert`, or `sslnegotiation=direct`,
 * which turns TLS on), so checked only then.
 */
function sslModeEnvProblem(url: string | undefined, env: NodeJS.ProcessEnv): KeyProblem[] {
  const mode = env.PGSSLMODE;
  if (url === undefined || !mode || SSL_MODES.includes(mode)) return [];
  const params = parseUrl(url.trim())?.searchParams;
  if (params === undefined || params.has('ssl') || ['sslmode', 'sslcert', 'sslkey', 'sslrootcert'].some((k) => (params.getAll(k).at(-1) ?? '') !== '')) return [];
  if (params.getAll('sslnegotiation').at(-1) === 'direct') return [];
  return [
    {
      key: 'state.postgres',
      message: `the environment variable PGSSLMODE is ${JSON.stringify(mode)}, no sslmode (expected one of ${SSL_MODES.join(', ')}): the pg driver would connect without TLS, where libpq refuses it; correct or unset PGSSLMODE, or give sslmode= in the URL`,
    },
  ];
}

/** A top-level string described without its text, which may be a secret. */
function describeText(s: string): string {
  const form = /^[A-Za-z_][A-Za-z0-9_]*=/.test(s) ? "; NAME=value is a .env file's form, YAML's is key: value" : '';
  return `a string of ${s.length} character${s.length === 1 ? '' : 's'} (not shown: a file that is not a config, such as a .env file or a token, may hold a secret${form})`;
}

const isMapping = (v: unknown): boolean => v === undefined || (typeof v === 'object' && v !== null && !Array.isArray(v));

/** Options for loadConfig(). */
export interface LoadOptions {
  /** Environment for `${VAR}` and CRONSAFE_STATE_POSTGRES. Default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Check that source.directory, handler.module and output.directory are usable. Default true. */
  checkPaths?: boolean;
}

/**
 * Load and validate a config file into the resolved Config.
 * @param file path of the YAML file; messages show it as given, relative paths in it
 *   resolve against its directory (a pipe's, such as /dev/stdin's: resolve.ts baseDir).
 * @throws ConfigError naming the file and (when there is one) the first offending key.
 */
export function loadConfig(file: string, opts: LoadOptions = {}): Config {
  const env = opts.env ?? process.env;
  const abs = path.resolve(file);
  const raw = readYaml(file, abs);

  if (raw === null || raw === undefined) {
    fail(file, [{ key: '', message: 'the file is empty; expected a mapping with at least name, source and handler' }]);
  }
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    // A whole file read as one string is no config: a .env file (`DB_PASSWORD=...`), a
    // mounted Secret's key or a token given as the config by mistake. Quoted, its secret went
    // to stderr and the pod's log. Its size and form are enough to see what was read.
    const found = typeof raw === 'string' ? describeText(raw) : describeValue(raw);
    fail(file, [{ key: '', message: `expected a mapping at the top level, got ${found}` }]);
  }

  const pgOverride = env[POSTGRES_ENV];
  const interpolated = interpolate(raw, env, (p) => schemaAt(p)?.type);
  // The keys the variable replaces are not read: a `${VAR}` there (`postgres: ${DATABASE_URL}`,
  // `sqlite: ${STATE_DIR}/job.db`) need not be set where CRONSAFE_STATE_POSTGRES is. Only in
  // a `state` mapping, which alone takes the variable (below).
  const replaced = pgOverride && isMapping((raw as Record<string, unknown>).state) ? ['state.postgres', 'state.sqlite'] : [];
  const interpolationProblems = interpolated.problems.filter((p) => !replaced.includes(p.key));
  if (interpolationProblems.length > 0) fail(file, interpolationProblems);
  const value = interpolated.value as Record<string, unknown>;

  // As a `${VAR}` is (interpolate.ts): a Latin-1 password read as U+FFFD is another password,
  // and every run failed to authenticate (exit 1) after validate said OK.
  if (pgOverride && envNotUtf8(POSTGRES_ENV, pgOverride, env)) {
    fail(file, [{ key: 'state.postgres', message: `the environment variable ${POSTGRES_ENV} holds bytes that are not UTF-8, which would be read as another text (U+FFFD): set it as UTF-8` }]);
  }
  if (pgOverride) {
    // The environment picks the store: a Secret-provided URL must win over a sqlite
    // path left in a ConfigMap, not collide with it as "both set".
    // Only a mapping (or no state at all) takes it: `state: garbage` is the file's error,
    // refused with or without the variable (validate in CI has none).
    if (value.state === undefined || (typeof value.state === 'object' && value.state !== null && !Array.isArray(value.state))) {
      const state: Record<string, unknown> = { ...(value.state as Record<string, unknown> | undefined) };
      delete state.sqlite;
      value.state = { ...state, postgres: pgOverride };
    }
  }

  const parsed = configSchema.safeParse(value, {
    reportInput: true,
    error: (iss) => fallbackMessage(iss),
  });
  const dropped = protoEnvKey(value);
  if (!parsed.success || dropped.length > 0) {
    const problems = [...(parsed.success ? [] : formatIssues(parsed.error.issues, knownKeysAt, interpolated.interpolated)), ...dropped];
    // A bad URL from the environment is not in the file the line names: say where it is.
    const fromEnv = (p: KeyProblem) => (pgOverride && p.key === 'state.postgres' ? { ...p, message: `${p.message} (from the environment variable ${POSTGRES_ENV})` } : p);
    fail(file, problems.map(fromEnv));
  }
  const sslMode = sslModeEnvProblem(parsed.data.state?.postgres, env);
  if (sslMode.length > 0) fail(file, sslMode);

  let config: Config;
  try {
    config = resolveConfig(parsed.data, abs);
  } catch (err) {
    // The default ledger's choice (ledger/default-sqlite.ts) knows its key, not the file.
    throw err instanceof ConfigError ? inConfigFile(file, err) : err;
  }
  // Every problem at once: one with the ledger's or the lock's path hid the others (a
  // missing source, a missing program), to be found one run at a time.
  const problems = [...stateProblems(config), ...(opts.checkPaths ?? true ? pathProblems(config) : [])];
  if (problems.length > 0) fail(file, problems);
  return config;
}
