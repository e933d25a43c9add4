/**
 * The SQLite store's run lock: the flock on `lock.path`, then the one on the ledger file
 * (flock.ts). Reached through the store (ledger/open.ts), loaded only by `run`.
 */
import type { RunLock } from '../run-lock.js';
import { lockLedgerFile, tryLock } from './flock.js';

export interface SqliteRunLockOptions {
  /** lock.path */
  lockPath: string;
  /** state.sqlite: also locked, and watched once the ledger is open. */
  ledgerFile?: string;
  /**
   * state.allowNetworkFilesystem: then the ledger file is not flocked. There flock is
   * emulated with the fcntl locks SQLite itself takes, and would block them.
   */
  allowNetworkFilesystem?: boolean;
  owner: string;
}

/** Take both flocks without waiting; null when another run holds either. */
export function takeSqliteRunLock({ lockPath, ledgerFile, allowNetworkFilesystem, owner }: SqliteRunLockOptions): RunLock | null {
  const lock = tryLock(lockPath, owner);
  if (!lock) return null;
  const watchLedger = () => {
    if (ledgerFile !== undefined) lock.watch(ledgerFile);
  };
  if (ledgerFile === undefined || allowNetworkFilesystem) return { lost: lock.lost, previousHolder: lock.previousHolder, watchLedger, release: () => lock.release() };
  let releaseLedger: (() => void) | null;
  try {
    releaseLedger = lockLedgerFile(ledgerFile);
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
    watchLedger,
    release() {
      ledgerRelease();
      lock.release();
    },
  };
}
