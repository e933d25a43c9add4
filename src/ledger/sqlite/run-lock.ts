/**
 * The SQLite store's run lock: the flock on `lock.path`, then the one on the ledger file
 * (flock.ts), then the ledger's name lock (name-lock.ts), which removing the state
 * directory cannot take away. Reached through the store (ledger/open.ts), loaded only by `run`.
 */
import { lstatSync, realpathSync, unlinkSync } from 'node:fs';
import type { RunLock } from '../run-lock.js';
import { holderLine, parseHolder } from '../store-files.js';
import { lockHolder, lockLedgerFile, tryLock } from './flock.js';
import { coerceError, ConfigError } from '../../errors.js';
import { LedgerUnwritable, sqliteLedgerFound } from '../no-ledger.js';

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
  /** The config `name`: written into the lock file beside the owner (store-files.ts, holderLine). */
  job: string;
  /** Told why a start skips when only the name lock is held (the flocks were free). */
  warn?: (detail: Record<string, unknown>, msg: string) => void;
  /** Told which lock another run holds when the start skips: lock.path, the ledger file, or its name lock. */
  held?: (lock: string) => void;
}

/** The ledger file and the companions SQLite makes beside it. */
const ledgerFiles = (file: string): string[] => [file, `${file}-wal`, `${file}-shm`, `${file}-journal`];

/**
 * RunLock.discardUnopened: the files the run found absent and its flock or SQLite's open
 * made, removed; only regular files (never through a link put there since).
 */
function removeUnopened(files: readonly string[]): void {
  for (const f of files) {
    try {
      if (lstatSync(f, { throwIfNoEntry: false })?.isFile() === true) unlinkSync(f);
    } catch {
      // Left as it is: the next run opens it (an empty file is a new ledger to SQLite).
    }
  }
}

/** Take the flocks and the name lock without waiting; null when another run holds any of them. */
export async function takeSqliteRunLock({ lockPath, ledgerFile, allowNetworkFilesystem, owner, job, warn, held }: SqliteRunLockOptions): Promise<RunLock | null> {
  const lock = tryLock(lockPath, holderLine(owner, job));
  if (!lock) {
    // Held by a run of another job: two configs share lock.path (a copy that kept it), so
    // each keeps the other from running, and every start of one is the other's overrun.
    const holder = lockHolder(lockPath);
    const other = holder === null ? null : parseHolder(holder).job;
    if (other !== null && other !== job) {
      warn?.(
        { lock: lockPath, heldBy: { job: other, run: parseHolder(holder!).owner } },
        `lock.path is held by a run of job '${other}', not of this job: jobs that share a lock.path never run at the same time; if that is not meant, give each its own lock.path`,
      );
    }
    held?.(lockPath);
    return null;
  }
  const releases: (() => void)[] = [() => lock.release()];
  // The files this lock's flock on the ledger creates (the ledger, empty), and those SQLite
  // makes beside it at its first open: see discardUnopened.
  let madeHere: string[] = [];
  let opened = false;
  const release = (): void => {
    madeHere = [];
    for (const r of releases.splice(0).reverse()) r();
  };
  try {
    // With allowNetworkFilesystem the ledger file is not flocked (see above).
    const ledgerLocked = ledgerFile !== undefined && !allowNetworkFilesystem;
    if (ledgerLocked) {
      reachable(ledgerFile);
      const absent = ledgerFiles(ledgerFile).filter((f) => lstatSync(f, { throwIfNoEntry: false }) === undefined);
      const releaseLedger = lockLedgerFile(ledgerFile);
      if (!releaseLedger) {
        release();
        // Another run of this ledger, with a lock.path of its own (the chart: each pod's /tmp).
        held?.(ledgerFile);
        return null;
      }
      releases.push(releaseLedger);
      if (absent[0] === ledgerFile) madeHere = absent;
    }
    // Loaded only once both flocks are ours (node:net, node:crypto): a start that finds the
    // lock held exits without them.
    const { takeNameLock } = await import('./name-lock.js');
    const releaseName = await takeNameLock(ledgerFile ?? lockPath);
    if (!releaseName) {
      release();
      // Free flocks on a held name: the files were removed or replaced under a live run.
      warn?.({ ledger: ledgerFile ?? lockPath }, "another run of this ledger holds its name lock although the lock files were free (its state directory removed or replaced under it?); this start skips");
      held?.(`name lock of ${ledgerFile ?? lockPath}`);
      return null;
    }
    releases.push(releaseName);
    return {
      lost: lock.lost,
      // As the ledger names runs (host:pid:runId), for findLiveRun.
      previousHolder: lock.previousHolder === null ? null : parseHolder(lock.previousHolder).owner,
      ...(ledgerLocked ? { ledgerLocked: true } : {}),
      watchLedger() {
        opened = true;
        if (ledgerFile === undefined) return;
        lock.watch(ledgerFile);
        // The write-ahead log holds what the run recorded since the last checkpoint (up to
        // wal_autocheckpoint's 10,000 pages): deleted (as a stray file), the run went on
        // writing into the unlinked copy it has open, and a kill then lost it all (a new
        // ledger's every table: the next run did every item again). Its index deleted, an
        // operator's writer (requeue, dead-letter retry) builds a new one, and it and the run
        // no longer see each other's frames in the log. Closing the ledger still writes the
        // log it has open into the file, so the run stops while it can.
        // Beside the file a link at state.sqlite points to, where SQLite keeps them.
        let real = ledgerFile;
        try {
          real = realpathSync(ledgerFile);
        } catch {
          /* gone already: the watch above stops the run */
        }
        for (const suffix of ['-wal', '-shm']) {
          lock.watchCompanion(
            `${real}${suffix}`,
            (file) => `${file}, SQLite's ${suffix === '-wal' ? 'write-ahead log' : 'write-ahead log index'} beside the ledger, was removed or replaced during the run; stopping, so that closing the ledger writes what the run recorded into it (a kill before then would lose it)`,
          );
        }
      },
      discardUnopened() {
        if (!opened) removeUnopened(madeHere);
        madeHere = [];
      },
      unwatchCompanions: () => lock.unwatchCompanions(),
      checkLedger: () => lock.checkWatched(),
      release,
    };
  } catch (err) {
    release();
    throw err;
  }
}

/**
 * The ledger file can be looked up by this user, or LedgerUnwritable names it and why (as
 * `status` does). A state directory on its way this user may not search (EACCES) said
 * "cannot take the run lock <lock.path>: EACCES ... lstat '<ledger>'", naming the lock file,
 * which was fine, for the ledger's directory.
 */
function reachable(ledgerFile: string): void {
  try {
    sqliteLedgerFound(ledgerFile);
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new LedgerUnwritable(coerceError(err).message, { cause: err });
  }
}
