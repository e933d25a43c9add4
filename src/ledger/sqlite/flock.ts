import { closeSync, constants, fstatSync, ftruncateSync, openSync, readSync, statSync, writeSync, type Stats } from 'node:fs';
import path from 'node:path';
import { flockSync } from '../../flock.js';
import { coerceError } from '../../errors.js';
import { makeDirs } from '../../make-dirs.js';
import { LedgerUnwritable } from '../no-ledger.js';
import { isLockFileText } from '../store-files.js';
import { noAccess, refuseUnwritable } from './unwritable.js';

/** A held run lock. The kernel drops it if the process dies, so there is never a stale lock. */
export interface LocalLock {
  readonly path: string;
  /**
   * Who held this very file before us (its contents when we locked it), or null for a new
   * or empty file. Our flock on the file that holder wrote proves it let go: it is gone.
   */
  readonly previousHolder: string | null;
  /** Aborted when a watched file vanished or was replaced under the run (see watch). */
  readonly lost: AbortSignal;
  /**
   * Watch a file the run's safety rests on (the SQLite ledger, once opened): checked at
   * each recheck, and when it is gone or replaced (its state directory removed mid-run),
   * `lost` aborts: what the run would record goes to a deleted file, and the next start
   * would begin a new ledger and redo everything. The run must stop.
   */
  watch(file: string): void;
  /**
   * Watch a file SQLite keeps beside the ledger (its `-wal`, `-shm`): gone or replaced, it
   * aborts `lost` with `reason(file)`, but is not the ledger gone (checkWatched's answer).
   */
  watchCompanion(file: string, reason: (file: string) => string): void;
  /** No longer watch the companions (SQLite removes them at the ledger's last close). */
  unwatchCompanions(): void;
  /** The recheck's look at the watched files, now: `lost` aborts if one is gone or replaced (true then: the ledger's own file). */
  checkWatched(): boolean;
  release(): void;
}

export interface LocalLockOptions {
  /**
   * How often the holder checks that `lockPath` still names the file it locked, and when it
   * does not (deleted or replaced), locks the file now there, so later starts see the lock
   * again. Default 1 s (two stats: cheap).
   */
  recheckMs?: number;
}

/** How often the file may be swapped between our open and our flock before we give up. */
const MAX_TRIES = 20;

/** True when `lockPath` names the file open on `fd` (not deleted, not replaced). */
function stillThere(fd: number, lockPath: string): boolean {
  const st = statSync(lockPath, { throwIfNoEntry: false });
  if (st === undefined) return false;
  const mine = fstatSync(fd);
  return st.ino === mine.ino && st.dev === mine.dev;
}

/**
 * Open the lock file, never through a symbolic link: we truncate and write our name into
 * it, and a link there (planted in a shared directory) would make that overwrite its
 * target. Only a regular file is a lock file.
 */
function openLockFile(lockPath: string): number {
  let fd: number;
  try {
    fd = openSync(lockPath, constants.O_RDWR | constants.O_CREAT | constants.O_APPEND | constants.O_NOFOLLOW, 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') {
      throw new Error(`lock file ${lockPath} is a symbolic link: cronsafe never writes through links (lock.path); remove it or point lock.path elsewhere`, { cause: err });
    }
    throw err;
  }
  if (!fstatSync(fd).isFile()) {
    closeSync(fd);
    throw new Error(`lock file ${lockPath} is not a regular file (lock.path)`);
  }
  return fd;
}

/** flock(LOCK_EX | LOCK_NB): true when taken; false when another process holds it. `fd` is closed unless taken. */
function tryFlock(fd: number): boolean {
  try {
    flockSync(fd, 'exnb');
    return true;
  } catch (err) {
    closeSync(fd);
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EAGAIN' || code === 'EWOULDBLOCK') return false;
    throw err;
  }
}

/**
 * tryFlock for a descriptor kept in ledgerFds: never closed when the lock is held elsewhere.
 * Closed, it stayed in the map: the next try in this process (a skipped start's second
 * look, the daemon's next tick) flocked a closed descriptor (EBADF), or one the number was
 * given to since (SQLite's own); and the close dropped this process's POSIX locks on the
 * ledger (see ledgerFds).
 */
function flockKept(fd: number): boolean {
  try {
    flockSync(fd, 'exnb');
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EAGAIN' || code === 'EWOULDBLOCK') return false;
    throw err;
  }
}

/**
 * open + flock, then the standard check that the path still names the locked file: a lock
 * on a file that was unlinked (or renamed over) between our open and our flock would lock
 * nothing anyone else opens. Then retry on the file that is there now. Returns the locked
 * fd, or null when another process holds the lock.
 */
function lockFile(lockPath: string): number | null {
  for (let tries = 1; ; tries++) {
    const fd = openLockFile(lockPath);
    if (!tryFlock(fd)) return null;
    if (stillThere(fd, lockPath)) return fd;
    flockSync(fd, 'un');
    closeSync(fd);
    if (tries >= MAX_TRIES) throw new Error(`lock file ${lockPath} keeps being replaced while cronsafe locks it`);
  }
}

/**
 * Try to take the exclusive run lock without blocking. Returns null when another process
 * holds it. flock(2) on an open descriptor: released by the kernel when the holder dies
 * (SIGKILL, OOM), compatible with `flock(1)` in shell scripts, and not inherited by
 * handler children because Node opens files with O_CLOEXEC.
 *
 * The file must stay in place for the lock to mean anything, so while held, the path is
 * re-checked every `recheckMs` and a deleted or replaced file is locked again (a start in
 * between is stopped by the ledger heartbeat: src/lock/heartbeat.ts).
 */
export function tryLock(lockPath: string, holder: string, opts: LocalLockOptions = {}): LocalLock | null {
  makeDirs(path.dirname(lockPath));
  const first = lockFile(lockPath);
  if (first === null) return null;
  const fds = [first];
  let previousHolder: string | null = null;
  try {
    const buf = Buffer.alloc(512);
    const n = readSync(first, buf, 0, buf.length, 0);
    previousHolder = buf.subarray(0, n).toString('utf8').trim() || null;
  } catch {
    /* unreadable: nothing proven */
  }
  // Who holds it, for operators and for the next holder (see previousHolder); the lock
  // itself is the flock, not the contents.
  const describe = (fd: number): void => {
    try {
      ftruncateSync(fd, 0);
      writeSync(fd, `${holder}\n`);
    } catch {
      /* a read-only lock file still locks */
    }
  };
  describe(first);

  const lost = new AbortController();
  const watched = new Map<string, { dev: number; ino: number; reason?: (file: string) => string }>();
  const checkWatched = (): boolean => {
    let gone = false;
    for (const [file, seen] of watched) {
      let st: ReturnType<typeof statSync>;
      try {
        st = statSync(file, { throwIfNoEntry: false });
      } catch (err) {
        // A parent replaced by a file is the ledger gone too (ENOTDIR: statSync throws it,
        // and thrown here, in the recheck's timer, it crashed the run with a stack trace).
        // Anything else (EACCES) cannot tell: looked at again at the next recheck.
        // A link to itself put there (ELOOP) is gone as surely: it was looked at for ever.
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'ENOTDIR' && code !== 'ELOOP') continue;
        st = undefined;
      }
      if (st && st.dev === seen.dev && st.ino === seen.ino) continue;
      if (seen.reason === undefined) gone = true;
      if (!lost.signal.aborted) {
        lost.abort(new Error(seen.reason?.(file) ?? `${file} was removed or replaced during the run (its directory deleted?); stopping, the next run starts over`));
      }
    }
    return gone;
  };

  /**
   * A file put at the path mid-run (renamed over it by an editor or a config tool) is
   * locked, but written only when blank or a holder's line: start-up refuses to overwrite
   * anything else (config/check-paths.ts, foreignLockFile), and so must the recheck.
   */
  const ours = (fd: number): boolean => {
    try {
      const buf = Buffer.alloc(512);
      const text = buf.subarray(0, readSync(fd, buf, 0, buf.length, 0)).toString('utf8');
      return isLockFileText(text);
    } catch {
      return false;
    }
  };

  const recheck = setInterval(() => {
    const current = fds[fds.length - 1]!;
    checkWatched();
    try {
      if (stillThere(current, lockPath)) return;
      // Its directory may be gone too (the whole state directory deleted): recreate it,
      // so that later starts find the lock held instead of starting a second run.
      makeDirs(path.dirname(lockPath));
      // Keep the old fds locked too: whoever still has the old file open stays locked out.
      const again = lockFile(lockPath);
      if (again === null) return; // another process holds the new file: the heartbeat is what stops it
      fds.push(again);
      if (ours(again)) describe(again);
    } catch {
      /* the directory is gone or unwritable: try again at the next tick */
    }
  }, opts.recheckMs ?? 1000);
  recheck.unref();

  let released = false;
  return {
    path: lockPath,
    previousHolder,
    lost: lost.signal,
    watch(file) {
      const st = statIfThere(file);
      if (st) watched.set(file, { dev: st.dev, ino: st.ino });
      // Its directory replaced by a file (or a link to itself) since the run opened it: gone,
      // as the recheck would find it. Thrown, ENOTDIR ended the run, or a daemon, with a stack.
      else if (st === null && !lost.signal.aborted) lost.abort(new Error(`${file} was removed or replaced during the run (its directory deleted?); stopping, the next run starts over`));
    },
    watchCompanion(file, reason) {
      const st = statIfThere(file);
      if (st) watched.set(file, { dev: st.dev, ino: st.ino, reason });
    },
    unwatchCompanions() {
      for (const [file, seen] of watched) if (seen.reason !== undefined) watched.delete(file);
    },
    checkWatched,
    release() {
      if (released) return;
      released = true;
      clearInterval(recheck);
      for (const fd of fds) {
        try {
          flockSync(fd, 'un');
        } finally {
          closeSync(fd);
        }
      }
    },
  };
}

/** `file`'s stat; undefined when there is none, null when a directory on its way is no directory now (ENOTDIR, ELOOP). */
function statIfThere(file: string): Stats | undefined | null {
  try {
    return statSync(file, { throwIfNoEntry: false });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTDIR' || code === 'ELOOP') return null;
    throw err;
  }
}

/**
 * The line the lock file's holder wrote, read without locking (a start that found the lock
 * held says whose it is); null when unreadable, empty, or not a holder's line (a flock(1)
 * script's empty file, or a holder between its truncate and its write).
 */
export function lockHolder(lockPath: string): string | null {
  try {
    const fd = openSync(lockPath, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      const buf = Buffer.alloc(512);
      const text = buf.subarray(0, readSync(fd, buf, 0, buf.length, 0)).toString('utf8');
      return text.trim() !== '' && isLockFileText(text) ? text.trim() : null;
    } finally {
      closeSync(fd);
    }
  } catch {
    return null;
  }
}

/**
 * flock(2) on the SQLite ledger file itself, beside the run lock: it lives wherever the
 * ledger does, so it keeps every run on that ledger apart however `lock.path` is placed
 * (the chart puts that on the pod's emptyDir). SQLite's own locks are POSIX fcntl locks,
 * which do not interact with flock on a local file system, and nothing is written: the
 * file is created empty when missing (SQLite takes an empty file as a new database).
 * Returns the release, or null when another run holds it.
 */
export function lockLedgerFile(file: string): (() => void) | null {
  // Its directory this user may not create (a parent it cannot write, a read-only file
  // system): the run said "cannot take the run lock <lock.path>: EACCES ... mkdir '<dir>'",
  // naming the lock file (free, on the pod's /tmp with the chart) for the ledger's directory.
  try {
    makeDirs(path.dirname(file));
  } catch (err) {
    throw new LedgerUnwritable(`cannot create the ledger's directory ${path.dirname(file)}: ${coerceError(err).message}`, { cause: err });
  }
  // A ledger this user may not write (another user's, or restored read-only): its open here
  // failed first, and the run said "cannot take the run lock <lock.path>: EACCES ... open
  // '<ledger>'", naming the lock file. Named as the ledger's open would name it.
  refuseUnwritable(file);
  const entry = openLedgerFd(file);
  // Held by a run of this very process: refused, as a descriptor of its own would be.
  if (entry.held || !flockKept(entry.fd)) return null;
  entry.held = true;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    entry.held = false;
    // Unlocked, and kept open while it is the ledger's (see ledgerFds).
    try {
      flockSync(entry.fd, 'un');
    } finally {
      if (ledgerFds.get(entry.key) !== entry) closeSync(entry.fd);
    }
  };
}

/**
 * This process's descriptors of ledger files, by path, kept open for its life. Closing any
 * descriptor of a file drops every POSIX lock the process holds on it (fcntl(2)), SQLite's
 * included: `cronsafe daemon` keeps its own connection to the ledger open between passes,
 * and each pass's release closed this descriptor, leaving that connection with no lock.
 * Another connection's close (a manual `cronsafe run`, an operator's `sqlite3`) then found
 * itself the last, checkpointed and deleted the `-wal` and `-shm` the daemon still used:
 * its next read said "database disk image is malformed", at every tick, until restarted.
 * A descriptor of a file since deleted or replaced is closed once no run holds its flock.
 */
interface LedgerFd {
  key: string;
  fd: number;
  dev: number;
  ino: number;
  held: boolean;
}
const ledgerFds = new Map<string, LedgerFd>();

/**
 * The ledger's descriptor, its open failures named as the ledger's: a ledger not made yet in
 * a state directory this user may not write (EACCES), or a state volume mounted read-only
 * (EROFS), said "cannot take the run lock <lock.path>: ... open '<ledger>'", naming the lock
 * file (free, on the pod's /tmp with the chart) for the ledger.
 */
function openLedgerFd(file: string): LedgerFd {
  try {
    return ledgerFd(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EROFS') {
      throw new LedgerUnwritable(`cannot open the ledger ${file}: the file system of state.sqlite is read-only (${coerceError(err).message})`, { cause: err });
    }
    if (code === 'EACCES' || code === 'EPERM') {
      const why = noAccess(path.dirname(file), 'write');
      const where = why === undefined ? '' : `: ${why.text}`;
      throw new LedgerUnwritable(`cannot open the ledger ${file}${where} (${coerceError(err).message})`, { cause: err });
    }
    throw err;
  }
}

function ledgerFd(file: string): LedgerFd {
  const key = path.resolve(file);
  const known = ledgerFds.get(key);
  const st = statSync(file, { throwIfNoEntry: false });
  if (known !== undefined && st !== undefined && st.dev === known.dev && st.ino === known.ino) return known;
  const fd = openSync(file, constants.O_RDWR | constants.O_CREAT, 0o644);
  const mine = fstatSync(fd);
  if (!mine.isFile()) {
    closeSync(fd);
    throw new Error(`the ledger ${file} is not a regular file (state.sqlite)`);
  }
  // The same file after all (swapped back between the stat and the open): closing either
  // descriptor would drop the locks; the new one is kept as well.
  const same = known !== undefined && known.dev === mine.dev && known.ino === mine.ino;
  // The ledger deleted or replaced since: the old file's descriptor goes, unless a run still
  // holds its flock (its release closes it).
  if (known !== undefined && !same && !known.held) closeSync(known.fd);
  const entry: LedgerFd = { key, fd, dev: mine.dev, ino: mine.ino, held: false };
  ledgerFds.set(key, entry);
  return entry;
}
