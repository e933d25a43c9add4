import { JOB_KEY, LedgerNotOwnedYet, LedgerOwnedByAnotherJob } from '../identity.js';
import { PostgresExecutor, START_BUDGET_MS, type PostgresOptions } from './connection.js';
import { PostgresLedger } from './ledger.js';
import { adoptJob, getMetaQuery } from './meta.js';
import { migrate } from './migrate.js';
import { blockedWarning } from './migrate-lock.js';
import { ident } from './query.js';
import { lastRunStartQuery } from './runs.js';
import type { RunStart, RunStartReader } from '../types.js';
import { checkReadableSchema } from './read.js';

export { PostgresLedger } from './ledger.js';
export { DEFAULT_SCHEMA } from './query.js';
export type { PostgresOptions } from './connection.js';

/**
 * Open the PostgreSQL ledger: a connection pool, and the schema brought up to date
 * (numbered migrations under an advisory lock, so pods starting together do not race).
 * A database that cannot be reached within `startBudgetMs` is an error naming host,
 * database and schema, never the password. `readOnly`: no migration, sessions refuse
 * writes, and the schema must be this cronsafe's version (checkReadableSchema).
 * `warn`: told once when the migration waits for a lock on the ledger's tables (blockedWarning);
 * `stop`: ends that wait (StoppedBeforeLedger).
 */
export async function openPostgresLedger(
  opts: PostgresOptions & { job?: string; adopt?: boolean; warn?: (msg: string, detail?: Record<string, unknown>) => void; stop?: AbortSignal },
): Promise<PostgresLedger> {
  ident(opts.schema); // a bad name fails here, before any connection
  const { job } = opts;
  const ex = new PostgresExecutor(opts);
  try {
    const budget = opts.startBudgetMs ?? START_BUDGET_MS;
    if (opts.readOnly) await ex.tx('open read-only', (exec) => checkReadableSchema(exec, opts.schema), budget);
    else {
      const wait = { ...(opts.warn && { onBlocked: blockedWarning(opts.schema, opts.warn) }), ...(opts.stop && { stop: opts.stop }) };
      await ex.tx('migrate', (exec) => migrate(exec, opts.schema, undefined, job, wait), budget);
    }
    // `job`: the config name; recorded as the schema's owner on first use, refused when
    // another is recorded (LedgerOwnedByAnotherJob). Absent: no check (tools, tests).
    // Read-only: checked, never recorded.
    // `adopt` false (an operator's command): checked, never recorded; none recorded is LedgerNotOwnedYet.
    if (job !== undefined) {
      const owner =
        opts.readOnly || opts.adopt === false
          ? await ex.query<{ value: string }>('readJob', getMetaQuery(opts.schema, JOB_KEY)).then((r) => r[0]?.value ?? (opts.readOnly ? job : undefined))
          : await ex.tx('adoptJob', (exec) => adoptJob(exec, opts.schema, job), budget);
      if (owner === undefined) throw new LedgerNotOwnedYet();
      if (owner !== job) throw new LedgerOwnedByAnotherJob(owner, job);
    }
    ex.opened();
    return new PostgresLedger(ex);
  } catch (err) {
    await ex.close();
    throw err;
  }
}

/**
 * The ledger of an older schema than this cronsafe's, read only for the latest run's start
 * (`cronsafe schedule`; its runs table is the same since the first schema): never migrated,
 * so the older cronsafe still running the job can open it. `job` is checked when the schema
 * records one (its meta table came with version 2).
 */
export async function openOlderPostgresRunStarts(opts: PostgresOptions, job: string): Promise<RunStartReader> {
  ident(opts.schema);
  const ex = new PostgresExecutor(opts);
  try {
    const budget = opts.startBudgetMs ?? START_BUDGET_MS;
    const version = await ex.tx('open read-only', (exec) => checkReadableSchema(exec, opts.schema, true), budget);
    if (version >= 2) {
      const owner = (await ex.query<{ value: string }>('readJob', getMetaQuery(opts.schema, JOB_KEY)))[0]?.value;
      if (owner !== undefined && owner !== job) throw new LedgerOwnedByAnotherJob(owner, job);
    }
    ex.opened();
    return {
      lastRunStart: async (atOrBefore) => (await ex.query<RunStart>('lastRunStart', lastRunStartQuery(opts.schema, atOrBefore ?? null)))[0] ?? null,
      close: () => ex.close(),
    };
  } catch (err) {
    await ex.close();
    throw err;
  }
}
