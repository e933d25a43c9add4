import type { RequeueLedger } from './requeue-types.js';

/**
 * The ledger: the persistent record of every item's state. Two adapters (SQLite, the
 * embedded default; PostgreSQL, for many pods) implement this one interface and pass one
 * contract test suite (test/contract/).
 *
 * State machine (each transition one transaction with a guard):
 *   (new) --discover--> pending --claim--> claimed --complete--> done
 * A claim is taken when a handler slot is free, just before the handler starts: `claimed`
 * means "an attempt is running (or was, when its run died)". Discovery alone claims
 * nothing, so items that only waited in the runner's channel cost no attempt when the
 * process dies (issue 9).
 *                                     claimed --fail--> pending (backoff) | dead
 *                                     claimed --release (drain)--> pending (attempt not charged)
 *                                     claimed --reclaimOrphans (crash)--> pending | dead
 *   dead --retryDead--> pending (attempts reset)
 *   done | dead --discover with a refresh policy--> pending (new cycle: attempts reset)
 *
 * Fencing: a claim is identified by (id, owner, attempt). complete/fail/release apply only
 * while the row is still `claimed` by that exact owner and attempt; otherwise the write is
 * rejected (returned as `fenced`) and never applied.
 */
import type { Claim, ClaimOptions, DeadItem, DeadQuery, DiscoveredItem, DiscoverOptions, FailOptions, Failure, FenceOutcome, ItemCounts, ItemRecord, ReclaimOptions, Settlement, SettleOutcome } from './item-types.js';
import type { AttemptTotals, LedgerEventKind, LedgerTotals, PassSiblings, RunHeartbeat, RunOutcome, RunRecord, RunStart, RunStats } from './run-types.js';
import type { RetentionLedger } from './retention.js';
import type { ScheduleRecord } from './schedule-record.js';

export type { ItemState } from './item-state.js';
export type * from './item-types.js';
export * from './run-types.js';

/**
 * What `cronsafe schedule` reads of a ledger: the latest run's start, which every schema
 * version holds (a Ledger, or a ledger of an older schema read as it is: Store.openRunStarts).
 */
export type RunStartReader = Pick<Ledger, 'lastRunStart' | 'close'>;

/**
 * A ledger that many pods of one pass share (PostgreSQL). The pass id (`runId` of the claim
 * and discover options) is then the run group: every pod marks what it scans with it, and
 * any pod may claim any pending item of the pass, whoever scanned it.
 *
 * Claims are committed asynchronously (no wait for the WAL flush): a crash of the database
 * server (never a pod crash) can forget the latest ones, with the completions written
 * with them. A forgotten claim is pending again with its old attempt count, so the same
 * owner re-claiming it would get the same fencing token while its first attempt may still
 * run: callers never offer or sweep ids they hold (`exclude`). A forgotten completion is a
 * claim of its owner again, one it no longer holds: siblings() hands such claims back.
 */
export interface SharedPassLedger {
  /**
   * settle() with the claim made from an offer: write the results, then claim at most
   * `limit` items: first those of `offer.ids` (candidate ids in the caller's order, none of
   * them held by the caller) still claimable, the first ones first; when they fall short,
   * the pass's other due pending items, as claimDue takes them, never one of `exclude`.
   * Rows other pods hold are skipped. Offering more ids than `limit` lets a pod pass over
   * candidates a sibling just took. `considered`: how many of the offered ids (from the
   * front) the claim looked at: up to the last one claimed when it reached its limit with
   * them; otherwise all of them, or the prefix the adapter looks at (PostgreSQL: 4x the
   * limit, at least 32). The rest may be offered again; those looked at and not claimed
   * were not claimable.
   */
  settleOffered(
    s: Settlement,
    now: number,
    offer: { ids: string[]; opts: ClaimOptions & { limit: number; exclude?: readonly string[]; suspects?: boolean } },
    random?: () => number,
  ): Promise<SettleOutcome & { considered: number }>;
  /**
   * Claims of the pass `passId` held by owners other than `owner`, by lease; and, first,
   * every claim `owner` holds handed back (not charged): call it only when the caller holds
   * nothing, so those are claims whose commit it never heard of (a lost acknowledgement) or
   * whose completion a database crash forgot.
   */
  siblings(passId: string, owner: string, now: number): Promise<PassSiblings>;
  /** Claims whose lease expired before `opts.now` (only the pass `passId`'s when given): back to pending (charged), or dead; done as in reclaimOrphans. */
  reclaimExpired(opts: ReclaimOptions & { passId?: string }): Promise<number>;
}

/** A store whose passes many runs share (Ledger.shared), with the verbs that sharing needs. */
export const sharesPass = (ledger: Ledger): ledger is Ledger & SharedPassLedger => ledger.shared;

export interface Ledger extends RequeueLedger, RetentionLedger {
  /**
   * True when many runs (pods) take part in one pass on this store at once (PostgreSQL):
   * a claim of another owner may then be live. False when a run holds the store alone
   * under its run lock (SQLite). The one place that says so: the runner, the recovery and
   * the lock ask here, never by the store's kind.
   */
  readonly shared: boolean;
  /** Apply numbered migrations; idempotent. */
  migrate(): Promise<void>;

  /**
   * Upsert discovered items (new ones become `pending`) and return, in batch order and
   * without repeats, the ids claimable now (pending and past their backoff). Claims
   * nothing. Done/dead/claimed/backing-off items are skipped cheaply. Marks them as seen
   * by `opts.runId`: all of them on SQLite; on a shared store (PostgreSQL) only the pending
   * ones, so that N pods scanning one source do not rewrite every other row N times (the
   * sweep, claimDue, takes only pending items; test/unit/ledger-model.test.ts models both).
   */
  discover(items: DiscoveredItem[], opts: DiscoverOptions): Promise<string[]>;

  /**
   * Claim, in the order given, those of `ids` still pending and past their backoff: each
   * claim is an attempt that starts now (counted). Call it when handler slots are free,
   * for at most that many ids; ids no longer claimable are left out of the result.
   */
  claim(ids: string[], opts: ClaimOptions): Promise<Claim[]>;

  /**
   * Claim pending items seen by `opts.runId` whose backoff has passed (end-of-scan retry
   * sweep), never one of `exclude` (ids the caller holds; see SharedPassLedger for why).
   */
  claimDue(opts: ClaimOptions & { limit: number; exclude?: readonly string[] }): Promise<Claim[]>;

  /** Earliest availableAt among pending items seen by runId, or null. */
  nextDueAt(runId: string): Promise<number | null>;

  /** claimed -> done, fenced. */
  complete(claims: Claim[], now: number): Promise<FenceOutcome[]>;

  /** claimed -> pending with backoff, or dead when charged >= maxAttempts; fenced. */
  fail(failures: Failure[], opts: FailOptions): Promise<FenceOutcome[]>;

  /**
   * claimed -> (no row): the item's file is gone (deleted between the scan and its
   * attempt); forgotten, not dead-lettered. Rediscovered as new should it come back. Fenced.
   */
  forget(claims: Claim[], now: number): Promise<FenceOutcome[]>;

  /**
   * pending -> (no row) for every pending item the pass `passId` did not see: after a
   * complete scan, their files are gone (deleted between runs). Counted as gone. Claimed,
   * done and dead rows are kept. Returns how many were forgotten. `limit` (SQLite): at
   * most this many, in one transaction; the runner calls it again until a call finds none,
   * so a deleted backlog of a million items never holds the write lock, the event loop or
   * a stop for long. PostgreSQL forgets them all in one statement (a million in ~3 s,
   * the run's event loop and other writers free meanwhile): limited steps there re-walked
   * the index entries of the rows deleted before them, 10x slower.
   */
  forgetUnseen(passId: string, limit?: number): Promise<number>;

  /**
   * claimed -> pending, attempt not charged (drain hand-back); fenced. `unstarted`: the
   * claims' handlers never started (a stop came while the claim was being written), so the
   * claim is undone: no attempt is counted and the last error is kept.
   */
  release(claims: Claim[], now: number, reason: string, unstarted?: boolean): Promise<FenceOutcome[]>;

  /**
   * Write finished attempts' results (fenced, exactly as complete / fail / release do),
   * then claim `claim.ids` (as claim() does), in one transaction where the adapter can:
   * the runner claims for the slots its finished attempts freed, so one commit records
   * those results and starts their successors. `random` as in FailOptions.
   */
  settle(s: Settlement, now: number, claim?: { ids: string[]; opts: ClaimOptions }, random?: () => number): Promise<SettleOutcome>;

  /** Extend leases of claims still held by owner; returns ids no longer held. */
  renew(owner: string, ids: string[], leaseUntil: number): Promise<string[]>;

  /**
   * Claims not owned by `exceptOwner` are orphans (the caller holds the run lock, so no
   * other run is alive): back to pending, or dead when charged >= maxAttempts; done when
   * `opts.committed` says the attempt's output was committed. Returns how many moved.
   */
  reclaimOrphans(exceptOwner: string, opts: ReclaimOptions): Promise<number>;

  /**
   * Crash recovery at the start of a run: the claims this run may take over as abandoned.
   * On a store a run holds alone (SQLite, under its run lock), every claim not owned by
   * `owner` (reclaimOrphans); on a shared one, only those whose lease expired (a live pod
   * renews well before). Back to pending (charged), dead, or done by a committed output.
   */
  reclaimAbandoned(owner: string, opts: ReclaimOptions): Promise<number>;
  /**
   * The run `owner` was asked to stop (an operator's SIGTERM, SIGINT or SIGHUP: its drain
   * began). Should it be killed before it hands its claims back (a pod whose grace period is
   * shorter than drain.gracePeriodSeconds), the run that reclaims them hands them back
   * uncharged, as the drain would have: the kill came from outside, not from their items.
   * SQLite: the next run's reclaim, under the run lock; PostgreSQL: whoever reclaims them once
   * their lease expired (a row per pod told to stop, kept while it holds claims).
   */
  recordStopRequested?(owner: string): Promise<void>;
  /**
   * SQLite, the run's connection: from now until called again with undefined, a verb that
   * waits for another process's write lock (in slices, as the run's connection does) ends its
   * wait once `stop` aborts, with StoppedBeforeLedger and nothing written. For the run's
   * start-up writes, before its pass claims anything (the reclaim, the runs that died, its
   * start): a stop drains the run (75) at once, as one during the open does, instead of after
   * the whole busy wait and a failure (exit 1); and for the pass's writes until its first
   * claim (the ledger itself then switches it off: a drain's hand-backs must still wait).
   * PostgreSQL: absent.
   */
  stopEndsWaits?(stop: AbortSignal | undefined): void;

  counts(): Promise<ItemCounts>;
  get(id: string): Promise<ItemRecord | null>;
  listDead(limit?: number): Promise<DeadItem[]>;
  /**
   * Dead items in listDead's order (oldest deadAt first, then id), as pages of at most
   * `pageSize`, each read after the last (deadAt, id) of the one before, so memory holds
   * one page however many there are. Each page is its own read: an item retried or newly
   * dead while the caller iterates may be missed or seen, never seen twice. No empty pages.
   */
  deadPages(query?: DeadQuery): AsyncIterable<DeadItem[]>;
  /**
   * dead -> pending with attempts reset; `'all'` or ids. Returns how many moved (counted in
   * totals().requeued). `'all'` moves the items dead when it began (dead-lettered up to the
   * latest deadAt then: one a run dead-letters again meanwhile stays dead), a page
   * (RETRY_DEAD_PAGE) per transaction, oldest dead first, and tells `onPage` how many each
   * committed page moved: the pages before a signal stay moved, and the caller can say how many.
   */
  retryDead(ids: string[] | 'all', now: number, onPage?: (moved: number) => void): Promise<number>;

  startRun(run: { runId: string; owner: string; startedAt: number; scheduledFor?: number | null }): Promise<void>;
  finishRun(runId: string, finishedAt: number, outcome: RunOutcome, counts: Record<string, number>): Promise<void>;
  recentRuns(limit: number): Promise<RunRecord[]>;
  /**
   * The run with the latest startedAt (ties: the last started), whatever its outcome,
   * finished or not; null before the first. The daemon fires an occurrence only when
   * no run has started since it. With `atOrBefore` (epoch ms), only runs started by then
   * count (`cronsafe schedule --at` an earlier instant).
   */
  lastRunStart(atOrBefore?: number): Promise<RunStart | null>;
  /**
   * Whether any run was recorded for this occurrence (its scheduledFor, epoch ms), whatever its
   * outcome and however long ago it started among the runs kept. The daemon does not run an
   * occurrence twice after its wall clock was set back: a look through the latest 100 runs
   * missed those run more than 100 runs ago (a `* * * * *` job, a clock set back two hours).
   */
  occurrenceRan(occurrence: number): Promise<boolean>;
  /**
   * Record `directory` as the source this job's items are found in, and return the one
   * recorded before when it differs (null the first time and while it stays the same).
   * Items are keyed by id alone, so a second config with the same name and another source
   * (copy-paste) would have its items skipped as done, silently: the run warns instead.
   */
  recordSource(directory: string): Promise<string | null>;
  /**
   * Record `schedule` as the one this job's occurrences are counted under, unless the record
   * already names its expression and zone (then it is kept, with its `since`), and return the
   * record before (null: none yet, a ledger from before the record). src/ledger/schedule-record.ts.
   */
  recordSchedule(schedule: ScheduleRecord): Promise<ScheduleRecord | null>;

  /**
   * A live run says so every lease.renewSeconds: `at` becomes the run's heartbeat. Behind
   * the run lock, a start that finds another run still beating (its lock file was deleted
   * under it) skips instead of reclaiming that run's claims (src/runner/live-run.ts).
   */
  heartbeat(runId: string, at: number): Promise<void>;
  /** Unfinished runs whose heartbeat (startedAt before the first) is at or after `since`, newest first. */
  beatingRuns(since: number): Promise<RunHeartbeat[]>;
  /**
   * SQLite: the size in bytes of the ledger's write-ahead log when another connection's read
   * transaction keeps checkpoints from copying it back, so that it grows with every write;
   * null otherwise (sqlite/pinned-log.ts). The run asks at each heartbeat.
   */
  pinnedLog?(): Promise<number | null>;
  /**
   * SQLite: since when every run of this ledger takes the flock on the ledger file (when the
   * ledger reached the first schema no cronsafe from before that flock can open). A run started
   * earlier may be of such a cronsafe, which the flock does not keep out.
   */
  flockedRunsSince?(): Promise<number>;

  /**
   * Unfinished runs whose last sign of life (heartbeat, else start) is before `before`:
   * the caller has proved their owners dead (it holds the run lock and no run beats;
   * PostgreSQL: it started the pass alone, or their heartbeats are older than a lease).
   * Each gets outcome `died` and finishedAt = that last sign of life, so status stops
   * showing it as running. Returns their run ids.
   */
  markRunsDied(before: number): Promise<string[]>;

  /**
   * Record an event and bump the totals it feeds, in one transaction. `at` is when it
   * was recorded; `occurrence` (integer epoch ms; else a TypeError) the schedule occurrence
   * it is about, if any. Events are not de-duplicated: callers consult
   * lastOccurrenceRecorded() so as not to record an occurrence twice.
   */
  recordEvent(kind: LedgerEventKind, at: number, detail?: Record<string, unknown>, occurrence?: number): Promise<void>;

  /** Events of `kind` with `at >= since` still in the ledger (retention deletes old ones; totals() keeps counting them). */
  countEvents(kind: LedgerEventKind, since?: number): Promise<number>;

  /**
   * The latest occurrence (epoch ms) the ledger has accounted for: the greatest of every
   * run's scheduledFor and every event's occurrence (any kind, so an occurrence whose
   * start found the lock held is not later called missed); null if none. Occurrences after
   * it and before the current one are the missed ones.
   */
  lastOccurrenceRecorded(): Promise<number | null>;

  /** Monotonic. overruns = overrun and lock-skip events, one per occurrence named by both (pairedEventCounters); lockSkips, missed, stale = their events. */
  totals(): Promise<LedgerTotals>;
  /** Settled attempts ever, by result; each kept in the transaction of the write it counts. */
  attemptTotals(): Promise<AttemptTotals>;
  /** Runs by outcome, first/last start and last success, over the whole run history (pruned runs included). */
  runStats(): Promise<RunStats>;
  /**
   * Add to the handler-time histogram's rows (keys without HANDLER_TIMES, whole numbers), in one
   * transaction: the histogram lives in the ledger so that it keeps counting across runs
   * (src/metrics/handler-times.ts).
   */
  addHandlerTimes(bumps: Record<string, number>): Promise<void>;
  /** The handler-time histogram's rows, as addHandlerTimes names them. */
  handlerTimes(): Promise<Record<string, number>>;

  close(): Promise<void>;
}
