import { readFileSync, statSync } from 'node:fs';

/** How long a connection waits for another process's lock on the ledger before SQLITE_BUSY. */
export const BUSY_TIMEOUT_MS = 5000;

/**
 * Who holds an SQLite database file in exclusive locking mode, from the kernel's table of
 * file locks (/proc/locks): no database driver, no descriptor of the file (closing one would
 * drop this process's own POSIX locks on it).
 *
 * A connection that ran `PRAGMA locking_mode=EXCLUSIVE` (a `sqlite3` shell, a backup tool)
 * takes SQLite's EXCLUSIVE lock on the file at its first read of a WAL database, a write
 * lock over the file's SHARED byte range, and keeps it until it closes. Every other
 * connection's read or write then fails with SQLITE_BUSY however long it waits. A WAL
 * writer never locks that range (its lock is in the -shm): only this, or a last connection's
 * closing checkpoint for a moment, does.
 */

/** SQLite's lock bytes (os_unix.c): the PENDING byte at 1 GiB, then RESERVED, then the SHARED range. */
const SHARED_FIRST = 0x40000000 + 2;

/** The holder of an exclusive-mode lock: `pid` 0 when it is in another PID namespace (another container). */
export interface ExclusiveHolder {
  pid: number;
  /** Its command name (/proc/<pid>/comm), when it can be read. */
  command?: string;
}

/** The process (other than this one) holding a write lock over `file`'s SHARED range; undefined when none does or it cannot be told (not Linux). */
export function exclusiveHolder(file: string): ExclusiveHolder | undefined {
  let table: string;
  let dev: bigint;
  let ino: bigint;
  try {
    const st = statSync(file, { bigint: true });
    dev = st.dev;
    ino = st.ino;
    table = readFileSync('/proc/locks', 'latin1');
  } catch {
    return undefined;
  }
  // glibc's gnu_dev_major / gnu_dev_minor of st_dev; /proc/locks prints them in hex.
  const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn);
  const minor = (dev & 0xffn) | ((dev >> 12n) & ~0xffn);
  // `11: POSIX  ADVISORY  WRITE 14148 fe:00:2310725 1073741826 1073742335`; a waiter's line has `->` after the number.
  for (const line of table.split('\n')) {
    const m = /^\d+:\s+POSIX\s+\S+\s+WRITE\s+(\d+)\s+([0-9a-f]+):([0-9a-f]+):(\d+)\s+(\d+)\s+(\d+|EOF)\s*$/.exec(line);
    if (!m) continue;
    if (BigInt(`0x${m[2]}`) !== major || BigInt(`0x${m[3]}`) !== minor || BigInt(m[4]!) !== ino) continue;
    const end = m[6] === 'EOF' ? Infinity : Number(m[6]);
    if (Number(m[5]) > SHARED_FIRST || end < SHARED_FIRST) continue;
    const pid = Number(m[1]);
    if (pid === process.pid) continue;
    return { pid, ...commandOf(pid) };
  }
  return undefined;
}

function commandOf(pid: number): { command?: string } {
  if (pid === 0) return {};
  try {
    return { command: readFileSync(`/proc/${pid}/comm`, 'utf8').trim() };
  } catch {
    return {};
  }
}
