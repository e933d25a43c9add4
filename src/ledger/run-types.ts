// Runs, events and totals: what the Ledger's run-history and metrics verbs take and give (types.ts).

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
  /** Claims whose lease expired: their pod stopped renewing (killed). The pass's, and an earlier pass's (its last pods killed just before this pass began). */
  expired: number;
  /** Claims of the caller that it did not know of, handed back (see siblings()). */
  stray: number;
  /** An item of the pass is pending and due now, or within a second: a hand-back that came after the caller's last sweep. */
  due: boolean;
}
