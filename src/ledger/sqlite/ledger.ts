import { existsSync, statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type Database from 'better-sqlite3';
import type * as L from '../types.js';
import type { ScheduleRecord } from '../schedule-record.js';
import { deadPages } from '../dead-pages.js';
import { finishedPages, type FinishedFilter, type FinishedItem, type ItemPeek } from '../requeue-types.js';
import type { MarkMissingOptions, MarkMissingStep, PruneEventsOptions, PruneRunsOptions, ReclaimedSpace } from '../retention.js';
import { wellFormed } from '../well-formed.js';
import { StateUnavailable } from '../../errors.js';
import { StoppedBeforeLedger, stopName } from '../run-lock.js';
import { makeClaimOps, type ClaimOps } from './claim.js';
import { BUSY_TIMEOUT_MS } from './busy.js';
import { isBusy } from './connection.js';
import { HANDLER_TIMES } from '../counters.js';
import { makeCounters, type Counters } from './counters.js';
import { makeDiscover, type Discover } from './discover.js';
import { makeEventOps, type EventOps } from './events.js';
import { makeFinishOps, type FinishOps } from './finish.js';
import { makeHeartbeatOps, type HeartbeatOps } from './heartbeat.js';
import { countsThroughJournal, finishedThroughJournal, journalled, throughJournal, withFinished } from './journal-view.js';
import { recordSchedule, recordSource, recordStopRequested } from './meta.js';
import { migrate } from './migrate.js';
import { pinnedLogBytes } from './pinned-log.js';
import { makePruneOps, type PruneOps } from './prune.js';
import { makeReadOps, type ReadOps } from './read.js';
import { makeRecoverOps, RETRY_DEAD_PAGE, type RecoverOps } from './recover.js';
import { makeRequeueOps, type RequeueOps } from './requeue.js';
import { makeRunOps, type RunOps } from './runs.js';
import { replayJournal, WriteBehind, writtenSegment } from './write-behind.js';

/** A file by path, and its identity when it was opened. */
export interface OpenedFile {
  path: string;
  dev: number;
  ino: number;
}

/** The identity of `file` now, for OpenedFile; undefined when it cannot be read. */
export function openedFile(file: string): OpenedFile | undefined {
  try {
    const st = statSync(file, { throwIfNoEntry: false });
    return st === undefined ? undefined : { path: file, dev: st.dev, ino: st.ino };
  } catch {
    return undefined;
  }
}

/** True while `opened.path` still names the file it named when opened; a path that cannot be read (EACCES) counts as the same. */
function sameFile(opened: OpenedFile): boolean {
  let st;
  try {
    st = statSync(opened.path, { throwIfNoEntry: false });
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ENOTDIR';
  }
  return st !== undefined && st.dev === opened.dev && st.ino === opened.ino;
}

export { BUSY_TIMEOUT_MS };
/** The run's connection waits in slices of this (busy_timeout), the event loop running between them (#op). */
export const BUSY_SLICE_MS = 100;
const BUSY_PAUSE_MS = 10;

/**
 * The Ledger on one SQLite file: the verbs are synchronous underneath (better-sqlite3),
 * each its own transaction; the run's connection writes claims and successes behind
 * (write-behind.ts), and every other connection reads through the journal it has not
 * written yet (journal-view.ts). Its sibling modules are named as PostgreSQL's are.
 */
/** Settles a slot batch and claims the next, in one transaction (SqliteLedger's #settle). */
type Settle = (s: L.Settlement, now: number, claim: { ids: string[]; opts: L.ClaimOptions } | undefined, random?: () => number) => L.SettleOutcome;

export class SqliteLedger implements L.Ledger {
  readonly shared = false;
  readonly #db: Database.Database;
  /**
   * The statements of each group of verbs, prepared when the group is first used: ~60 of them
   * (~2 ms of CPU), where a run that finds the lock held records one event
   * (docs/benchmarks.md, start-up). A read-only connection prepares them all at once, as
   * before: there a statement the file cannot take fails at the open, as it did.
   */
  readonly #ops: {
    settle?: Settle;
    counters?: Counters;
    claim?: ClaimOps;
    discover?: Discover;
    finish?: FinishOps;
    recover?: RecoverOps;
    read?: ReadOps;
    runs?: RunOps;
    events?: EventOps;
    heartbeat?: HeartbeatOps;
    requeue?: RequeueOps;
    prune?: PruneOps;
  } = {};
  get #counters(): Counters {
    return (this.#ops.counters ??= makeCounters(this.#db));
  }
  get #claim(): ClaimOps {
    return (this.#ops.claim ??= makeClaimOps(this.#db));
  }
  get #discover(): Discover {
    return (this.#ops.discover ??= makeDiscover(this.#db));
  }
  get #finish(): FinishOps {
    return (this.#ops.finish ??= makeFinishOps(this.#db, this.#counters));
  }
  get #recover(): RecoverOps {
    return (this.#ops.recover ??= makeRecoverOps(this.#db, this.#finish, this.#counters, this.#journal));
  }
  get #requeue(): RequeueOps {
    return (this.#ops.requeue ??= makeRequeueOps(this.#db, this.#counters));
  }
  get #read(): ReadOps {
    return (this.#ops.read ??= makeReadOps(this.#db));
  }
  get #runs(): RunOps {
    return (this.#ops.runs ??= makeRunOps(this.#db));
  }
  get #events(): EventOps {
    return (this.#ops.events ??= makeEventOps(this.#db, this.#counters));
  }
  get #heartbeat(): HeartbeatOps {
    return (this.#ops.heartbeat ??= makeHeartbeatOps(this.#db));
  }
  get #prune(): PruneOps {
    return (this.#ops.prune ??= makePruneOps(this.#db));
  }
  get #settle(): Settle {
    if (this.#ops.settle) return this.#ops.settle;
    const finish = this.#finish;
    const claimOps = this.#claim;
    return (this.#ops.settle = this.#db.transaction((s: L.Settlement, now: number, claim: { ids: string[]; opts: L.ClaimOptions } | undefined, random?: () => number) => ({
      complete: finish.completeIn(s.complete, now),
      fail: s.fail.map((f) => finish.failOne(f.claim, f.error, { now, retry: f.retry, random })),
      release: s.release.map((r) => finish.releaseOne(r.claim, now, r.reason, r.unstarted)),
      gone: s.gone.map((c) => finish.forgetOne(c)),
      claims: claim ? claimOps.claimIn(claim.ids, claim.opts) : [],
    })).immediate);
  }

  /** Claims and successes written behind (the run's connection only). */
  readonly #behind: WriteBehind | undefined;

  /** The start journal's file (none in memory). */
  readonly #journal: string | undefined;

  /** The run's connection, or an operator's: it waits for another process's write lock in slices (#op). */
  readonly #slices: boolean;

  /**
   * The file this connection opened (a writing one), as it was then: see #keepLogOffReplacement.
   */
  readonly #opened: OpenedFile | undefined;

  constructor(db: Database.Database, journal?: string, writeBehind = false, sliced = writeBehind, opened?: OpenedFile) {
    this.#db = db;
    this.#opened = opened;
    this.#slices = sliced;
    this.#journal = journal;
    if (writeBehind && journal !== undefined) this.#behind = new WriteBehind(db, this.#finish, journal);
    if (db.readonly) void [this.#settle, this.#recover, this.#requeue, this.#discover, this.#read, this.#runs, this.#events, this.#heartbeat, this.#prune];
  }

  async migrate(): Promise<void> {
    return this.#op(() => { migrate(this.#db); });
  }
  async discover(items: L.DiscoveredItem[], opts: L.DiscoverOptions): Promise<string[]> {
    return this.#op(() => {
      // Flushed first, in the same transaction: an item started or done in the journal only is still pending here.
      const rows = this.#behind ? this.#behind.flushWith(() => this.#discover(items, opts)) : this.#discover(items, opts);
      this.#behind?.offer(rows);
      if (opts.deferCharged !== true) return rows.map((r) => r.id);
      const ids: string[] = [];
      for (const r of rows) if (r.attempts === 0) ids.push(r.id);
      return ids;
    });
  }
  async claim(ids: string[], opts: L.ClaimOptions): Promise<L.Claim[]> {
    return this.#written(() => this.#holding(this.#claim.claim(ids, opts)));
  }
  async claimDue(opts: L.ClaimOptions & { limit: number }): Promise<L.Claim[]> {
    return this.#written(() => this.#holding(this.#claim.claimDue(opts)));
  }
  /**
   * `claims`, which this connection now holds: from the first, a stop no longer ends a wait
   * (stopEndsWaits), as the drain's hand-backs and results must be written. Switched off in
   * the verb itself, so that a verb queued behind it (#op) already waits as a drain's must.
   */
  #holding<T extends { length: number }>(claims: T): T {
    if (claims.length > 0) this.#stopEndsWaits = undefined;
    return claims;
  }
  async nextDueAt(runId: string): Promise<number | null> {
    return this.#op(() => {
      this.#behind?.flush();
      return this.#claim.nextDueAt(runId);
    });
  }
  // Each settles claims outside settle(): the journal stops carrying their start records
  // (write-behind.ts, settled), or every flush would rewrite them all.
  async complete(claims: L.Claim[], now: number): Promise<L.FenceOutcome[]> {
    return this.#written(() => this.#settledNow(claims, () => this.#finish.complete(claims, now)), () => []);
  }
  async fail(failures: L.Failure[], opts: L.FailOptions): Promise<L.FenceOutcome[]> {
    return this.#written(() => this.#settledNow(failures.map((f) => f.claim), () => this.#finish.fail(failures, opts)), () => []);
  }
  async release(claims: L.Claim[], now: number, reason: string, unstarted?: boolean): Promise<L.FenceOutcome[]> {
    return this.#written(() => this.#settledNow(claims, () => this.#finish.release(claims, now, reason, unstarted)), () => []);
  }
  async forget(claims: L.Claim[], now: number): Promise<L.FenceOutcome[]> {
    return this.#written(() => this.#settledNow(claims, () => this.#finish.forget(claims, now)), () => []);
  }
  #settledNow<T>(claims: readonly L.Claim[], write: () => T): T {
    const out = write();
    this.#behind?.settledClaims(claims);
    return out;
  }
  async forgetUnseen(passId: string, limit?: number): Promise<number> {
    // Only pending rows this pass did not see (written behind first): never an attempt or a
    // candidate of this run, so the write-behind keeps what it knows (not #written).
    return this.#op(() => {
      this.#upToDate();
      return this.#finish.forgetUnseen(passId, limit);
    });
  }
  async settle(s: L.Settlement, now: number, claim?: { ids: string[]; opts: L.ClaimOptions }, random?: () => number): Promise<L.SettleOutcome> {
    return this.#op(() => {
      const behind = this.#behind;
      if (behind && s.fail.length === 0 && s.release.length === 0 && s.gone.length === 0) {
        const fast = behind.settle(s.complete, claim, now);
        if (fast) {
          this.#holding(fast.claims);
          return { ...fast, fail: [], release: [], gone: [] };
        }
      }
      try {
        const out = this.#writtenNow(() => this.#settle(s, now, claim, random), (out) => out.claims);
        this.#holding(out.claims);
        behind?.settled(s);
        return out;
      } catch (err) {
        // The ledger's file system full (or its quota used up): a hand-back it cannot take is journalled instead
        // (write-behind.ts, handBack), or the next run would charge it as a dead run's claim.
        const journalled = behind?.refusedForRoom(err) ? behind.handBack(s, now) : null;
        if (journalled === null) throw err;
        return journalled;
      }
    });
  }
  async renew(owner: string, ids: string[], leaseUntil: number): Promise<string[]> {
    return this.#op(() => {
      this.#behind?.flush();
      return this.#recover.renew(owner, ids, leaseUntil);
    });
  }
  /** Under the run lock no other run is alive: every claim not ours is abandoned. */
  reclaimAbandoned(owner: string, opts: L.ReclaimOptions): Promise<number> {
    return this.reclaimOrphans(owner, opts);
  }
  async recordStopRequested(owner: string): Promise<void> {
    return this.#op(() => recordStopRequested(this.#db, owner));
  }
  async reclaimOrphans(exceptOwner: string, opts: L.ReclaimOptions): Promise<number> {
    return this.#written(() => this.#recover.reclaimOrphans(exceptOwner, opts), () => []);
  }
  /**
   * A write the transactional way: what is written behind goes first, and afterwards the
   * write-behind forgets what the write may have changed (write-behind.ts, forgetState).
   */
  #written<T>(write: () => T, claimed?: (out: T) => readonly { id: string }[]): Promise<T> {
    return this.#op(() => this.#writtenNow(write, claimed));
  }
  #writtenNow<T>(write: () => T, claimed: (out: T) => readonly { id: string }[] = (out) => out as unknown as L.Claim[]): T {
    const behind = this.#behind;
    if (!behind) {
      this.#catchUp();
      return write();
    }
    behind.flush();
    const out = write();
    behind.forgetState(claimed(out));
    behind.reserve(claimed(out));
    return out;
  }
  async counts(): Promise<L.ItemCounts> {
    return this.#op(() => {
      this.#behind?.flush();
      const j = this.#othersJournal();
      const counts = this.#read.counts();
      return j ? countsThroughJournal(counts, j, (id) => this.#read.get(id), (id) => this.#updatedAt(id)) : counts;
    });
  }
  async get(id: string): Promise<L.ItemRecord | null> {
    return this.#op(() => {
      this.#behind?.flush();
      const row = this.#read.get(id);
      const rec = row ? this.#othersJournal()?.get(row.id) : undefined;
      return row && rec ? throughJournal(row, rec, this.#updatedAt(row.id)) : row;
    });
  }
  /** A row's last transition (the journal view applies no record older than it). */
  #updatedAt(id: string): number | undefined {
    this.#updatedAtStmt ??= this.#db.prepare('SELECT updated_at FROM items WHERE id = ?').pluck();
    return (this.#updatedAtStmt.get(wellFormed(id)) as number | undefined) ?? undefined;
  }
  #updatedAtStmt: Database.Statement | undefined;

  /** What this connection reads or writes next sees every journalled record: its own (flushed), or another run's (caught up). */
  #upToDate(): void {
    if (this.#behind) this.#behind.flush();
    else this.#catchUp();
  }

  /**
   * Another writer (requeue, dead-letter retry): what a running or dead run journalled and
   * has not written yet is written first (write-behind.ts, replayJournal), so this write
   * sees the items as they are. A journal that cannot be read is left to its run.
   */
  #catchUp(): void {
    if (this.#journal === undefined || this.#db.readonly || !existsSync(this.#journal)) return;
    const journal = this.#journal;
    this.#db.transaction(() => replayJournal(this.#db, this.#finish, journal, Date.now(), { strict: false, advance: false })).immediate();
  }

  /**
   * What another connection's run journalled and has not written yet (a running pass, or
   * one that died before the next run replayed it): read as written (journal-view.ts).
   */
  #othersJournal(): ReturnType<typeof journalled> | undefined {
    if (this.#journal === undefined || this.#behind?.writing) return undefined;
    const j = journalled(this.#journal, writtenSegment(this.#db));
    return j.size > 0 ? j : undefined;
  }
  async listDead(limit?: number): Promise<L.DeadItem[]> {
    return this.#op(() => {
      this.#behind?.flush();
      return this.#read.listDead(limit);
    });
  }
  deadPages(query?: L.DeadQuery): AsyncIterable<L.DeadItem[]> {
    this.#behind?.flush();
    return deadPages((after, n) => this.#read.deadPage(after, n), query);
  }
  async retryDead(ids: string[] | 'all', now: number, onPage?: (moved: number) => void): Promise<number> {
    if (ids !== 'all') return this.#written(() => this.#recover.retryDead(ids, now), () => []);
    // A page per transaction (recover.ts), and a pause between pages in which another
    // process's writer (a running pass) takes the lock: SQLite's busy wait polls, so a loop
    // that takes the lock again at once would keep it from it as one transaction did.
    const upTo = { upTo: await this.#written(() => this.#recover.deadUpTo(), () => []) };
    let moved = 0;
    for (;;) {
      const n = await this.#written(() => this.#recover.retryDead(upTo, now), () => []);
      moved += n;
      onPage?.(n);
      if (n < RETRY_DEAD_PAGE) return moved;
      await sleep(BUSY_PAUSE_MS);
    }
  }
  async startRun(run: { runId: string; owner: string; startedAt: number; scheduledFor?: number | null }): Promise<void> {
    return this.#op(() => { this.#runs.startRun(run); });
  }
  async finishRun(runId: string, finishedAt: number, outcome: L.RunOutcome, counts: Record<string, number>): Promise<void> {
    return this.#op(() => {
      this.#behind?.flush();
      this.#runs.finishRun(runId, finishedAt, outcome, counts);
    });
  }
  async recentRuns(limit: number): Promise<L.RunRecord[]> {
    return this.#op(() => this.#runs.recentRuns(limit));
  }
  async lastRunStart(atOrBefore?: number): Promise<L.RunStart | null> {
    return this.#op(() => this.#runs.lastRunStart(atOrBefore));
  }
  async occurrenceRan(occurrence: number): Promise<boolean> {
    return this.#op(() => this.#runs.occurrenceRan(occurrence));
  }
  async recordSource(directory: string): Promise<string | null> {
    return this.#op(() => recordSource(this.#db, directory));
  }
  async recordSchedule(schedule: ScheduleRecord): Promise<ScheduleRecord | null> {
    return this.#op(() => recordSchedule(this.#db, schedule));
  }
  async heartbeat(runId: string, at: number): Promise<void> {
    return this.#op(() => { this.#heartbeat.heartbeat(runId, at); });
  }
  async beatingRuns(since: number): Promise<L.RunHeartbeat[]> {
    return this.#op(() => this.#heartbeat.beatingRuns(since));
  }
  async pinnedLog(): Promise<number | null> {
    return this.#op(() => pinnedLogBytes(this.#db));
  }
  async flockedRunsSince(): Promise<number> {
    // Schema 5 came after the flock on the ledger file: a cronsafe without it refuses such a ledger.
    return this.#op(() => (this.#db.prepare('SELECT applied_at FROM schema_migrations WHERE version = 5').pluck().get() as number | undefined) ?? Infinity);
  }
  async markRunsDied(before: number): Promise<string[]> {
    return this.#op(() => this.#runs.markRunsDied(before));
  }
  async recordEvent(kind: L.LedgerEventKind, at: number, detail?: Record<string, unknown>, occurrence?: number): Promise<void> {
    return this.#op(() => { this.#events.recordEvent(kind, at, detail, occurrence); });
  }
  async countEvents(kind: L.LedgerEventKind, since?: number): Promise<number> {
    return this.#op(() => this.#events.countEvents(kind, since));
  }
  async lastOccurrenceRecorded(): Promise<number | null> {
    return this.#op(() => this.#events.lastOccurrenceRecorded());
  }
  async totals(): Promise<L.LedgerTotals> {
    return this.#op(() => {
      this.#behind?.flush();
      return this.#counters.totals();
    });
  }
  async attemptTotals(): Promise<L.AttemptTotals> {
    return this.#op(() => {
      this.#behind?.flush();
      return this.#counters.attemptTotals();
    });
  }
  async runStats(): Promise<L.RunStats> {
    return this.#op(() => this.#runs.runStats());
  }
  async handlerTimes(): Promise<Record<string, number>> {
    return this.#op(() => this.#counters.handlerTimes());
  }
  async addHandlerTimes(bumps: Record<string, number>): Promise<void> {
    return this.#op(() => {
      this.#db.transaction(() => {
        for (const [name, by] of Object.entries(bumps)) this.#counters.bump(`${HANDLER_TIMES}${name}`, by);
      }).immediate();
    });
  }
  finishedPages(filter: FinishedFilter, pageSize?: number): AsyncIterable<FinishedItem[]> {
    return this.#finishedPages(filter, pageSize);
  }
  async *#finishedPages(filter: FinishedFilter, pageSize?: number): AsyncGenerator<FinishedItem[]> {
    // As verbs: the catch-up writes (another run's journal), and on an operator's connection
    // it waits for the write lock in slices (#op), where one slice alone would fail it.
    await this.#op(() => this.#upToDate());
    const pages = finishedPages((after, n) => this.#op(() => this.#requeue.finishedPage(filter, after, n)), pageSize);
    // Read-only (requeue --dry-run), which cannot catch up: what the journal finished too.
    const j = this.#othersJournal();
    const extra = j ? finishedThroughJournal(j, filter, (id) => this.#read.get(id), (id) => this.#updatedAt(id)) : [];
    yield* extra.length > 0 ? withFinished(pages, extra) : pages;
  }
  async requeue(ids: string[], filter: FinishedFilter, now: number): Promise<string[]> {
    return this.#written(() => this.#requeue.requeue(ids, filter, now), () => []);
  }
  async peek(ids: string[]): Promise<ItemPeek[]> {
    return this.#op(() => {
      this.#upToDate();
      const j = this.#othersJournal();
      // Read-only (plan, requeue --dry-run): as the journal has them. The owner is only for
      // that: a success applies to the claim it completes.
      return this.#requeue.peek(ids).map(({ owner, ...p }) => {
        const rec = j?.get(p.id);
        if (!rec) return p;
        const now = throughJournal({ ...p, owner, lastError: null, leaseUntil: null, size: null, mtimeMs: null }, rec, this.#updatedAt(p.id));
        return now.state === p.state ? p : { ...p, state: now.state, attempts: now.attempts, released: now.released, doneAt: now.doneAt };
      });
    });
  }
  // Retention (prune.ts) runs after the pass's work: what is written behind goes first, so
  // a completion still in the journal is a done row when the missing-file walk looks.
  async pruneRuns(opts: PruneRunsOptions): Promise<number> {
    return this.#written(() => this.#prune.pruneRuns(opts), () => []);
  }
  async pruneEvents(opts: PruneEventsOptions): Promise<number> {
    return this.#written(() => this.#prune.pruneEvents(opts), () => []);
  }
  async markMissing(opts: MarkMissingOptions): Promise<MarkMissingStep> {
    return this.#written(() => this.#prune.markMissing(opts), () => []);
  }
  async forgetMissing(opts: { before: number; limit: number }): Promise<number> {
    return this.#written(() => this.#prune.forgetMissing(opts), () => []);
  }
  async reclaimSpace(maxPages: number): Promise<ReclaimedSpace> {
    return this.#written(() => this.#prune.reclaimSpace(maxPages), () => []);
  }
  /** Idempotent: a second close (e.g. from a drain and a finally) is a no-op. */
  async close(): Promise<void> {
    if (!this.#db.open) return;
    try {
      // A flush that fails (disk full, a lock held past BUSY_TIMEOUT_MS) leaves the journal
      // for the next run to replay.
      await this.#op(() => this.#behind?.close());
    } finally {
      if (this.#db.open) {
        this.#keepLogOffReplacement();
        this.#db.close();
      }
    }
  }

  /**
   * The ledger file moved, removed or replaced since this connection opened it (an older copy
   * restored with `mv`, rsync or `kubectl cp`, the file renamed away, its directory removed):
   * SQLite keeps the write-ahead log by the ledger's path, and a connection whose file has
   * moved neither checkpoints nor removes it at close. The log, full of pages of the file this
   * connection has open, stayed beside whatever file is at the path now, and the next open of
   * that file read its pages through it: a restored copy came back with what it predates (or,
   * its pages mixed with the other file's, damaged), and a ledger renamed away missed all it
   * had not checkpointed yet. So the log is checkpointed into the file this connection has
   * open and emptied (TRUNCATE), first. Best effort: a reader of the log now keeps it as it is.
   */
  #keepLogOffReplacement(): void {
    if (this.#opened === undefined || sameFile(this.#opened)) return;
    try {
      this.#db.pragma('wal_checkpoint(TRUNCATE)');
    } catch {
      /* busy, or the file system refused: the log stays, as before */
    }
  }

  /**
   * A verb, run at once. On the run's connection (`#slices`) busy_timeout is one slice
   * (BUSY_SLICE_MS): while another process holds the write lock (an operator's requeue, a
   * `sqlite3` shell in a transaction), the verb is tried again after a pause until
   * BUSY_TIMEOUT_MS has passed, instead of one wait inside SQLite that stops the event loop
   * for all of it: the drain deadline, handlers' exits, signals and cli.ts's last resort
   * run meanwhile, so a drain still ends inside the grace period. A verb that waits holds
   * the later ones back, so they keep the order they were called in. A verb that fails on
   * SQLITE_BUSY has written nothing (the write lock is taken first), so it can run again.
   * Every other connection waits inside SQLite, as before.
   */
  async #op<T>(verb: () => T): Promise<T> {
    // An async function runs up to its first await when called: the verb runs at once.
    if (this.#waiting === 0) {
      try {
        return verb();
      } catch (err) {
        this.#behind?.noteFault(err);
        if (!this.#slices || !isBusy(err)) throw err;
      }
    }
    this.#waiting++;
    const turn = this.#queue.then(() => this.#again(verb));
    this.#queue = turn.then(
      () => undefined,
      () => undefined,
    );
    try {
      return await turn;
    } catch (err) {
      this.#behind?.noteFault(err);
      throw err;
    } finally {
      this.#waiting--;
    }
  }
  /** Verbs waiting for another process's write lock (see #op), and the last one's turn. */
  #waiting = 0;
  #queue: Promise<void> = Promise.resolve();

  #again<T>(verb: () => T): Promise<T> {
    return againWhileBusy(verb, () => this.#db.open, this.#stopEndsWaits);
  }

  /** Ledger.stopEndsWaits: the run's stop while it holds no claim (#again), else undefined. */
  #stopEndsWaits: AbortSignal | undefined;
  stopEndsWaits(stop: AbortSignal | undefined): void {
    this.#stopEndsWaits = stop;
  }
}

/**
 * `verb`, which has just failed on SQLITE_BUSY, run again after a pause while it does, until
 * BUSY_TIMEOUT_MS has passed; the event loop runs between two tries. `open`: whether the
 * connection is still open (closed meanwhile, nothing is tried again). `stop`: the run's, for
 * the open and its start-up writes only (a drain's own writes must still wait): aborted,
 * StoppedBeforeLedger.
 */
export async function againWhileBusy<T>(verb: () => T, open: () => boolean, stop?: AbortSignal): Promise<T> {
  const until = Date.now() + BUSY_TIMEOUT_MS;
  for (;;) {
    if (stop?.aborted) throw new StoppedBeforeLedger(stopName(stop));
    await sleep(BUSY_PAUSE_MS);
    if (stop?.aborted) throw new StoppedBeforeLedger(stopName(stop));
    if (!open()) throw new StateUnavailable('the SQLite ledger was closed while a write waited for its lock');
    try {
      return verb();
    } catch (err) {
      if (!isBusy(err) || Date.now() >= until) throw err;
    }
  }
}
