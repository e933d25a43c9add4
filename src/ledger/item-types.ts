import type { ItemState } from './item-state.js';

// Items, claims and their results: what the Ledger's item verbs take and give (types.ts).

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
  /**
   * Leave out of the result the items already attempted in this cycle (attempts > 0: a
   * failure, a run that died while the attempt ran, or a drain's hand-back). They stay
   * pending and seen by this pass, and its sweep (claimDue) claims them once the scan has
   * offered every fresh item. Were they offered as the scan finds them, a pod killed again
   * and again soon after its start (an eviction loop, a node going down) would start and
   * charge the same few items each time, and dead-letter them for kills, whatever their
   * handler did; behind the fresh items, the charges spread over the whole backlog. A drain
   * charges nothing, but items that outlast the time between drains would likewise take
   * every slot of every run, and the backlog behind them would never run. The unshared
   * store (SQLite) honours it; a shared pass (PostgreSQL) never asks: its pods claim from
   * each other's batches.
   */
  deferCharged?: boolean;
  /**
   * A shared pass (PostgreSQL): new ids of the result may be left unrecorded until this
   * pod's claim takes them (SharedPassLedger.settleOffered inserts them claimed: one row
   * write, not an insert and then a claim). The caller must then offer each id of the result
   * to settleOffered until a claim got past it; a claim that takes nothing records what is
   * left of them pending, so the caller may then drop its candidates. Every pod of a pass
   * scans the whole source, so a sibling that finds the same ids records them for itself.
   */
  recordOnClaim?: boolean;
  /**
   * Told of an item the ledger cannot hold, left out of the result (not recorded, never
   * claimed) instead of failing its whole batch: on PostgreSQL, an id too long for the
   * primary key's index (a btree entry is at most ~2.7 kB after compression: a path nested
   * deep with long, varied names). `reason` says why. `recorded`: a row for it exists (the
   * pending items' index holds the pass's run group beside the id, so an id recorded under a
   * shorter group is refused under a longer one): the pass did not see it, yet must not forget
   * it as gone.
   */
  onRefused?: (id: string, reason: string, recorded: boolean) => void;
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
  /**
   * Told of each item the reclaim dead-lettered (its abandoned attempt was its last), once
   * the reclaim is committed: an item that kills the process every time ends dead here, not
   * in a settle, and would otherwise leave no log line and no event naming it.
   */
  onDeadLettered?: (id: string, error: string) => void;
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
  /** `unstarted`: its handler never started (Ledger.release). */
  release: Array<{ claim: Claim; reason: string; unstarted?: boolean }>;
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
