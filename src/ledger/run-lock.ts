/**
 * The one-run-at-a-time lock, as the run engine sees it. Each adapter takes its own kind
 * (the store's `takeRunLock`, ledger/open.ts): SQLite the flock on `lock.path` and on the
 * ledger file (sqlite/run-lock.ts), PostgreSQL an advisory lock in the database
 * (postgres/run-lock.ts), because the pods of one Job share no lock file and must share a pass.
 */
import { ConfigError } from '../errors.js';

export interface RunLock {
  /** Aborted when the lock is lost for good mid-run: the run must drain. */
  readonly lost?: AbortSignal;
  /**
   * True when this run joined a pass that another pod of its run group already started
   * (PostgreSQL, `parallelism` > 1). That pod holds the Lease and keeps the schedule
   * records (missed, overruns, stale), so that N pods do not count them N times.
   */
  readonly joined?: boolean;
  /**
   * When joined: the start of the run that started the pass (epoch ms), once that run has
   * recorded it. The joining pod plans its fire as of then, so that a pod of the Job that
   * starts after the next occurrence runs for the pass's fire, not that later one (whose
   * `refresh: every-occurrence` would run again what its siblings finished in this pass).
   * Also set, not joined, for a pod of a Job (its group CRONSAFE_JOB_NAME) that starts after
   * that Job's pass ended: it runs for the Job's fire, not a later one.
   */
  readonly passStartedAt?: number;
  /**
   * PostgreSQL, when this run started the pass (not joined): when it took the pass lock
   * exclusively (epoch ms). Every run that started, or last beat, before then is dead (its
   * lock session was gone); a run after it may be a sibling that joined this pass since.
   */
  readonly startedPassAt?: number;
  /**
   * Called once the run's ledger is open. SQLite: from then on a ledger file removed or
   * replaced under the run (its state directory deleted) aborts `lost`. Absent on PostgreSQL.
   */
  watchLedger?(): void;
  /**
   * Called, before release, when the run could not open its ledger for want of file
   * descriptors (OutOfDescriptors: a low `ulimit -n`). SQLite: the ledger file this lock's
   * flock created, empty, and what SQLite's failed open made beside it (a header page, an
   * empty -wal) are removed. Left, `status` and `dead-letter` refused the file until the next
   * run (exit 1), as "no ledger yet: the file is empty (... could not write it: a full
   * disk?)", which sent the operator to the disk. Nothing once the ledger was opened.
   */
  discardUnopened?(): void;
  /**
   * Called before the run closes its ledger: SQLite removes the files it keeps beside it
   * (`-wal`, `-shm`) at the last connection's close, which is no loss. Absent on PostgreSQL.
   */
  unwatchCompanions?(): void;
  /**
   * SQLite: look at the watched ledger now rather than at the next recheck, so that a write
   * that failed because the state directory was just removed is told from any other
   * failure (`lost` aborts). True when the ledger is gone. Absent on PostgreSQL, where a
   * lost lock connection after a failed write is the outage that failed it (exit 1).
   */
  checkLedger?(): boolean;
  /**
   * PostgreSQL: the run group whose pass this run takes part in (the pass id: what the pods
   * of the pass mark and claim). Absent with the flock: the run is its own pass.
   */
  readonly group?: string;
  /** The lock file's previous holder (see LocalLock.previousHolder); absent on PostgreSQL. */
  readonly previousHolder?: string | null;
  /**
   * SQLite: this run also holds the flock on the ledger file itself (lockLedgerFile), so no
   * other run of this ledger is alive, wherever its lock file was.
   */
  readonly ledgerLocked?: boolean;
  release(): void | Promise<void>;
}

/**
 * What the pods of one pass must agree on (PostgreSQL: docs/postgres.md, "One config per
 * pass"): the config keys that decide which items the pass sees and what its end of scan
 * forgets, by key, each value as JSON. Stored with the pass by the pod that starts it.
 */
export type PassConfig = Readonly<Record<string, unknown>>;

/** The keys whose values differ, in `mine`'s order; a key one side does not know (another cronsafe version) is not compared. */
export function passConfigDiff(mine: PassConfig, pass: PassConfig): string[] {
  return Object.keys(mine).filter((key) => key in pass && JSON.stringify(mine[key]) !== JSON.stringify(pass[key]));
}

/**
 * A pod whose discovery-relevant config differs from the pass its run group is running
 * (a ConfigMap changed by a `helm upgrade` while the Job's pods ran, pods of one group
 * started by hand with two configs): it does not join. Joined, it scanned another set of
 * items into the same pass: with another source.directory it forgot its siblings' items as
 * gone (their files are not under its directory), with another include or exclude its end
 * of scan deleted pending rows of earlier passes, their attempt counts with them. Exit 78,
 * naming the keys; nothing was claimed, forgotten or reset.
 */
export class PassConfigDiffers extends ConfigError {
  override name = 'PassConfigDiffers';
  constructor(group: string, starter: string, keys: string[], mine: PassConfig, pass: PassConfig) {
    const shown = keys.map((k) => `${k} here ${JSON.stringify(mine[k])}, in the pass ${JSON.stringify(pass[k])}`).join('; ');
    super(
      `${keys[0]}: not the same as in the pass its run group ${JSON.stringify(group)} is running (started by ${starter}): ${shown}. ` +
        'The pods of a pass must scan alike (a ConfigMap changed while the Job\'s pods ran, or two configs given one CRONSAFE_RUN_GROUP): ' +
        'this pod did not join it, and claimed, forgot or reset nothing. The pass finishes with its own config; the next fire (a new run group) runs this one',
      undefined,
      keys[0],
    );
  }
}

/**
 * The run was asked to stop (SIGTERM, SIGINT, SIGHUP) while its lock could not be taken yet
 * (PostgreSQL down or not answering): it stops trying, as it stops claiming, rather than
 * keep a terminating pod up for the rest of the retry budget and then fail it (exit 1, which
 * counts toward the Job's backoffLimit). Nothing was claimed: the run drained (75).
 */
export class StoppedBeforeLock extends Error {
  constructor(readonly signal: string, readonly lastError: Error | undefined) {
    super(`stopped by ${signal} before the run lock was taken${lastError ? ` (the last try: ${lastError.message})` : ''}`);
    this.name = 'StoppedBeforeLock';
  }
}

/**
 * The run was asked to stop while opening its SQLite ledger, which another connection held
 * the write lock of (an operator's `sqlite3` shell in a transaction, another tool): it stops
 * waiting, rather than wait out the busy timeout and fail (exit 1, counted toward the Job's
 * backoffLimit) or keep a terminating pod up. Nothing was claimed: the run drained (75).
 */
export class StoppedBeforeLedger extends Error {
  /** `waiting`: what the open waited for (by default, SQLite's write lock). */
  constructor(
    readonly signal: string,
    waiting = "another connection held the ledger's write lock (a run writing it, or another tool with a transaction open on it)",
  ) {
    super(`stopped by ${signal} while ${waiting}, before the run began`);
    this.name = 'StoppedBeforeLedger';
  }
}

/** A stop's name for its messages: the signal (its reason, as cli.ts aborts it), else 'a stop'. */
export const stopName = (stop: AbortSignal): string => (typeof stop.reason === 'string' ? stop.reason : 'a stop');
