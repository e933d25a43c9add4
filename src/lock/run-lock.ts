/**
 * takeRunLock: the one-run-at-a-time lock, whichever kind the state store calls for (the
 * flock in local.ts for SQLite, the advisory lock in ledger/postgres/lock.ts for PostgreSQL).
 */
import type { Logger } from 'pino';
import type { Config } from '../config/types.js';
import { DEFAULT_POSTGRES_SCHEMA } from '../ledger/open.js';
import { lockLedgerFile, tryLock } from './local.js';

/** The run lock, whichever kind the state store calls for. */
export interface RunLock {
  /** Aborted when the lock is lost for good mid-run (PostgreSQL only): the run must drain. */
  readonly lost?: AbortSignal;
  /**
   * True when this run joined a pass that another pod of its run group already started
   * (PostgreSQL, `parallelism` > 1). That pod holds the Lease and keeps the schedule
   * records (missed, overruns, stale), so that N pods do not count them N times.
   */
  readonly joined?: boolean;
  /** Watch a file the run relies on (LocalLock.watch); absent on PostgreSQL. */
  watch?(file: string): void;
  /**
   * PostgreSQL: the run group whose pass this run takes part in (the pass id: what the pods
   * of the pass mark and claim). Absent with the local lock: the run is its own pass.
   */
  readonly group?: string;
  /** The local lock file's previous holder (see LocalLock.previousHolder); absent on PostgreSQL. */
  readonly previousHolder?: string | null;
  /**
   * SQLite: this run also holds the flock on the ledger file itself (lockLedgerFile), so no
   * other run of this ledger is alive, wherever its lock file was.
   */
  readonly ledgerLocked?: boolean;
  release(): void | Promise<void>;
}

/**
 * Take the run lock without waiting; null when another run holds it. With SQLite, the
 * kernel flock on `lock.path`. With PostgreSQL, the advisory lock in the database instead
 * (src/ledger/postgres/lock.ts): the pods of one Job do not share a lock file, and they
 * must share the pass (same run group) while excluding every other fire. Throws when the
 * database cannot be reached (the caller maps that to exit 1).
 */
export async function takeRunLock(config: Config, owner: string, log: Logger, scheduledTime?: Date): Promise<RunLock | null> {
  if (config.state.postgres === undefined) return localRunLock(config, owner);
  const { runGroup, tryPostgresRunLock } = await import('../ledger/postgres/lock.js');
  const group = runGroup(process.env, scheduledTime, owner);
  const lock = await tryPostgresRunLock(
    { url: config.state.postgres, schema: config.state.schema ?? DEFAULT_POSTGRES_SCHEMA, name: config.name, group, owner },
    (msg, detail) => log.warn(detail ?? {}, msg),
  );
  if (lock) log.info({ group, joined: lock.joined }, lock.joined ? 'joined the pass of this run group' : 'run lock taken (PostgreSQL advisory lock)');
  return lock;
}

/**
 * SQLite: the flock on `lock.path`, then the one on the ledger file (lockLedgerFile). Not on
 * a network file system the user allowed: there flock is emulated with the fcntl locks
 * SQLite itself takes, and would block them.
 */
function localRunLock(config: Config, owner: string): RunLock | null {
  const lock = tryLock(config.lock.path, owner);
  if (!lock || config.state.sqlite === undefined || config.state.allowNetworkFilesystem) return lock;
  let releaseLedger: (() => void) | null;
  try {
    releaseLedger = lockLedgerFile(config.state.sqlite);
  } catch (err) {
    lock.release();
    throw err;
  }
  if (!releaseLedger) {
    lock.release();
    return null;
  }
  const ledgerRelease = releaseLedger;
  return {
    lost: lock.lost,
    previousHolder: lock.previousHolder,
    ledgerLocked: true,
    watch: (file) => lock.watch(file),
    release() {
      ledgerRelease();
      lock.release();
    },
  };
}
