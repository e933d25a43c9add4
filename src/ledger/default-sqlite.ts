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
  if (own === legacy) return namedLikeTheOldDefault(stateDir, name, own);
  if (fs.existsSync(own) || !fs.existsSync(legacy)) return { file: own };
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
  const others = othersRanBeside(stateDir, name);
  if (others.length === 0) return { file: legacy, legacy: true };
  if (!ours) return { file: own };
  throw new ConfigError(
    `state.sqlite: the old shared default ledger ${legacy} records no job, and both this job (${name}) and ${others.map((j) => `"${j}"`).join(', ')} ran on it (their locks are beside it), so its items may be mixed; set state.sqlite explicitly: ${legacy} to keep it for this job, or ${own} to start a new ledger`,
    undefined,
    'state.sqlite',
  );
}

/**
 * A job named `cronsafe`: its own default, `cronsafe.db`, is the old shared default's name,
 * so it cannot start a file of its own beside it. The file is its own when it records this
 * job, or no job and no other job's lock beside it says it ran there (as for any job, above).
 * Another job's (recorded, or by its lock alone): adopting it made this job skip that job's
 * done ids as its own, and left that job a new, empty ledger; so a person must give this job
 * its own state.sqlite. The message must not say "leave it unset": it is unset.
 */
function namedLikeTheOldDefault(stateDir: string, name: string, file: string): { file: string } {
  if (!fs.existsSync(file)) return { file };
  let owner: string | null;
  try {
    owner = readJob(file);
  } catch {
    return { file }; // unreadable now: the open (which checks the owner again) says why
  }
  if (owner === name) return { file };
  const others = owner !== null ? [owner] : othersRanBeside(stateDir, name);
  if (others.length === 0) return { file };
  const whose = others.map((j) => `"${j}"`).join(', ');
  const instead = path.join(stateDir, `${name}.own.db`);
  const mixed = owner === null && fs.existsSync(path.join(stateDir, `${name}.lock`));
  const why =
    owner !== null ? `it is the ledger of job ${whose}`
    : mixed ? `it records no job, and both this job and ${whose} ran on it (their locks are beside it), so its items may be mixed`
    : `it records no job, and the lock beside it says job ${whose} ran on it, not this one`;
  const fix = mixed ? `set state.sqlite explicitly: ${file} to keep it for this job, or ${instead} (for example) to start a new ledger` : `set state.sqlite for this job (e.g. ${instead}), or give it another name`;
  throw new ConfigError(
    `state.sqlite: the default ledger of a job named "${name}", ${file}, is also the old shared default ledger of earlier versions, and ${why}; ${fix}`,
    undefined,
    'state.sqlite',
  );
}

/**
 * Whether the job whose default lock is in `stateDir` has moved to a default ledger of its own
 * there (`<job>.db`). Never the job named `cronsafe`: its `<job>.db` is the old shared file
 * itself, which says nothing about where it went (read so, another job adopted the ledger that
 * job ran on, skipped its done ids, and that job was then refused on its own ledger).
 */
function hasOwnDefault(stateDir: string, job: string): boolean {
  return `${job}.db` !== LEGACY_DEFAULT_SQLITE && fs.existsSync(path.join(stateDir, `${job}.db`));
}

/** Jobs other than `name` whose default lock is in `stateDir` and that have no default ledger of their own there: they ran on the old shared one. */
function othersRanBeside(stateDir: string, name: string): string[] {
  return lockOwnersBeside(stateDir).filter((job) => job !== name && !hasOwnDefault(stateDir, job));
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
