/**
 * Claims and successes written behind, for the run that holds the flock (issue 9's
 * figures). A claim at the handler slot used to be its own SQLite transaction with the
 * results that freed the slots: ~12,500 commits per 100,000 items at concurrency 8, each
 * rewriting the same few index pages into the WAL, about half of the runner's time. Here a
 * slot batch is one write(2) to the start journal (start-journal.ts), and the ledger gets
 * the claims and successes in one transaction per FLUSH_AT records.
 *
 * What stays exact: a start is journalled before its handler runs, so a crash charges the
 * attempts that started and no other, as before; a success is journalled before it is
 * reported, so a crash loses none. Nothing else is deferred: failures, hand-backs and
 * forgets flush first and go through the ledger's own transaction, and every read of
 * this connection flushes first, so it sees its own writes. Another process (`status`)
 * sees a running pass at most FLUSH_AT records or FLUSH_MS behind.
 *
 * Only candidates the ledger itself found claimable in this pass (discover) start here:
 * pending and due then, and nothing but this run, which holds the flock, moves a pending
 * item. Anything else goes the transactional way.
 */
import path from 'node:path';
import type { Database, Statement } from 'better-sqlite3';
import type { Claim, ClaimOptions, FenceOutcome, Settlement, SettleOutcome } from '../types.js';
import { batchJson, wellFormed } from '../well-formed.js';
import { toClaim, type ClaimedRow } from '../item-rows.js';
import { isBusy, isFull } from './connection.js';
import { quotaUsedUp } from '../../block-probe.js';
import { errorCode } from '../../errors.js';
import type { FinishOps, Recorded } from './finish.js';
import { readJournal, StartJournal, type JournalStart } from './start-journal.js';

/**
 * Records per ledger transaction, at most: starts (each with its success, if that came
 * before the flush) and successes apart. Most flushes come sooner, with a pass's next
 * discovery (flushWith): a discovery batch is at most 1,024 items.
 */
export const FLUSH_AT = 2048;
/** At most this long between a record and its transaction, so `status` keeps up. */
export const FLUSH_MS = 1000;

/**
 * Journalled starts into claims, as the claim would have written them at the time: the
 * attempt recorded, updated_at the start (committed-output recovery compares output birth
 * times with it). Only a row still pending at the attempt before, and not changed since the
 * start: a replay is idempotent, and a requeue or dead-letter retry after it (attempts back
 * to 0, updated_at later) is never undone by it.
 */
export const APPLY_STARTS_SQL = `
UPDATE items SET state = 'claimed', owner = c.owner, attempts = c.attempt, lease_until = c.lease_until,
  claimed_size = items.size, claimed_mtime_ms = items.mtime_ms, updated_at = c.at
FROM (SELECT j.value ->> 0 AS id, j.value ->> 1 AS attempt, j.value ->> 2 AS at, j.value ->> 3 AS owner,
             j.value ->> 4 AS lease_until FROM json_each(@starts) AS j) AS c
WHERE items.id = c.id AND +items.state = 'pending' AND +items.attempts = c.attempt - 1 AND +items.updated_at <= c.at`;

/**
 * Successes already in the ledger at their attempt: another writer's catch-up (requeue,
 * dead-letter retry) wrote them from the journal before this flush or replay did. Writing
 * them again is no fenced attempt (nothing was rejected): they are left out. So are those
 * whose row another write changed after the success was recorded (records as [id,
 * attempt, at, owner]): a catch-up wrote it and a requeue or dead-letter retry moved the
 * item on since, so the record is history, as the journal view reads it (journal-view.ts),
 * not a rejected result; counted as fenced, every later command's catch-up counted it
 * again. A row still held by the success's own claim is never left out (the wall clock
 * set back after the start: its updated_at is later than the success).
 */
export const ALREADY_DONE_SQL = `
SELECT i.id FROM json_each(@done) AS j CROSS JOIN items AS i ON i.id = j.value ->> 0
WHERE (+i.state = 'done' AND +i.attempts = j.value ->> 1)
  OR (+i.updated_at > j.value ->> 2 AND NOT (+i.state = 'claimed' AND +i.owner IS j.value ->> 3 AND +i.attempts = j.value ->> 1))`;

interface Start extends Omit<JournalStart, 'segment'> {
  leaseUntil: number;
  /** The row's rowid as discovery read it (ClaimedRow.rowid); absent in a replay. */
  rowid?: number;
  /**
   * When its success was recorded, if that was before the start was flushed: the flush
   * writes the two as one (writeRecords), and no record of the success is made beside it.
   */
  doneAt?: number;
  /** The flush that writes it (WriteBehind's #flushes when it was buffered). */
  flush?: number;
}

/**
 * An attempt the journal says was handed back (its S record overwritten to R), while its
 * claim still holds: only then is it handed back, so a replay applies it once.
 */
const HELD_SQL = `SELECT 1 FROM items WHERE id = ? AND state = 'claimed' AND owner = ? AND attempts = ?`;
/** HELD_SQL's row's claim time (updated_at), for the committed-output test of a replay. */
const CLAIMED_AT_SQL = `SELECT updated_at FROM items WHERE id = ? AND state = 'claimed' AND owner = ? AND attempts = ?`;

/** Why a hand-back found only in the journal was made (its run's reason was not written). */
export const journalledHandBack = (attempt: number): string =>
  `attempt ${attempt} handed back, not charged: its run stopped for the environment's fault and could not write the hand-back to the ledger (its file system full?)`;

/** meta key: the last journal segment written into the ledger (replays skip it and older). */
const SEGMENT_KEY = 'journal_segment';
const GET_SEGMENT_SQL = `SELECT value FROM meta WHERE key = '${SEGMENT_KEY}'`;
const SET_SEGMENT_SQL = `INSERT INTO meta (key, value) VALUES ('${SEGMENT_KEY}', @segment)
  ON CONFLICT (key) DO UPDATE SET value = excluded.value WHERE CAST(value AS INTEGER) < CAST(excluded.value AS INTEGER)`;

/** The last segment written into the ledger (0: none yet). Exported for the journal view. */
export function writtenSegment(db: Database): number {
  return Number((db.prepare(GET_SEGMENT_SQL).pluck().get() as string | undefined) ?? 0);
}

export class WriteBehind {
  /** Claimable candidates of this pass's discoveries, with the row's attempt counts. */
  readonly #ready = new Map<string, ClaimedRow>();
  /** Attempts started here and not yet settled, by id: their start records. */
  readonly #live = new Map<string, Start>();
  #starts: Start[] = [];
  /**
   * Successes whose start is not in #starts (flushed already), each with when it was
   * recorded (its done_at, however late the flush). The others are on their start (doneAt).
   */
  #done: Recorded<Claim>[] = [];
  /** Flushes so far: a start whose `flush` is this one is still in #starts. */
  #flushes = 0;
  /** Hand-backs the ledger could not take, journalled (handBack): written with the next flush. */
  #released: { claim: Claim; reason: string }[] = [];
  #timer: NodeJS.Timeout | undefined;
  /** A write failed for a full file system during the run (noteFault). */
  #full = false;
  /** The journal segment being written; the next is one more (read from the ledger at first use). */
  #segment: number | undefined;
  readonly #journal: StartJournal;
  readonly #flushTx: (starts: Start[], done: Recorded<Claim>[], released: { claim: Claim; reason: string }[], now: number, segment: number, write?: () => unknown) => unknown;
  readonly #db: Database;
  /** The directory of the ledger and its journal. */
  readonly #dir: string;

  constructor(db: Database, finish: FinishOps, journalFile: string) {
    this.#db = db;
    this.#dir = path.dirname(journalFile);
    this.#journal = new StartJournal(journalFile);
    const stmts = recordStatements(db);
    const setSegment = db.prepare(SET_SEGMENT_SQL);
    const held = db.prepare(HELD_SQL).pluck();
    this.#flushTx = db.transaction((starts: Start[], done: Recorded<Claim>[], released: { claim: Claim; reason: string }[], now: number, segment: number, write?: () => unknown) => {
      writeRecords(stmts, finish, starts, done, now);
      for (const r of released) if (held.get(wellFormed(r.claim.id), r.claim.owner, r.claim.attempt) !== undefined) finish.releaseOne(r.claim, now, r.reason);
      // With the records: a crash between this commit and the journal's truncation, or a
      // truncation that fails, leaves records a replay must not apply again (a requeue or
      // dead-letter retry since would be undone by them).
      setSegment.run({ segment: String(segment) });
      // The caller's write, after the records (it sees them), committed with them.
      return write?.();
    }).immediate;
  }

  /** Discovery's claimable rows: candidates this pass may start from the journal. */
  offer(rows: ClaimedRow[]): void {
    for (const r of rows) this.#ready.set(r.id, r);
  }

  /**
   * A write went the transactional way (flushed first). What this knows may be stale now:
   * `claimed` ids are no longer candidates, and an attempt started here may have been
   * failed, handed back or reclaimed, so its success must be fenced by the row again.
   */
  forgetState(claimed: readonly { id: string }[] = []): void {
    for (const c of claimed) this.#ready.delete(c.id);
    this.#live.clear();
  }

  /**
   * settle() for the common case: successes of attempts started here, and a claim of
   * discovered candidates. Null when the batch needs the ledger's own transaction (flush
   * first, then forgetState()): a success of any other claim must be fenced by the row.
   */
  settle(complete: Claim[], claim: { ids: string[]; opts: ClaimOptions } | undefined, now: number): { complete: FenceOutcome[]; claims: Claim[] } | null {
    // Successes alone (a drain claims nothing more): journalled under their run's owner.
    const owner = claim?.opts.owner ?? complete[0]?.owner;
    if (owner === undefined) return null;
    // Loops, not some/every/map with closures: this runs once per slot batch.
    for (const c of complete) if (c.owner !== owner || !this.#started(c)) return null;
    const ids = claim?.ids ?? [];
    const opts = claim?.opts ?? { owner, now, leaseMs: 0 };
    // A candidate whose row was changed later than this clock goes the transactional way:
    // its start, dated now, would be older than the change, and the flush would skip it
    // (APPLY_STARTS_SQL), leaving the item pending while its handler runs (ClaimedRow.updated_at).
    const rows: ClaimedRow[] = [];
    for (const id of ids) {
      const row = this.#ready.get(id);
      if (row === undefined || !((row.updated_at ?? Infinity) <= opts.now)) return null;
      rows.push(row);
    }
    // An id named twice finds the same row: compared as objects, not as strings.
    if (hasRepeats(rows)) return null;
    // Deleted under us: what it held since the last flush is only in our fd. Write that
    // into the ledger now, then append to a new file. Before the starts below are made:
    // they are of the buffer after that flush.
    if (this.#journal.vanished()) {
      this.flush(opts.now);
      this.#journal.reopen();
    }
    // Their start records (each holds), before they leave #live: the success goes on them.
    const succeeded: Start[] = [];
    for (const c of complete) {
      succeeded.push(this.#live.get(c.id)!);
      this.#live.delete(c.id);
    }
    const claims: Claim[] = [];
    const starts: Start[] = [];
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      const row = rows[i]!;
      claims.push(toClaim({ id, attempts: row.attempts + 1, released: row.released }, opts.owner));
      starts.push({ id, owner: opts.owner, attempt: row.attempts + 1, at: opts.now, leaseUntil: opts.now + opts.leaseMs, rowid: row.rowid, doneAt: undefined, flush: this.#flushes });
    }
    // Before the handlers start and before the successes are reported: the record is the commit.
    this.#segment ??= writtenSegment(this.#db) + 1;
    this.#journal.append(opts.owner, this.#segment, starts, complete, opts.now);
    for (const s of starts) {
      this.#ready.delete(s.id);
      this.#live.set(s.id, s);
    }
    for (let i = 0; i < complete.length; i++) this.#succeeded(succeeded[i]!, complete[i]!, opts.now);
    for (const s of starts) this.#starts.push(s);
    // Journalled already: a flush that must wait for another process's write lock is the timer's.
    if (this.#starts.length + this.#done.length >= FLUSH_AT) this.#flushOrWait(opts.now);
    else this.#timer ??= setTimeout(() => this.#flushLater(), FLUSH_MS).unref();
    return { complete: complete.map((c) => ({ id: c.id, result: 'applied', state: 'done' })), claims };
  }

  /** The attempt `c` was started here and is not settled (its start record is in #live). */
  #started(c: Claim): boolean {
    const live = this.#live.get(c.id);
    return live !== undefined && live.owner === c.owner && live.attempt === c.attempt;
  }

  /**
   * A success of the attempt started by `start`, journalled at `at`: recorded on its start
   * when that is still to be flushed, once; else (flushed, or a repeat) as a success of its own.
   */
  #succeeded(start: Start, c: Claim, at: number): void {
    if (start.flush === this.#flushes && start.doneAt === undefined) start.doneAt = at;
    else this.#done.push({ ...c, at });
  }

  /**
   * Claims the ledger's own transaction made: their S records are journalled too, so that a
   * hand-back the ledger cannot take has a record to overwrite (handBack). Dated 0, so that
   * no replay applies one as a start (APPLY_STARTS_SQL: the row is claimed, and any later
   * write of it is dated after 0) and the journal view takes none for news; a hand-back of
   * one is still replayed. Best effort: a full file system refuses it, and the attempt goes
   * on without one.
   */
  reserve(claims: readonly { id: string; owner?: string; attempt?: number }[]): void {
    const starts: { id: string; attempt: number }[] = [];
    let owner: string | undefined;
    for (const c of claims) {
      if (c.owner === undefined || c.attempt === undefined) continue;
      if (owner !== undefined && c.owner !== owner) return;
      owner = c.owner;
      starts.push({ id: c.id, attempt: c.attempt });
    }
    if (owner === undefined || starts.length === 0) return;
    try {
      this.#segment ??= writtenSegment(this.#db) + 1;
      this.#journal.append(owner, this.#segment, starts, [], 0);
    } catch {
      /* no reservation: a hand-back of these the ledger cannot take is lost, as before */
    }
  }

  /** These attempts were settled in the ledger: their S records need not be kept. */
  settled(s: Settlement): void {
    this.settledClaims(s.complete);
    for (const f of s.fail) this.#journal.settled(f.claim);
    for (const r of s.release) this.#journal.settled(r.claim);
    this.settledClaims(s.gone);
  }

  /** settled(), for claims settled by one of the ledger's verbs (complete, fail, release, forget). */
  settledClaims(claims: readonly Claim[]): void {
    for (const c of claims) this.#journal.settled(c);
  }

  /**
   * The ledger could not take this settlement (its file system full): its hand-backs are
   * journalled instead, each by overwriting its start's type byte (no new block needed),
   * with its successes (an append). The next flush, or the next run's replay, writes them
   * into the ledger. Null when that cannot be done for all of it (a failure or a forget in
   * it, an attempt without a start in the journal, the append refused): the caller reports
   * the ledger's error.
   */
  handBack(s: Settlement, now: number): SettleOutcome | null {
    if (s.fail.length > 0 || s.gone.length > 0 || s.release.length === 0) return null;
    if (!s.release.every((r) => this.#journal.holds(r.claim))) return null;
    const owner = s.release[0]!.claim.owner;
    if (!s.complete.every((c) => c.owner === owner && this.#started(c))) return null;
    try {
      if (s.complete.length > 0) {
        this.#segment ??= writtenSegment(this.#db) + 1;
        this.#journal.append(owner, this.#segment, [], s.complete, now);
        for (const c of s.complete) {
          const start = this.#live.get(c.id)!;
          this.#live.delete(c.id);
          this.#succeeded(start, c, now);
        }
      }
      for (const r of s.release) {
        this.#journal.handBack(r.claim);
        this.#live.delete(r.claim.id);
        this.#released.push({ claim: r.claim, reason: r.reason });
      }
    } catch {
      return null;
    }
    return {
      complete: s.complete.map((c) => ({ id: c.id, result: 'applied', state: 'done' })),
      fail: [],
      release: s.release.map((r) => ({ id: r.claim.id, result: 'applied', state: 'pending', availableAt: now })),
      gone: [],
      claims: [],
    };
  }

  /** A write of this run failed with `err`: one the file system refused for lack of space is remembered (close). */
  noteFault(err: unknown): void {
    if (this.refusedForRoom(err)) this.#full = true;
  }

  /** Whether `err` is a write the ledger's file system refused for lack of space (fileSystemFull). */
  refusedForRoom(err: unknown): boolean {
    return fileSystemFull(err, this.#dir);
  }

  /** True once this connection wrote the journal: its records are its own, not a dead run's. */
  get writing(): boolean {
    return this.#journal.opened;
  }

  /** Write what the journal holds into the ledger, then empty the journal. */
  flush(now = Date.now()): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#starts.length === 0 && this.#done.length === 0 && this.#released.length === 0) return;
    const segment = this.#segment ?? 0;
    this.#flushTx(this.#starts, this.#done, this.#released, now, segment);
    this.#flushed(segment);
  }

  /**
   * flush(), and `write` (a write of this connection's, run as a savepoint) in the same
   * transaction: one commit where there were two (discovery, which must see the records,
   * flushed first in a transaction of its own). Either both are in the ledger or neither,
   * and the journal is emptied only once they are.
   */
  flushWith<T>(write: () => T, now = Date.now()): T {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#starts.length === 0 && this.#done.length === 0 && this.#released.length === 0) return write();
    const segment = this.#segment ?? 0;
    const out = this.#flushTx(this.#starts, this.#done, this.#released, now, segment, write) as T;
    this.#flushed(segment);
    return out;
  }

  /** The records up to `segment` are in the ledger: start the next buffers, empty the journal. */
  #flushed(segment: number): void {
    this.#starts = [];
    this.#done = [];
    this.#released = [];
    this.#flushes++;
    this.#segment = segment + 1;
    this.#journal.clear(segment);
  }

  /** The timer's flush: a failure (disk full) keeps the records, the next flush raises it. */
  #flushLater(): void {
    try {
      this.#flushOrWait(Date.now());
    } catch {
      /* still journalled; every later read or write flushes again and reports the error */
    }
  }

  /** Flush, or while another process holds the write lock (SQLITE_BUSY), try again on the timer. */
  #flushOrWait(now: number): void {
    try {
      this.flush(now);
    } catch (err) {
      if (!isBusy(err)) throw err;
      this.#timer ??= setTimeout(() => this.#flushLater(), FLUSH_MS).unref();
    }
  }

  /**
   * At the end of the run: flush, and remove the (now empty) journal. A flush the file
   * system refuses (full) leaves the journal for the next run's replay; the attempts it
   * holds as started and nothing more (a success whose record the full journal refused,
   * those that finished after the pass stopped for the fault) are handed back in place
   * first: their handlers ran to their end, and the fault is the environment's, so the next
   * run must not charge them as a dead run's claims (without output.directory, no output
   * proves a success; with it, only the committed ones were proven).
   */
  close(): void {
    try {
      this.flush();
    } catch (err) {
      if (fileSystemFull(err, this.#dir)) this.#journal.handBackHeld();
      throw err;
    }
    // Nothing left to flush, but a write the full file system refused (a failure, or a success
    // that went the transactional way after one) left attempts without their end: handed back
    // too, and the journal kept for the next run's replay (removed, their claims were charged
    // as a dead run's and run again).
    if (this.#full && this.#journal.handBackHeld() > 0) {
      this.#ready.clear();
      this.#live.clear();
      this.#journal.close(false);
      return;
    }
    this.#ready.clear();
    this.#live.clear();
    this.#journal.close(true);
  }
}

/**
 * The ledger's or the journal's file system (in `dir`) refused a write for lack of space:
 * SQLITE_FULL; ENOSPC, EDQUOT from the journal; or SQLite's "disk I/O error" while this
 * user's disk quota there is used up (SQLite names ENOSPC alone as a full disk: a write
 * refused EDQUOT is SQLITE_IOERR_WRITE to it, and the hand-backs of a pass stopped for the
 * quota, not journalled, were charged by the next run as a dead run's claims).
 */
function fileSystemFull(err: unknown, dir: string): boolean {
  const code = errorCode(err);
  if (isFull(err) || code === 'ENOSPC' || code === 'EDQUOT') return true;
  return code !== undefined && code.startsWith('SQLITE_IOERR') && quotaUsedUp(dir);
}

/** A slot batch (a few rows) holds one twice: compared pairwise, by identity, no Set made per batch. */
function hasRepeats(xs: readonly object[]): boolean {
  if (xs.length > 16) return new Set(xs).size !== xs.length;
  for (let i = 1; i < xs.length; i++) for (let j = 0; j < i; j++) if (xs[i] === xs[j]) return true;
  return false;
}

interface RecordStatements {
  applyStarts: Statement;
  alreadyDone: Statement;
}

const recordStatements = (db: Database): RecordStatements => ({
  applyStarts: db.prepare(APPLY_STARTS_SQL),
  alreadyDone: db.prepare(ALREADY_DONE_SQL).pluck(),
});

/**
 * Starts and successes into the ledger, inside the caller's transaction, as if every start
 * were applied (APPLY_STARTS_SQL) and then every success (finish.completeIn, fenced by owner
 * and attempt). Most successes are of attempts started in the same batch: those go pending
 * to done in one write (START_AND_COMPLETE_SQL), about half the b-tree work of a claim
 * written and then undone. An id listed twice, or a pair whose start no longer applies,
 * goes the two-step way, so the outcome is the same either way. A success already in the
 * ledger at its attempt, or whose row another write moved on since (ALREADY_DONE_SQL), is left out.
 */
function writeRecords(stmts: RecordStatements, finish: FinishOps, starts: Start[], done: Recorded<Claim>[], now: number): void {
  // An id started twice, or with a success of its own beside its start's (a repeat), goes the two-step way.
  const startOf = new Map<string, Start | null>();
  for (const s of starts) startOf.set(s.id, startOf.has(s.id) ? null : s);
  const doneApart = new Set<string>();
  for (const d of done) doneApart.add(d.id);
  const pairs: Start[] = [];
  let twoStep = false;
  for (const s of starts) {
    if (s.doneAt === undefined) continue;
    if (startOf.get(s.id) === s && !doneApart.has(s.id)) pairs.push(s);
    else twoStep = true;
  }
  const applied = finish.startAndCompleteIn(pairs as (Start & { doneAt: number })[]);
  // RETURNING gives stored ids: an ill-formed one (well-formed.ts) is looked up as stored, only on a miss.
  const isApplied = (id: string): boolean => applied.has(id) || applied.has(wellFormed(id));
  const rest = <T extends { id: string }>(xs: T[]): T[] => (applied.size === 0 ? xs : xs.filter((x) => !isApplied(x.id)));
  const restStarts = rest(starts);
  if (restStarts.length > 0) stmts.applyStarts.run({ starts: batchJson(restStarts.map((s) => [s.id, s.attempt, s.at, s.owner, s.leaseUntil])) });
  // The successes not written with their start: those on a start that did not pair (or whose pair did not apply), then the others.
  const unpaired = pairs.length === applied.size && !twoStep ? [] : restStarts.filter((s) => s.doneAt !== undefined);
  const restDone: Recorded<Claim>[] = unpaired.map((s) => ({ id: s.id, owner: s.owner, attempt: s.attempt, charged: 0, at: s.doneAt }));
  for (const d of rest(done)) restDone.push(d);
  if (restDone.length === 0) return;
  const written = new Set(stmts.alreadyDone.all({ done: batchJson(restDone.map((d) => [d.id, d.attempt, d.at ?? null, d.owner])) }) as string[]);
  finish.completeIn(written.size === 0 ? restDone : restDone.filter((d) => !(written.has(d.id) || written.has(wellFormed(d.id)))), now);
}

/**
 * The journal's unwritten records into the ledger, inside the caller's transaction.
 * - Recovery (reclaimOrphans, `advance`): the journal a dead run left becomes the claims and
 *   successes it recorded, so its started attempts are charged (as orphans) and its
 *   successes are done; the caller removes the file once the transaction committed.
 * - Another writer (requeue, dead-letter retry), before it writes: what a running or dead
 *   run journalled is written first, so the write sees it; the file is left to its run.
 * `finish` fences every success by owner and attempt.
 */
export function replayJournal(
  db: Database,
  finish: FinishOps,
  journalFile: string,
  now: number,
  opts: { strict: boolean; advance: boolean; committed?: (id: string, claimedAt: number) => boolean },
): void {
  const written = writtenSegment(db);
  const unwritten = (r: JournalStart) => r.segment > written;
  const recs = readJournal(journalFile, opts.strict, written);
  // A hand-back (R) is a start too, if its segment is unwritten; then the claim goes back.
  const starts = [...recs.starts.filter(unwritten), ...recs.released.filter(unwritten)];
  const done = recs.done.filter(unwritten);
  const released = recs.released;
  if (starts.length === 0 && done.length === 0 && released.length === 0) return;
  // A dead run's claims need no lease: the flock we hold says it is gone.
  writeRecords(
    recordStatements(db),
    finish,
    starts.map((s) => ({ ...s, leaseUntil: s.at })),
    done.map((d) => ({ id: d.id, owner: d.owner, attempt: d.attempt, charged: 0, at: d.at })),
    now,
  );
  const claimedAt = db.prepare(CLAIMED_AT_SQL).pluck();
  for (const r of released) {
    const at = claimedAt.get(wellFormed(r.id), r.owner, r.attempt) as number | undefined;
    if (at === undefined) continue;
    const claim = { id: r.id, owner: r.owner, attempt: r.attempt, charged: 0 };
    // One handed back at the end of a run that could write neither its success nor its
    // hand-back (WriteBehind.close) may have committed its output: done, as the claim of a
    // run that died would be (the reclaim's committed-output test).
    if (opts.committed?.(r.id, at)) finish.completeIn([claim], now);
    else finish.releaseOne(claim, now, journalledHandBack(r.attempt));
  }
  if (starts.length === 0 && done.length === 0) return;
  // Only the run that proved the writer dead (it holds the lock) closes the segments: a
  // live writer may still append to its current one.
  if (!opts.advance) return;
  const last = Math.max(...starts.map((r) => r.segment), ...done.map((r) => r.segment));
  db.prepare(SET_SEGMENT_SQL).run({ segment: String(last) });
}
