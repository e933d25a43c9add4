/**
 * The start journal: an append-only file beside the SQLite ledger (`<ledger>-starts`) that
 * records, before each handler starts, that its attempt started, and, when it succeeded,
 * that it did. The ledger writes those records to SQLite in batches (write-behind.ts), one
 * transaction per few hundred attempts instead of one per slot batch; the journal is what
 * makes that safe. A record is one write(2): once it returns, the record is in the page
 * cache and survives a SIGKILL of the process, as a SQLite WAL commit (synchronous=NORMAL)
 * does. The next run replays the file into the ledger before it reclaims anything, so a
 * crash still charges exactly the attempts that started, and loses no success.
 *
 * Format, one record per line (ids as JSON strings, so any byte of a name is safe):
 *   O <owner> <segment>        the run writing the records below (JSON string), and the
 *                              segment's number: each flush commits its number into the
 *                              ledger, so records already written are never replayed
 *   S <id> <attempt> <at>      attempt <attempt> of <id> started at <at> (epoch ms)
 *   D <id> <attempt> <at>      that attempt succeeded
 *   R <id> <attempt> <at>      attempt <attempt> of <id> started at <at> and was handed back,
 *                              not charged: its S record with the type byte overwritten in
 *                              place (handBack), when the ledger could not take the hand-back
 *                              (its file system full). An overwrite needs no new block of a
 *                              full file system, as the append of a record would.
 * Fields are tab-separated. The S records of attempts still running are carried over each
 * flush (clear), under their written segment (never replayed as starts), so that the byte
 * is there to overwrite however long the attempt runs. A torn last line (a crash
 * mid-write) is ignored: its handler had not started (or its success is simply redone).
 */
import { closeSync, constants, fstatSync, ftruncateSync, lstatSync, openSync, readSync, realpathSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, StateUnavailable, coerceError, errorCode } from '../../errors.js';

export interface JournalStart {
  id: string;
  owner: string;
  attempt: number;
  at: number;
  /** The segment the record belongs to. */
  segment: number;
}

export interface JournalRecords {
  starts: JournalStart[];
  done: JournalStart[];
  /** Started and handed back (R): a start (if its segment is unwritten) and then a hand-back. */
  released: JournalStart[];
}

/** An S record of an attempt still running, where its type byte is. */
interface Held {
  id: string;
  owner: string;
  attempt: number;
  line: string;
  offset: number;
}

/** The most start records clear() carries over a flush (see there). */
const MAX_CARRIED = 4096;

/** The journal's path for a ledger file (the file itself, links resolved: see openSqliteLedger). */
export const journalPath = (ledgerFile: string): string => `${ledgerFile}-starts`;

/**
 * The start journal beside the ledger file itself: SQLite puts its -wal and -shm beside the
 * file a link points to, and so does this (a link on one file system to a ledger on another
 * must not put the journal on the first).
 */
export function journalOf(ledgerFile: string): string {
  try {
    return journalPath(realpathSync(ledgerFile));
  } catch {
    return journalPath(ledgerFile);
  }
}

/**
 * `validate`: the refusal the run's open gives (ConfigError, exit 78) when something not
 * ours is at the journal's path of `ledgerFile` (a link, a FIFO, a directory), before the
 * run meets it. Nothing is opened: a FIFO there must not block.
 */
export function assertJournalOurs(ledgerFile: string): void {
  const file = journalOf(ledgerFile);
  let st;
  try {
    st = lstatSync(file, { throwIfNoEntry: false });
  } catch {
    // EACCES (a state directory this user may not search) and the like: no refusal to give
    // here, and no stack trace (validate printed `fatal:` and one); the run names it.
    return;
  }
  if (st === undefined) return;
  if (st.isFile()) {
    if (st.size > 0 && !journalLike(file)) throw notAJournal(file);
    return;
  }
  const link = st.isSymbolicLink();
  throw named(file, 'use', Object.assign(new Error(link ? 'a symbolic link; remove it' : 'not a regular file; remove it'), { code: link ? 'ELOOP' : 'EFTYPE' }));
}

/**
 * A journal error, naming the file: one line, no stack. Something not ours at the journal's
 * path (a link, a FIFO, a directory) is exit 78, as a foreign lock.path is: cronsafe never
 * writes or reads through it, and only its owner can move it. Anything else (EACCES,
 * ENOSPC, EIO) is exit 1, the state store's problem.
 */
const named = (file: string, what: string, err: unknown): Error => {
  // EDQUOT named (Node's own code for it is 'UNKNOWN'): the ledger takes it as a full disk.
  const code = errorCode(err);
  const message = `cannot ${what} cronsafe's start journal ${file}: ${code === 'EDQUOT' ? quotaUsedUp(file, err) : coerceError(err).message}`;
  if (code === 'ELOOP' || code === 'EFTYPE' || code === 'ENXIO' || code === 'EISDIR') {
    return new ConfigError(`state.sqlite: ${message} (the journal beside the ledger must be a regular file of cronsafe's; remove what is there)`, undefined, 'state.sqlite');
  }
  return Object.assign(new StateUnavailable(message), { code });
};

/**
 * A refusal for a disk quota used up (EDQUOT), which Node words "UNKNOWN: unknown error,
 * write" (its libuv has no name for it): that said neither the cause nor what to do.
 */
const quotaUsedUp = (file: string, err: unknown): string =>
  `EDQUOT: disk quota exceeded, ${(err as { syscall?: string }).syscall ?? 'write'} (this user's, or this directory's project, disk quota on the file system of state.sqlite (${path.dirname(file)}) is used up, though the file system may have room: raise the quota, or free some of it)`;

/**
 * Whether a regular file's first byte is what every journal of ours begins with: its first
 * write starts with an `O` record (journalStart). Anything else at the journal's path
 * (another job's ledger named `<ours>-starts`, a file put there) is not ours: a run that
 * took it for its journal appended to it, emptied it and removed it, another job's whole
 * ledger with it. Unreadable: taken as ours (the read or write that follows says why).
 */
function journalLike(file: string): boolean {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch {
    return true;
  }
  try {
    const first = Buffer.alloc(1);
    return readSync(fd, first, 0, 1, 0) === 0 || journalStart(first[0]!);
  } catch {
    return true;
  } finally {
    closeSync(fd);
  }
}

/** A first byte a journal may have: `O` (its first record), NUL (an OS crash's damage), `\n` (emptied by `echo > file`). */
const journalStart = (byte: number): boolean => byte === 0x4f || byte === 0 || byte === 0x0a;

const notAJournal = (file: string): Error =>
  new ConfigError(
    `state.sqlite: cannot use cronsafe's start journal ${file}: it is not one (it does not begin with one of its records: another program's file, or another job's ledger named like it); give state.sqlite a path whose "-starts" file is free, or move that file away if it is nobody's`,
    undefined,
    'state.sqlite',
  );

export class StartJournal {
  #fd: number | undefined;
  /** The segment being written, once its O line is; undefined before. */
  #segment: number | undefined;
  /** The file's length after our last whole append: where a failed one is cut back to. */
  #length = 0;
  /** The S records of attempts not settled yet, by id: a hand-back overwrites its type byte. */
  readonly #held = new Map<string, Held>();

  constructor(readonly file: string) {}

  get opened(): boolean {
    return this.#fd !== undefined;
  }

  /** Deleted under us (an operator, a cleaner): what was appended since the last flush is only in our fd. */
  vanished(): boolean {
    if (this.#fd === undefined) return false;
    try {
      return fstatSync(this.#fd).nlink === 0;
    } catch {
      return true;
    }
  }

  /** After vanished(): the next append creates the file anew (the caller flushed first). */
  reopen(): void {
    this.#close();
  }

  /** Whether this attempt's S record is in the file, to be overwritten by a hand-back. */
  holds(c: { id: string; owner: string; attempt: number }): boolean {
    const h = this.#held.get(c.id);
    return h !== undefined && h.owner === c.owner && h.attempt === c.attempt;
  }

  /** The attempt was settled in the ledger: its S record is not carried any more. */
  settled(c: { id: string; owner: string; attempt: number }): void {
    this.#settledBy(c.id, c.owner, c.attempt);
  }

  #settledBy(id: string, owner: string, attempt: number): void {
    const h = this.#held.get(id);
    if (h !== undefined && h.owner === owner && h.attempt === attempt) this.#held.delete(id);
  }

  /**
   * Mark the attempt handed back: its S record's type byte becomes R, written in place (a
   * byte the file has: no new block is needed). Throws when it cannot be written.
   */
  handBack(c: { id: string; owner: string; attempt: number }): void {
    const h = this.#held.get(c.id);
    if (h === undefined || !this.holds(c)) throw new Error(`no start of ${JSON.stringify(c.id)} to hand back`);
    this.#overwrite(Buffer.from('R'), h.offset);
    this.#held.delete(c.id);
  }

  /**
   * handBack() for every attempt whose S record the file holds (none of them settled in the
   * ledger): at the end of a run whose ledger and journal the file system refused (full),
   * each such attempt is over, but its success or hand-back could not be written anywhere.
   * Left as starts, the next run's replay charged each one as a dead run's claim. Returns how
   * many were marked; one that cannot be written is left as it is.
   */
  handBackHeld(): number {
    let n = 0;
    for (const h of [...this.#held.values()]) {
      try {
        this.handBack(h);
        n++;
      } catch {
        /* left a start: charged by the next run, as before */
      }
    }
    return n;
  }

  /** Write `buf` at `position` in place, through a descriptor without O_APPEND (which would append it). */
  #overwrite(buf: Buffer, position: number): void {
    const fd = this.#open();
    const at = openSync(this.file, constants.O_WRONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
    try {
      const a = fstatSync(fd);
      const b = fstatSync(at);
      if (a.ino !== b.ino || a.dev !== b.dev) throw new Error('the journal was replaced');
      for (let off = 0; off < buf.length; ) off += writeSync(at, buf, off, buf.length - off, position + off);
    } finally {
      closeSync(at);
    }
  }

  /**
   * Append records for `owner`'s attempts, in segment `segment` (a new segment starts with
   * its O line); returns once they are written (not fsynced).
   */
  append(owner: string, segment: number, starts: readonly { id: string; attempt: number }[], done: readonly { id: string; attempt: number }[], at: number): void {
    let text = '';
    if (this.#segment !== segment) text += `O\t${JSON.stringify(owner)}\t${segment}\n`;
    for (const d of done) text += `D\t${JSON.stringify(d.id)}\t${d.attempt}\t${at}\n`;
    const held: Held[] = [];
    let offset = Buffer.byteLength(text);
    for (const s of starts) {
      const line = `S\t${JSON.stringify(s.id)}\t${s.attempt}\t${at}\n`;
      held.push({ id: s.id, owner, attempt: s.attempt, line, offset });
      offset += Buffer.byteLength(line);
      text += line;
    }
    if (text === '') return;
    const fd = this.#open();
    const buf = Buffer.from(text, 'utf8');
    try {
      // A full file system writes part of the buffer, then fails (ENOSPC): loop to find out.
      for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off);
    } catch (err) {
      // The whole lines of that part would be replayed as started attempts, charged though
      // their handlers never ran: cut the file back to what it held (shrinking needs no space).
      try {
        ftruncateSync(fd, this.#length);
      } catch {
        /* the write's error is the one to report */
      }
      throw named(this.file, 'write', err);
    }
    // Offsets in the file: this append began at #length.
    for (const h of held) {
      h.offset += this.#length;
      this.#held.set(h.id, h);
    }
    for (const d of done) this.#settledBy(d.id, owner, d.attempt);
    this.#length += buf.length;
    this.#segment = segment;
  }

  /**
   * Everything recorded is in the ledger now (up to segment `written`): start over (O_APPEND
   * writes go to the end). The S records of attempts still running are kept, moved to the
   * front under segment `written` (a replay skips them as starts), so a hand-back can still
   * overwrite their type byte: they were in the file, so they fit in the blocks it has.
   */
  clear(written = 0): void {
    if (this.#fd === undefined) return;
    const byOwner = new Map<string, Held[]>();
    for (const h of this.#held.values()) {
      const list = byOwner.get(h.owner);
      if (list) list.push(h);
      else byOwner.set(h.owner, [h]);
    }
    let text = '';
    const moved: Held[] = [];
    for (const [owner, held] of byOwner) {
      text += `O\t${JSON.stringify(owner)}\t${written}\n`;
      for (const h of held) {
        moved.push({ ...h, offset: Buffer.byteLength(text) });
        text += h.line;
      }
    }
    const buf = Buffer.from(text, 'utf8');
    // Bounded: no more attempts run at once than concurrency allows (1,024 at most). Past that,
    // records are carried that nothing settles any more, and each flush would rewrite them all.
    if (buf.length > 0 && buf.length <= this.#length && moved.length <= MAX_CARRIED) {
      try {
        this.#overwrite(buf, 0);
        ftruncateSync(this.#fd, buf.length);
        for (const h of moved) this.#held.set(h.id, h);
        this.#length = buf.length;
        this.#segment = undefined;
        return;
      } catch {
        /* emptied instead: what it holds is in the ledger */
      }
    }
    try {
      ftruncateSync(this.#fd, 0);
    } catch (err) {
      throw named(this.file, 'truncate', err);
    }
    this.#held.clear();
    this.#length = 0;
    this.#segment = undefined;
  }

  /**
   * Close; `remove`: the file holds nothing of ours any more (a clean end). Only a journal
   * this connection wrote is removed: another connection's (a running pass's) is not ours.
   */
  close(remove: boolean): void {
    const mine = this.#fd !== undefined;
    this.#close();
    if (remove && mine) removeJournal(this.file);
  }

  #close(): void {
    if (this.#fd !== undefined) closeSync(this.#fd);
    this.#fd = undefined;
    this.#segment = undefined;
    this.#held.clear();
  }

  #open(): number {
    if (this.#fd !== undefined) return this.#fd;
    let fd: number;
    try {
      // O_NONBLOCK: a FIFO put there fails (ENXIO) instead of hanging the run. 0644 as the
      // ledger: `status` of another user reads it (the umask still applies).
      fd = openSync(this.file, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NONBLOCK | constants.O_NOFOLLOW, 0o644);
    } catch (err) {
      throw named(this.file, 'open', err);
    }
    const st = fstatSync(fd);
    if (!st.isFile()) {
      closeSync(fd);
      throw named(this.file, 'use', Object.assign(new Error('not a regular file; remove it'), { code: 'EFTYPE' }));
    }
    // Made since the start's replay read it (another job's ledger created there meanwhile).
    if (st.size > 0 && !journalLike(this.file)) {
      closeSync(fd);
      throw notAJournal(this.file);
    }
    this.#fd = fd;
    this.#length = st.size;
    return fd;
  }
}

/**
 * What a journal holds; empty when there is none. `strict` (the run that replays it): a
 * journal that cannot be read is an error naming it. Otherwise (status, plan, requeue) it
 * is read as empty, so a reader never fails or hangs on it (a FIFO, a directory, EACCES).
 * `written`: the last segment in the ledger. A journal left by a cronsafe from before
 * segments (`O <owner>`, no number) was emptied at each flush, so all of it is unwritten: its
 * records count as the segment after `written`. Read as nothing, the starts of a run killed
 * before an upgrade went uncharged and its successes were done again.
 */
export function readJournal(file: string, strict = false, written = 0): JournalRecords {
  let text: string;
  try {
    text = readRegularFile(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || !strict) return { starts: [], done: [], released: [] };
    throw named(file, 'read', err);
  }
  // Not ours (journalLike): never replayed, and refused by the run that would remove it.
  if (text.length > 0 && !journalStart(text.charCodeAt(0))) {
    if (strict) throw notAJournal(file);
    return { starts: [], done: [], released: [] };
  }
  const out: JournalRecords = { starts: [], done: [], released: [] };
  let owner: string | undefined;
  let segment = 0;
  const lines = text.split('\n');
  lines.pop(); // after the last '\n': empty, or a torn record
  for (const line of lines) {
    const f = line.split('\t');
    try {
      if (f[0] === 'O' && (f.length === 3 || f.length === 2)) {
        owner = JSON.parse(f[1]!) as string;
        segment = f.length === 3 ? Number(f[2]) : written + 1;
        if (typeof owner !== 'string' || !Number.isSafeInteger(segment)) owner = undefined;
        continue;
      }
      if ((f[0] === 'S' || f[0] === 'D' || f[0] === 'R') && f.length === 4 && owner !== undefined) {
        const rec = { id: JSON.parse(f[1]!) as string, owner, attempt: Number(f[2]), at: Number(f[3]), segment };
        if (typeof rec.id === 'string' && Number.isSafeInteger(rec.attempt) && Number.isFinite(rec.at)) {
          (f[0] === 'S' ? out.starts : f[0] === 'D' ? out.done : out.released).push(rec);
        }
      }
    } catch {
      /* a damaged line (an OS crash can leave one): skip it, the rest stands */
    }
  }
  return out;
}

/** The file's text, refusing (without blocking) anything but a regular file. */
function readRegularFile(file: string): string {
  const fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw Object.assign(new Error('not a regular file; remove it'), { code: 'EFTYPE' });
    const buf = Buffer.alloc(st.size);
    let n = 0;
    while (n < buf.length) {
      const got = readSync(fd, buf, n, buf.length - n, n);
      if (got === 0) break;
      n += got;
    }
    return buf.subarray(0, n).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/** Remove the journal (a regular file only: anything else is reported, never deleted). */
export function removeJournal(file: string): void {
  try {
    unlinkSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw named(file, 'remove', err);
  }
}
