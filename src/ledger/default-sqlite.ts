import * as fs from 'node:fs';
import * as path from 'node:path';
import { ConfigError } from '../errors.js';
import { readJob } from './sqlite/read-job.js';

// Where a job's SQLite ledger is when `state.sqlite` is not set (config loading asks), with
// the upgrade from the old shared default file. The owner is read from the file read-only
// (sqlite/read-job.ts), without opening the adapter.

/** The ledger file every job used by default before ledgers were one per name. */
export const LEGACY_DEFAULT_SQLITE = 'cronsafe.db';

/**
 * The default ledger, `<config dir>/.cronsafe/<name>.db`: one per job, so two configs in
 * one directory never share one. Upgrades: while that file does not exist, the old shared
 * default `cronsafe.db` is kept when it records no job yet or this one (the run logs it);
 * one recorded as another job's is left to that job. Reading the old file's owner opens
 * SQLite read-only, and only on this upgrade path.
 */
export function defaultSqlite(stateDir: string, name: string): { file: string; legacy?: boolean } {
  const own = path.join(stateDir, `${name}.db`);
  const legacy = path.join(stateDir, LEGACY_DEFAULT_SQLITE);
  if (own === legacy || fs.existsSync(own) || !fs.existsSync(legacy)) return { file: own };
  let owner: string | null;
  try {
    owner = readJob(legacy);
  } catch {
    // Unreadable now: keep it, and let the open (which checks the owner again) say why.
    return { file: legacy, legacy: true };
  }
  if (owner === name) return { file: legacy, legacy: true };
  if (owner !== null) return { file: own };
  // It records no job (written before ledgers did). The run locks beside it say who used
  // it: each job's default lock is `<name>.lock` there. Another job's lock (one without a
  // `<name>.db` of its own yet) and not ours: it is theirs, start our own. Ours and
  // another's: both jobs ran on it and its items are mixed; a person must choose.
  const ours = fs.existsSync(path.join(stateDir, `${name}.lock`));
  const others = lockOwnersBeside(stateDir).filter((job) => job !== name && !fs.existsSync(path.join(stateDir, `${job}.db`)));
  if (others.length === 0) return { file: legacy, legacy: true };
  if (!ours) return { file: own };
  throw new ConfigError(
    `state.sqlite: the old shared default ledger ${legacy} records no job, and both this job (${name}) and ${others.map((j) => `"${j}"`).join(', ')} ran on it (their locks are beside it), so its items may be mixed; set state.sqlite explicitly: ${legacy} to keep it for this job, or ${own} to start a new ledger`,
    undefined,
    'state.sqlite',
  );
}

/** Job names of the `<name>.lock` files in `dir` (the default run locks), or none. */
function lockOwnersBeside(dir: string): string[] {
  try {
    return fs
      .readdirSync(dir)
      .filter((f) => f.endsWith('.lock') && f.length > '.lock'.length)
      .map((f) => f.slice(0, -'.lock'.length));
  } catch {
    return [];
  }
}
