import { toItemRecord, wellFormed } from '../rows.js';
import type {
  AttemptTotals,
  Claim,
  ClaimOptions,
  DeadItem,
  DeadQuery,
  DiscoveredItem,
  DiscoverOptions,
  FailOptions,
  ReclaimOptions,
  Failure,
  FenceOutcome,
  ItemCounts,
  ItemRecord,
  Ledger,
  LedgerEventKind,
  LedgerTotals,
  PassSiblings,
  RunHeartbeat,
  RunOutcome,
  RunRecord,
  RunStart,
  RunStats,
  SettleOutcome,
  Settlement,
  SharedPassLedger,
} from '../types.js';
import { makeClaimOps, type ClaimOps } from './claim.js';
import { makeDiscover } from './discover.js';
import { settleInSteps } from '../settle-steps.js';
import { PostgresExecutor, START_BUDGET_MS, type PostgresOptions } from './connection.js';
import { bumpQuery, countersQuery, readCounters, toAttemptTotals, toTotals } from './counters.js';
import { forgetUnseenQuery, makeFinishOps, type FinishOps } from './finish.js';
import { beatingRunsQuery, heartbeatQuery } from './heartbeat.js';
import { JOB_KEY, LedgerOwnedByAnotherJob } from '../identity.js';
import { adoptJob, getMetaQuery } from './meta.js';
import { migrate } from './migrate.js';
import { ident } from './query.js';
import { checkReadableSchema, countsQuery, deadPageQuery, getQuery, listDeadQuery, type ItemRow } from './read.js';
import { deadPages } from '../dead-pages.js';
import { makeRecoverOps, type RecoverOps } from './recover.js';
import * as runs from './runs.js';
import { makeRequeueOps, type RequeueOps } from './requeue.js';
import { finishedPages, type FinishedFilter, type FinishedItem, type ItemPeek } from '../requeue-types.js';
import { forgetMissingQuery, markMissingQuery, pruneEventsQuery, pruneRunsQuery } from './prune.js';
import type { MarkMissingOptions, MarkMissingStep, PruneEventsOptions, PruneRunsOptions, ReclaimedSpace } from '../retention.js';

export { DEFAULT_SCHEMA } from './query.js';
export type { PostgresOptions } from './connection.js';

/**
 * Open the PostgreSQL ledger: a connection pool, and the schema brought up to date
 * (numbered migrations under an advisory lock, so pods starting together do not race).
 * A database that cannot be reached within `startBudgetMs` is an error naming host,
 * database and schema, never the password. `readOnly`: no migration, sessions refuse
 * writes, and the schema must be this cronsafe's version (checkReadableSchema).
 */
export async function openPostgresLedger(opts: PostgresOptions & { job?: string }): Promise<PostgresLedger> {
  ident(opts.schema); // a bad name fails here, before any connection
  const { job } = opts;
  const ex = new PostgresExecutor(opts);
  try {
    const budget = opts.startBudgetMs ?? START_BUDGET_MS;
    if (opts.readOnly) await ex.tx('open read-only', (exec) => checkReadableSchema(exec, opts.schema), budget);
    else await ex.tx('migrate', (exec) => migrate(exec, opts.schema), budget);
    // `job`: the config name; recorded as the schema's owner on first use, refused when
    // another is recorded (LedgerOwnedByAnotherJob). Absent: no check (tools, tests).
    // Read-only: checked, never recorded.
    if (job !== undefined) {
      const owner = opts.readOnly
        ? await ex.query<{ value: string }>('readJob', getMetaQuery(opts.schema, JOB_KEY)).then((r) => r[0]?.value ?? job)
        : await ex.tx('adoptJob', (exec) => adoptJob(exec, opts.schema, job), budget);
      if (owner !== job) throw new LedgerOwnedByAnotherJob(owner, job);
    }
    return new PostgresLedger(ex);
  } catch (err) {
    await ex.close();
    throw err;
  }
}


/**
 * The Ledger on PostgreSQL, for many pods on one backlog. Every verb is one transaction
 * (retried with backoff on transient errors: connection loss, failover, deadlock,
 * serialization failure); SQL builders are pure functions in the sibling modules.
 */
export class PostgresLedger implements Ledger, SharedPassLedger {
  readonly shared = true;
  readonly #ex: PostgresExecutor;
  readonly #schema: string;
  readonly #claim: ClaimOps;
  readonly #discover: (items: DiscoveredItem[], opts: DiscoverOptions) => Promise<string[]>;
  readonly #finish: FinishOps;
  readonly #recover: RecoverOps;
  readonly #requeue: RequeueOps;

  constructor(ex: PostgresExecutor) {
    this.#ex = ex;
    this.#schema = ex.opts.schema;
    this.#claim = makeClaimOps(ex, this.#schema);
    this.#discover = makeDiscover(ex, this.#schema);
    this.#finish = makeFinishOps(ex, this.#schema);
    this.#recover = makeRecoverOps(ex, this.#schema);
    this.#requeue = makeRequeueOps(ex, this.#schema);
  }

  /** The schema this ledger lives in. */
  get schema(): string {
    return this.#schema;
  }

  async migrate(): Promise<void> {
    await this.#ex.tx('migrate', (exec) => migrate(exec, this.#schema));
  }
  discover(items: DiscoveredItem[], opts: DiscoverOptions): Promise<string[]> {
    return this.#discover(items, opts);
  }
  claim(ids: string[], opts: ClaimOptions): Promise<Claim[]> {
    return this.#claim.claim(ids, opts);
  }
  forget(claims: Claim[], now: number): Promise<FenceOutcome[]> {
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
  settle(s: Settlement, now: number, claim?: { ids: string[]; opts: ClaimOptions }, random?: () => number): Promise<SettleOutcome> {
    return settleInSteps(this, s, now, claim, random);
  }
  /**
   * Failures, hand-backs and forgotten items first, one statement each (rare); then the
   * completions and the claim in ONE statement on the claim session (asynchronous commit):
   * one round trip and no WAL flush wait per group of freed slots.
   */
  async settleOffered(
    s: Settlement,
    now: number,
    offer: { ids: string[]; opts: ClaimOptions & { limit: number; exclude?: readonly string[] } },
    random?: () => number,
  ): Promise<SettleOutcome & { considered: number }> {
    const rare = s.fail.length + s.release.length + s.gone.length > 0;
    const rest = rare ? await settleInSteps(this, { ...s, complete: [] }, now, undefined, random) : { fail: [], release: [], gone: [] };
    const { complete, claims, considered } = await this.#claim.settleOffered(s.complete, offer.ids, { ...offer.opts, now });
    return { fail: rest.fail, release: rest.release, gone: rest.gone, complete, claims, considered };
  }
  claimDue(opts: ClaimOptions & { limit: number; exclude?: readonly string[] }): Promise<Claim[]> {
    return this.#claim.claimDue(opts);
  }
  siblings(passId: string, owner: string, now: number): Promise<PassSiblings> {
    return this.#claim.siblings(passId, owner, now);
  }
  nextDueAt(runId: string): Promise<number | null> {
    return this.#claim.nextDueAt(runId);
  }
  complete(claims: Claim[], now: number): Promise<FenceOutcome[]> {
    return this.#finish.complete(claims, now);
  }
  fail(failures: Failure[], opts: FailOptions): Promise<FenceOutcome[]> {
    return this.#finish.fail(failures, opts);
  }
  release(claims: Claim[], now: number, reason: string): Promise<FenceOutcome[]> {
    return this.#finish.release(claims, now, reason);
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
  reclaimOrphans(exceptOwner: string, opts: ReclaimOptions): Promise<number> {
    return this.#recover.reclaimOrphans(exceptOwner, opts);
  }
  /**
   * Claims whose lease ended before `opts.now` (their run stopped renewing: it died, or
   * lost the database for longer than a lease) go back to pending, or dead when charged
   * >= maxAttempts; only the pass `opts.passId`'s when given. Live pods renew well before
   * expiry, so their claims are never taken.
   */
  reclaimExpired(opts: ReclaimOptions & { passId?: string }): Promise<number> {
    return this.#recover.reclaimExpired(opts);
  }
  /** Other pods of the pass may be alive: only claims whose lease expired are abandoned. */
  reclaimAbandoned(_owner: string, opts: ReclaimOptions): Promise<number> {
    return this.reclaimExpired(opts);
  }
  async counts(): Promise<ItemCounts> {
    const [c] = await this.#ex.query<ItemCounts>('counts', countsQuery(this.#schema));
    return { pending: c?.pending ?? 0, claimed: c?.claimed ?? 0, done: c?.done ?? 0, dead: c?.dead ?? 0 };
  }
  async get(id: string): Promise<ItemRecord | null> {
    const [r] = await this.#ex.query<ItemRow>('get', getQuery(this.#schema, wellFormed(id)));
    return r === undefined ? null : toItemRecord(r);
  }
  listDead(limit?: number): Promise<DeadItem[]> {
    return this.#ex.query<DeadItem>('listDead', listDeadQuery(this.#schema, limit ?? null));
  }
  deadPages(query?: DeadQuery): AsyncIterable<DeadItem[]> {
    return deadPages((after, n) => this.#ex.query<DeadItem>('deadPages', deadPageQuery(this.#schema, after.at, after.id, n)), query);
  }
  retryDead(ids: string[] | 'all', now: number): Promise<number> {
    return this.#recover.retryDead(ids, now);
  }
  async startRun(run: { runId: string; owner: string; startedAt: number; scheduledFor?: number | null }): Promise<void> {
    await this.#ex.tx('startRun', (exec) => exec(runs.startRunQuery(this.#schema, run)));
  }
  async finishRun(runId: string, finishedAt: number, outcome: RunOutcome, counts: Record<string, number>): Promise<void> {
    const rows = await this.#ex.tx('finishRun', (exec) => exec(runs.finishRunQuery(this.#schema, runId, finishedAt, outcome, counts)));
    if (rows.length === 0) throw new Error(`finishRun: no run ${runId} was started in this ledger`);
  }
  async recentRuns(limit: number): Promise<RunRecord[]> {
    return (await this.#ex.query<runs.RunRow>('recentRuns', runs.recentRunsQuery(this.#schema, limit))).map(runs.toRunRecord);
  }
  async lastRunStart(): Promise<RunStart | null> {
    const [r] = await this.#ex.query<RunStart>('lastRunStart', runs.lastRunStartQuery(this.#schema));
    return r ?? null;
  }
  async heartbeat(runId: string, at: number): Promise<void> {
    await this.#ex.query('heartbeat', heartbeatQuery(this.#schema, runId, at));
  }
  beatingRuns(since: number): Promise<RunHeartbeat[]> {
    return this.#ex.query<RunHeartbeat>('beatingRuns', beatingRunsQuery(this.#schema, since));
  }
  async markRunsDied(before: number): Promise<string[]> {
    const rows = await this.#ex.tx('markRunsDied', (exec) => exec<{ run_id: string }>(runs.markDiedQuery(this.#schema, before)));
    return rows.map((r) => r.run_id);
  }
  async recordEvent(kind: LedgerEventKind, at: number, detail?: Record<string, unknown>, occurrence?: number): Promise<void> {
    const feeds = runs.EVENT_COUNTERS[kind] as (typeof runs.EVENT_COUNTERS)[LedgerEventKind] | undefined; // callers outside TypeScript
    if (feeds === undefined) throw new Error(`recordEvent: unknown event kind ${JSON.stringify(kind)}`);
    // null from callers outside TypeScript means "no occurrence", like undefined.
    if (occurrence != null && !Number.isSafeInteger(occurrence)) {
      throw new TypeError(`recordEvent: occurrence must be integer epoch milliseconds, got ${String(occurrence)}`);
    }
    const bump = bumpQuery(this.#schema, Object.fromEntries(feeds.map((n) => [n, 1])));
    await this.#ex.tx('recordEvent', async (exec) => {
      await exec(runs.recordEventQuery(this.#schema, kind, at, detail, occurrence ?? null));
      if (bump) await exec(bump);
    });
  }
  async countEvents(kind: LedgerEventKind, since?: number): Promise<number> {
    const [r] = await this.#ex.query<{ n: number }>('countEvents', runs.countEventsQuery(this.#schema, kind, since ?? Number.MIN_SAFE_INTEGER));
    return r?.n ?? 0;
  }
  async lastOccurrenceRecorded(): Promise<number | null> {
    const [r] = await this.#ex.query<{ o: number | null }>('lastOccurrenceRecorded', runs.lastOccurrenceQuery(this.#schema));
    return r?.o ?? null;
  }
  async totals(): Promise<LedgerTotals> {
    return toTotals(readCounters(await this.#ex.query('totals', countersQuery(this.#schema))));
  }
  async attemptTotals(): Promise<AttemptTotals> {
    return toAttemptTotals(readCounters(await this.#ex.query('attemptTotals', countersQuery(this.#schema))));
  }
  async runStats(): Promise<RunStats> {
    return runs.toRunStats(await this.#ex.query<runs.RunStatsRow>('runStats', runs.runStatsQuery(this.#schema)));
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
  async pruneRuns(opts: PruneRunsOptions): Promise<number> {
    const [r] = await this.#ex.tx('pruneRuns', (exec) => exec<{ n: number }>(pruneRunsQuery(this.#schema, opts)));
    return r?.n ?? 0;
  }
  async pruneEvents(opts: PruneEventsOptions): Promise<number> {
    const [r] = await this.#ex.tx('pruneEvents', (exec) => exec<{ n: number }>(pruneEventsQuery(this.#schema, opts)));
    return r?.n ?? 0;
  }
  async markMissing(opts: MarkMissingOptions): Promise<MarkMissingStep> {
    const [r] = await this.#ex.tx('markMissing', (exec) => exec<{ wrapped: boolean; marked: number }>(markMissingQuery(this.#schema, opts)));
    return { marked: r?.marked ?? 0, wrapped: r?.wrapped ?? true };
  }
  async forgetMissing(opts: { before: number; limit: number }): Promise<number> {
    const [r] = await this.#ex.tx('forgetMissing', (exec) => exec<{ n: number }>(forgetMissingQuery(this.#schema, opts.before, opts.limit)));
    return r?.n ?? 0;
  }
  /** Nothing to do: autovacuum makes deleted rows' space reusable; the table does not shrink by itself. */
  async reclaimSpace(): Promise<ReclaimedSpace> {
    return { freed: 0, free: 0, shrinkable: true };
  }
  /** Idempotent (memoized): a second close is a no-op. */
  close(): Promise<void> {
    return this.#ex.close();
  }
}
