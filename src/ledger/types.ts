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
import type { ItemState } from './item-state.js';
import type { RetentionLedger } from './retention.js';

export type { ItemState } from './item-state.js';

/** An item found by the source scan. */
export interface DiscoveredItem {
  id: string;
  size?: number;
  mtimeMs?: number;
}

/**
 * A claim the caller now holds: an attempt that starts now. `attempt` counts every claim
 * of this item, including this one (claims handed back by a drain included).
 */
export interface Claim {
  id: string;
  owner: string;
  attempt: number;
  /** Attempts that count toward dead-lettering (attempt minus those handed back by drain). */
  charged: number;
}

export interface RetryPolicy {
  maxAttempts: number;
  backoffMs: number;
  backoffMaxMs: number;
}

export interface DiscoverOptions {
  /**
   * The pass the scan belongs to: the end-of-scan sweep claims what this pass saw. The run
   * itself on SQLite; on PostgreSQL the run group, shared by every pod of the pass.
   */
  runId: string;
  /** Epoch ms (injected clock). */
  now: number;
  /**
   * Which finished items of this batch are outstanding again (config `schedule.refresh`;
   * absent or `{}`: `never`, done and dead are final). Applied in discover's transaction.
   */
  refresh?: RefreshPolicy;
}

export interface ClaimOptions {
  owner: string;
  /** The pass (see DiscoverOptions.runId); claimDue takes what this pass saw. */
  runId: string;
  /** Epoch ms (injected clock). */
  now: number;
  leaseMs: number;
}

/**
 * A refreshed item starts a new cycle as if new: pending and claimable at once,
 * attempts and released 0 (its next claim is attempt 1 with the whole retry budget),
 * doneAt and deadAt cleared; lastError kept. Both fields may be set: either revives.
 */
export interface RefreshPolicy {
  /**
   * `every-occurrence` (epoch ms, the current occurrence): a `done` item whose doneAt is
   * strictly before it is outstanding again. Done at or after it: stays done, so the runs
   * of one occurrence continue one sweep rather than restart it. Never revives `dead`.
   */
  doneBefore?: number;
  /**
   * `on-change`: a `done` or `dead` item is outstanding again when the size or mtimeMs
   * discovered now differs from the one recorded when it was last claimed (every claim
   * records the item's stat as last discovered). A field counts only when both values
   * are known: an item discovered without stat data never counts as changed. A finished
   * item whose claimed version has no stat (claimed without one) takes the stat seen now
   * as its baseline instead, so later changes count.
   */
  onChange?: boolean;
}

export interface FailOptions {
  now: number;
  retry: RetryPolicy;
  /** In [0,1); injected for deterministic tests. Default Math.random. */
  random?: () => number;
}

/**
 * Crash recovery (reclaimOrphans, reclaimExpired). `committed(id, claimedAt)`: whether the
 * abandoned attempt had already committed its output (renamed into place after the claim
 * at `claimedAt`, before its run died in the gap to the ledger write). Those claims are
 * completed, not charged as failures: the work was done, only the record of it was lost.
 */
export interface ReclaimOptions extends FailOptions {
  committed?: (id: string, claimedAt: number) => boolean;
}

export interface Failure {
  claim: Claim;
  error: string;
}

/** What happened to one fenced write. */
export type FenceOutcome =
  | { id: string; result: 'applied'; state: ItemState | 'gone'; availableAt?: number }
  | { id: string; result: 'fenced'; reason: string };

/** Results of finished attempts, written together (Ledger.settle). */
export interface Settlement {
  complete: Claim[];
  /** Failures, each with the retry policy it is judged by (an unsafe id is dead at once). */
  fail: Array<{ claim: Claim; error: string; retry: RetryPolicy }>;
  release: Array<{ claim: Claim; reason: string }>;
  /** Attempts whose item file is gone (deleted after the scan): dropped from the ledger. */
  gone: Claim[];
}

/** What settle() did: outcomes in the order of each list of the Settlement, and the new claims. */
export interface SettleOutcome {
  complete: FenceOutcome[];
  fail: FenceOutcome[];
  release: FenceOutcome[];
  gone: FenceOutcome[];
  claims: Claim[];
}

export interface ItemCounts {
  pending: number;
  claimed: number;
  done: number;
  dead: number;
}

export interface DeadItem {
  id: string;
  attempts: number;
  lastError: string | null;
  deadAt: number | null;
}

/** Which dead items Ledger.deadPages yields. */
export interface DeadQuery {
  /** Only items dead-lettered at or after this instant (epoch ms). */
  since?: number;
  /** At most this many. */
  limit?: number;
  /** Rows per round trip to the ledger (default 500). */
  pageSize?: number;
}

export interface ItemRecord {
  id: string;
  state: ItemState;
  attempts: number;
  released: number;
  owner: string | null;
  lastError: string | null;
  availableAt: number;
  leaseUntil: number | null;
  doneAt: number | null;
  size: number | null;
  mtimeMs: number | null;
}

/**
 * How a run ended. `died`: it never recorded an end (SIGKILL, OOM, node loss) and a later
 * run proved it dead (markRunsDied); its finishedAt is its last sign of life.
 */
export const RUN_OUTCOMES = ['completed', 'drained', 'failed', 'skipped-locked', 'stale', 'died'] as const;
export type RunOutcome = (typeof RUN_OUTCOMES)[number];

export interface RunRecord {
  runId: string;
  owner: string;
  startedAt: number;
  finishedAt: number | null;
  outcome: RunOutcome | null;
  /** Occurrence this run belongs to (epoch ms), when known. */
  scheduledFor: number | null;
  counts: Record<string, number> | null;
}

/** An unfinished run and when it last showed it was alive (see Ledger.beatingRuns). */
export interface RunHeartbeat {
  runId: string;
  /** `host:pid:runId`, as given to startRun. */
  owner: string;
  startedAt: number;
  /** Its last heartbeat, or startedAt before the first. */
  heartbeatAt: number;
}

/** The latest run started (see Ledger.lastRunStart). */
export interface RunStart {
  runId: string;
  startedAt: number;
  scheduledFor: number | null;
}

/**
 * Low-volume events recorded for operators and for metrics that must survive pods.
 * `lock-skip`: a start found the run lock held. `overrun`: an occurrence came due while
 * a run was active. `missed`: an occurrence no run started for. `stale`: a fire too old
 * to run (outside `schedule.graceSeconds`), skipped.
 */
export type LedgerEventKind = 'lock-skip' | 'overrun' | 'missed' | 'stale';

/** Monotonic totals kept in the ledger (metrics read these, not process memory). */
export interface LedgerTotals {
  deadLettered: number;
  overruns: number;
  lockSkips: number;
  /** `missed` events recorded. */
  missed: number;
  /** `stale` events recorded. */
  stale: number;
  itemsDone: number;
  itemsFailed: number;
  /** Items put back to pending by an operator: `cronsafe requeue` and `dead-letter retry`. */
  requeued: number;
}

/**
 * Every settled attempt ever, by how it ended (monotonic; metrics read these so that
 * `cronsafe_items_processed_total` keeps counting across short-lived pods).
 */
export interface AttemptTotals {
  /** Completions applied (claimed -> done). */
  succeeded: number;
  /** Charged failures that left the item pending for a retry. */
  failed: number;
  /** Charged failures that dead-lettered the item (= LedgerTotals.deadLettered). */
  dead: number;
  /** Attempts handed back by a drain (not charged). */
  released: number;
  /** Items dropped because their file was gone (deleted after the scan), not charged. */
  gone: number;
  /** Result writes rejected by the fence (the claim had moved on). */
  fenced: number;
}

/** The run history, aggregated (for metrics and alerts). */
export interface RunStats {
  /**
   * Finished runs by outcome. Starts that found the lock held are not runs (they are
   * events: LedgerTotals.lockSkips). Monotonic: runs that retention deletes are folded into
   * totals first (src/ledger/retention.ts).
   */
  byOutcome: Record<RunOutcome, number>;
  /** startedAt of the oldest / newest run (finished or not), or null before the first run. */
  firstStartedAt: number | null;
  lastStartedAt: number | null;
  /** finishedAt of the newest run whose outcome is `completed`, or null if none ever was. */
  lastSuccessAt: number | null;
}

/** Where the other pods of a pass stand (SharedPassLedger.siblings). */
export interface PassSiblings {
  /** Claims of the pass other owners hold with a live lease: attempts that may come back. */
  live: number;
  /** Claims of the pass whose lease expired: their pod stopped renewing (killed). */
  expired: number;
  /** Claims of the caller that it did not know of, handed back (see siblings()). */
  stray: number;
}

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
    offer: { ids: string[]; opts: ClaimOptions & { limit: number; exclude?: readonly string[] } },
    random?: () => number,
  ): Promise<SettleOutcome & { considered: number }>;
  /**
   * Claims of the pass `passId` held by owners other than `owner`, by lease; and, first,
   * every claim `owner` holds handed back (not charged): call it only when the caller holds
   * nothing, so those are claims whose commit it never heard of (a lost acknowledgement) or
   * whose completion a database crash forgot.
   */
  siblings(passId: string, owner: string, now: number): Promise<PassSiblings>;
  /** Claims of the pass whose lease expired before `opts.now`: back to pending (charged), or dead; done as in reclaimOrphans. */
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
   * nothing. Done/dead/claimed/backing-off items are skipped cheaply. Marks all as seen
   * by `opts.runId`.
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
   * done and dead rows are kept. Returns how many were forgotten.
   */
  forgetUnseen(passId: string): Promise<number>;

  /** claimed -> pending, attempt not charged (drain hand-back); fenced. */
  release(claims: Claim[], now: number, reason: string): Promise<FenceOutcome[]>;

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
  /** dead -> pending with attempts reset; `'all'` or ids. Returns how many moved (counted in totals().requeued). */
  retryDead(ids: string[] | 'all', now: number): Promise<number>;

  startRun(run: { runId: string; owner: string; startedAt: number; scheduledFor?: number | null }): Promise<void>;
  finishRun(runId: string, finishedAt: number, outcome: RunOutcome, counts: Record<string, number>): Promise<void>;
  recentRuns(limit: number): Promise<RunRecord[]>;
  /**
   * The run with the latest startedAt (ties: the last started), whatever its outcome,
   * finished or not; null before the first. The daemon fires an occurrence only when
   * no run has started since it.
   */
  lastRunStart(): Promise<RunStart | null>;

  /**
   * A live run says so every lease.renewSeconds: `at` becomes the run's heartbeat. Behind
   * the run lock, a start that finds another run still beating (its lock file was deleted
   * under it) skips instead of reclaiming that run's claims (src/runner/live-run.ts).
   */
  heartbeat(runId: string, at: number): Promise<void>;
  /** Unfinished runs whose heartbeat (startedAt before the first) is at or after `since`, newest first. */
  beatingRuns(since: number): Promise<RunHeartbeat[]>;

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

  /** Monotonic. overruns = overrun events + lock-skip events; lockSkips, missed, stale = their events. */
  totals(): Promise<LedgerTotals>;
  /** Settled attempts ever, by result; each kept in the transaction of the write it counts. */
  attemptTotals(): Promise<AttemptTotals>;
  /** Runs by outcome, first/last start and last success, over the whole run history (pruned runs included). */
  runStats(): Promise<RunStats>;

  close(): Promise<void>;
}
