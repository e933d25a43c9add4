import type * as L from '../types.js';
import type { ScheduleRecord } from '../schedule-record.js';
import type { FinishedFilter, FinishedItem, ItemPeek } from '../requeue-types.js';
import { finishedPages } from '../requeue-types.js';
import type { MarkMissingOptions, MarkMissingStep, PruneEventsOptions, PruneRunsOptions, ReclaimedSpace } from '../retention.js';
import { settleInSteps } from '../settle-steps.js';
import { makeClaimOps, type ClaimOps } from './claim.js';
import type { PostgresExecutor } from './connection.js';
import { HANDLER_TIMES } from '../counters.js';
import { bumpQuery, makeCounters, type Counters } from './counters.js';
import type { Unrecorded } from './batch.js';
import { makeDiscover } from './discover.js';
import { makeEventOps, type EventOps } from './events.js';
import { forgetUnseenQuery, makeFinishOps, type FinishOps } from './finish.js';
import { makeHeartbeatOps, type HeartbeatOps } from './heartbeat.js';
import { recordSchedule, recordSourceQuery, recordStopQuery } from './meta.js';
import { migrate } from './migrate.js';
import { makePruneOps, type PruneOps } from './prune.js';
import { makeReadOps, type ReadOps } from './read.js';
import { makeRecoverOps, type RecoverOps } from './recover.js';
import { makeRequeueOps, type RequeueOps } from './requeue.js';
import { makeRunOps, type RunOps } from './runs.js';

/** How long addHandlerTimes waits for the histogram's rows when another session holds them. */
const HANDLER_TIMES_LOCK_MS = 2_000;

/**
 * The Ledger on PostgreSQL, for many pods on one backlog. Every verb is one transaction
 * (retried with backoff on transient errors: connection loss, failover, deadlock,
 * serialization failure); SQL builders are pure functions in the sibling modules, which
 * are named as SQLite's are (claim, finish, read, runs, events, ...).
 */
export class PostgresLedger implements L.Ledger, L.SharedPassLedger {
  readonly shared = true;
  readonly #ex: PostgresExecutor;
  readonly #schema: string;
  readonly #claim: ClaimOps;
  readonly #discover: (items: L.DiscoveredItem[], opts: L.DiscoverOptions) => Promise<string[]>;
  readonly #finish: FinishOps;
  readonly #recover: RecoverOps;
  readonly #requeue: RequeueOps;
  readonly #read: ReadOps;
  readonly #runs: RunOps;
  readonly #events: EventOps;
  readonly #heartbeat: HeartbeatOps;
  readonly #counters: Counters;
  readonly #prune: PruneOps;

  constructor(ex: PostgresExecutor) {
    this.#ex = ex;
    const schema = (this.#schema = ex.opts.schema);
    // New ids this pod's discovery left for its claims to record (DiscoverOptions.recordOnClaim).
    const unrecorded: Unrecorded = new Map();
    this.#claim = makeClaimOps(ex, schema, unrecorded);
    this.#discover = makeDiscover(ex, schema, unrecorded);
    this.#finish = makeFinishOps(ex, schema);
    this.#recover = makeRecoverOps(ex, schema);
    this.#requeue = makeRequeueOps(ex, schema);
    this.#read = makeReadOps(ex, schema);
    this.#runs = makeRunOps(ex, schema);
    this.#events = makeEventOps(ex, schema);
    this.#heartbeat = makeHeartbeatOps(ex, schema);
    this.#counters = makeCounters(ex, schema);
    this.#prune = makePruneOps(ex, schema);
  }

  /** The schema this ledger lives in. */
  get schema(): string {
    return this.#schema;
  }

  async migrate(): Promise<void> {
    await this.#ex.tx('migrate', (exec) => migrate(exec, this.#schema));
  }
  discover(items: L.DiscoveredItem[], opts: L.DiscoverOptions): Promise<string[]> {
    return this.#discover(items, opts);
  }
  claim(ids: string[], opts: L.ClaimOptions): Promise<L.Claim[]> {
    return this.#claim.claim(ids, opts);
  }
  forget(claims: L.Claim[], now: number): Promise<L.FenceOutcome[]> {
    return this.#finish.forget(claims, now);
  }
  async forgetUnseen(passId: string): Promise<number> {
    const [r] = await this.#ex.query<{ n: number }>('forgetUnseen', forgetUnseenQuery(this.#schema, passId));
    return Number(r?.n ?? 0);
  }
  /**
   * One statement per step (see settleInSteps). The runner claims through settleOffered,
   * and writes results without a claim through here.
   */
  settle(s: L.Settlement, now: number, claim?: { ids: string[]; opts: L.ClaimOptions }, random?: () => number): Promise<L.SettleOutcome> {
    return settleInSteps(this, s, now, claim, random);
  }
  /**
   * Failures, hand-backs and forgotten items first, one statement each (rare); then the
   * completions and the claim in ONE statement on the claim session (asynchronous commit):
   * one round trip and no WAL flush wait per group of freed slots.
   */
  async settleOffered(
    s: L.Settlement,
    now: number,
    offer: { ids: string[]; opts: L.ClaimOptions & { limit: number; exclude?: readonly string[]; suspects?: boolean } },
    random?: () => number,
  ): Promise<L.SettleOutcome & { considered: number }> {
    const rare = s.fail.length + s.release.length + s.gone.length > 0;
    const rest = rare ? await settleInSteps(this, { ...s, complete: [] }, now, undefined, random) : { fail: [], release: [], gone: [] };
    const { complete, claims, considered } = await this.#claim.settleOffered(s.complete, offer.ids, { ...offer.opts, now });
    return { fail: rest.fail, release: rest.release, gone: rest.gone, complete, claims, considered };
  }
  claimDue(opts: L.ClaimOptions & { limit: number; exclude?: readonly string[] }): Promise<L.Claim[]> {
    return this.#claim.claimDue(opts);
  }
  siblings(passId: string, owner: string, now: number): Promise<L.PassSiblings> {
    return this.#claim.siblings(passId, owner, now);
  }
  nextDueAt(runId: string): Promise<number | null> {
    return this.#claim.nextDueAt(runId);
  }
  complete(claims: L.Claim[], now: number): Promise<L.FenceOutcome[]> {
    return this.#finish.complete(claims, now);
  }
  fail(failures: L.Failure[], opts: L.FailOptions): Promise<L.FenceOutcome[]> {
    return this.#finish.fail(failures, opts);
  }
  release(claims: L.Claim[], now: number, reason: string, unstarted?: boolean): Promise<L.FenceOutcome[]> {
    return this.#finish.release(claims, now, reason, unstarted);
  }
  /** Extends every claim `owner` holds (a heartbeat; see renewQuery), returns the `ids` it no longer holds. */
  renew(owner: string, ids: string[], leaseUntil: number): Promise<string[]> {
    return this.#recover.renew(owner, ids, leaseUntil);
  }
  /**
   * The contract's meaning: every claim not owned by `exceptOwner` is an orphan. Only
   * right when no other run can be alive; with many pods sharing a pass (or any doubt,
   * e.g. after the lock's session was cut by a database restart) use reclaimExpired.
   */
  reclaimOrphans(exceptOwner: string, opts: L.ReclaimOptions): Promise<number> {
    return this.#recover.reclaimOrphans(exceptOwner, opts);
  }
  /**
   * Claims whose lease ended before `opts.now` (their run stopped renewing: it died, or
   * lost the database for longer than a lease) go back to pending, or dead when charged
   * >= maxAttempts; only the pass `opts.passId`'s when given. Live pods renew well before
   * expiry, so their claims are never taken.
   */
  reclaimExpired(opts: L.ReclaimOptions & { passId?: string }): Promise<number> {
    return this.#recover.reclaimExpired(opts);
  }
  /** Other pods of the pass may be alive: only claims whose lease expired are abandoned. */
  reclaimAbandoned(_owner: string, opts: L.ReclaimOptions): Promise<number> {
    return this.reclaimExpired(opts);
  }
  async recordStopRequested(owner: string): Promise<void> {
    await this.#ex.query('recordStopRequested', recordStopQuery(this.#schema, owner, Date.now()));
  }
  counts(): Promise<L.ItemCounts> {
    return this.#read.counts();
  }
  get(id: string): Promise<L.ItemRecord | null> {
    return this.#read.get(id);
  }
  listDead(limit?: number): Promise<L.DeadItem[]> {
    return this.#read.listDead(limit);
  }
  deadPages(query?: L.DeadQuery): AsyncIterable<L.DeadItem[]> {
    return this.#read.deadPages(query);
  }
  retryDead(ids: string[] | 'all', now: number, onPage?: (moved: number) => void): Promise<number> {
    return this.#recover.retryDead(ids, now, onPage);
  }
  startRun(run: { runId: string; owner: string; startedAt: number; scheduledFor?: number | null }): Promise<void> {
    return this.#runs.startRun(run);
  }
  finishRun(runId: string, finishedAt: number, outcome: L.RunOutcome, counts: Record<string, number>): Promise<void> {
    return this.#runs.finishRun(runId, finishedAt, outcome, counts);
  }
  recentRuns(limit: number): Promise<L.RunRecord[]> {
    return this.#runs.recentRuns(limit);
  }
  lastRunStart(atOrBefore?: number): Promise<L.RunStart | null> {
    return this.#runs.lastRunStart(atOrBefore);
  }
  occurrenceRan(occurrence: number): Promise<boolean> {
    return this.#runs.occurrenceRan(occurrence);
  }
  async recordSource(directory: string): Promise<string | null> {
    const [r] = await this.#ex.query<{ before: string | null }>('recordSource', recordSourceQuery(this.#schema, directory));
    return r?.before ?? null;
  }
  recordSchedule(schedule: ScheduleRecord): Promise<ScheduleRecord | null> {
    return this.#ex.tx('recordSchedule', (exec) => recordSchedule(exec, this.#schema, schedule));
  }
  heartbeat(runId: string, at: number): Promise<void> {
    return this.#heartbeat.heartbeat(runId, at);
  }
  beatingRuns(since: number): Promise<L.RunHeartbeat[]> {
    return this.#heartbeat.beatingRuns(since);
  }
  markRunsDied(before: number): Promise<string[]> {
    return this.#runs.markRunsDied(before);
  }
  recordEvent(kind: L.LedgerEventKind, at: number, detail?: Record<string, unknown>, occurrence?: number): Promise<void> {
    return this.#events.recordEvent(kind, at, detail, occurrence);
  }
  countEvents(kind: L.LedgerEventKind, since?: number): Promise<number> {
    return this.#events.countEvents(kind, since);
  }
  lastOccurrenceRecorded(): Promise<number | null> {
    return this.#events.lastOccurrenceRecorded();
  }
  totals(): Promise<L.LedgerTotals> {
    return this.#counters.totals();
  }
  attemptTotals(): Promise<L.AttemptTotals> {
    return this.#counters.attemptTotals();
  }
  runStats(): Promise<L.RunStats> {
    return this.#runs.runStats();
  }
  handlerTimes(): Promise<Record<string, number>> {
    return this.#counters.handlerTimes();
  }
  async addHandlerTimes(bumps: Record<string, number>): Promise<void> {
    const bump = bumpQuery(this.#schema, Object.fromEntries(Object.entries(bumps).map(([name, by]) => [`${HANDLER_TIMES}${name}`, by])));
    // Every pod of the job adds to these rows: one that holds them in an open transaction (a
    // pod frozen or cut off between its write and its commit) made this wait with no end, and
    // a completed run that adds its last ones before it exits never exited. Best effort, as
    // handler-times.ts keeps what it could not add.
    if (bump) await this.#ex.tx('addHandlerTimes', (exec) => exec(bump), undefined, HANDLER_TIMES_LOCK_MS);
  }
  finishedPages(filter: FinishedFilter, pageSize?: number): AsyncIterable<FinishedItem[]> {
    return finishedPages((after, n) => this.#requeue.finishedPage(filter, after, n), pageSize);
  }
  requeue(ids: string[], filter: FinishedFilter, now: number): Promise<string[]> {
    return this.#requeue.requeue(ids, filter, now);
  }
  peek(ids: string[]): Promise<ItemPeek[]> {
    return this.#requeue.peek(ids);
  }
  pruneRuns(opts: PruneRunsOptions): Promise<number> {
    return this.#prune.pruneRuns(opts);
  }
  pruneEvents(opts: PruneEventsOptions): Promise<number> {
    return this.#prune.pruneEvents(opts);
  }
  markMissing(opts: MarkMissingOptions): Promise<MarkMissingStep> {
    return this.#prune.markMissing(opts);
  }
  forgetMissing(opts: { before: number; limit: number }): Promise<number> {
    return this.#prune.forgetMissing(opts);
  }
  reclaimSpace(maxPages: number): Promise<ReclaimedSpace> {
    return this.#prune.reclaimSpace(maxPages);
  }
  /** Idempotent (memoized): a second close is a no-op. */
  close(): Promise<void> {
    return this.#ex.close();
  }
}
