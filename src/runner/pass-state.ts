import type { Logger } from 'pino';
import type { Config } from '../config/types.js';
import { sharesPass, type Claim, type ClaimOptions, type DiscoveredItem, type Ledger, type RefreshPolicy, type RetryPolicy, type RunOutcome, type Settlement } from '../ledger/types.js';
import { StoppedBeforeLedger } from '../ledger/run-lock.js';
import type { AttemptSignal } from './attempt-signal.js';
import { Channel } from './channel.js';
import { Drain } from './drain.js';
import { sourceGone, type FailureScene } from './failure.js';
import type { OutputStore } from './output.js';
import type { ProgressSnapshot } from './progress.js';
import type { PruneReport } from './prune.js';
import type { AttemptOutcome, ResultBatcher, ResultCounts } from './results.js';
import { ownIdentities, realRootOf, sourceIdentity, sourceReplaced, type SourceId } from './scan.js';
import { ownFiles } from './own-files.js';
import type { Handler } from './types.js';

export interface PassDeps {
  config: Config;
  ledger: Ledger;
  handler: Handler;
  outputs?: OutputStore;
  log: Logger;
  runId: string;
  /**
   * The pass this run takes part in: what its scan marks and its sweep claims. The run
   * itself by default (SQLite: one run per pass); on PostgreSQL the run group, shared by
   * every pod of the pass (src/ledger/postgres/run-lock.ts).
   */
  passId?: string;
  owner: string;
  /** First signal: stop claiming and drain. */
  stop: AbortSignal;
  /** Second signal: abort in-flight items at once. */
  force: AbortSignal;
  /** Injected clock (epoch ms). */
  now?: () => number;
  /** Items to offer; default: a lazy scan of source.directory. */
  source?: AsyncIterable<DiscoveredItem>;
  progressIntervalMs?: number;
  /** Metrics hook: told about every attempt and able to read live gauges. */
  observer?: PassObserver;
  /** Which finished items are outstanding again (schedule.refresh). */
  refresh?: RefreshPolicy;
  /**
   * Commit an output only while its claim's lease, as this pod knows it (from the claim,
   * or the last renewal that reached the ledger), has not run out. Default: on a shared
   * pass (PostgreSQL), where a sibling takes over a claim whose lease expired; under
   * SQLite's run lock nobody can.
   */
  leaseGuardsOutputs?: boolean;
  /**
   * Asked synchronously before each claim; it may stop the run (deps.stop): a Kubernetes
   * Lease whose duration passed while the event loop was blocked, before its timer ran.
   */
  beforeClaim?: () => void;
}

/** What a metrics module sees of a pass (src/metrics). */
export interface PassObserver {
  /** One settled attempt, after its ledger write committed. `durationMs` is the handler's time. */
  attempt(outcome: AttemptOutcome, durationMs: number): void;
  /** Called once at the start with a function returning live gauges. */
  live?(read: () => ProgressSnapshot): void;
  /** An item was dead-lettered (its ledger write committed): for Kubernetes Events, which may name the id. */
  deadLettered?(id: string, error: string): void;
}

/** How a pass ends: the run outcomes a pass itself can reach (the others are the run's). */
export type PassOutcome = Extract<RunOutcome, 'completed' | 'drained' | 'failed'>;

export type ScanResult = 'complete' | 'partial' | 'incomplete';

export interface PassResult {
  outcome: PassOutcome;
  /** `noOutput`: attempts whose handler succeeded but wrote nothing to `{output}` (with output.directory). */
  counts: ResultCounts & { scanned: number; claimed: number; skippedDirectories: number; noOutput: number };
  /** `partial` when the scan skipped directories it could not read (their items wait). */
  scan: ScanResult;
  error?: Error;
  /** What retention pruned at the end of the pass (absent: skipped, the pass stopped or failed). */
  pruned?: PruneReport;
}

/**
 * The outcome of a pass from what it saw. Completed: the scan finished and nothing this
 * pass saw is due any more. The sweep proves it (attempts handed back without a stop, e.g.
 * when our temp directory vanished, are claimed again by it); after a stop, the ledger is
 * asked (`dueLeft`): a stop that came once everything was done still left nothing to do
 * (exit 0, not 75), while hand-backs are due.
 */
export function passOutcome(s: { error: Error | undefined; scanComplete: boolean; sweepComplete: boolean; dueLeft: boolean }): PassOutcome {
  if (s.error) return 'failed';
  return s.scanComplete && (s.sweepComplete || !s.dueLeft) ? 'completed' : 'drained';
}

export const scanResult = (scanComplete: boolean, skippedDirectories: number): ScanResult =>
  !scanComplete ? 'incomplete' : skippedDirectories > 0 ? 'partial' : 'complete';

/** The retry policy of a config, in milliseconds. */
export function retryPolicy(config: Config): RetryPolicy {
  return {
    maxAttempts: config.retry.maxAttempts,
    backoffMs: config.retry.backoffSeconds * 1000,
    backoffMaxMs: config.retry.backoffMaxSeconds * 1000,
  };
}

/** For claims taken back from a run that is gone (at start, or a lease that expired): resumed at once, the attempt still charged. */
/**
 * How long the root's answer of the check before a result write stands for the start of the
 * claims that write made (PassState.rootReplacedAtStart): a SQLite transaction's time.
 */
export const ROOT_ANSWER_MS = 1;

export const resumeAtOnce = (retry: RetryPolicy): RetryPolicy => ({ ...retry, backoffMs: 0, backoffMaxMs: 0 });

/**
 * One pass's settings, parts and progress: what its producer (produce.ts), dispatcher
 * (dispatch.ts) and attempts (attempt.ts) share. runPass (pass.ts) makes it and wires the parts.
 */
export class PassState {
  readonly config: Config;
  readonly ledger: Ledger;
  readonly handler: Handler;
  readonly outputs: OutputStore | undefined;
  readonly log: Logger;
  readonly now: () => number;
  readonly owner: string;
  readonly passId: string;
  /** A pass shared by the pods of a run group (PostgreSQL). */
  readonly shared: boolean;
  readonly retry: RetryPolicy;
  /** An id that would escape the output directory can never succeed: dead at once. */
  readonly deadAtOnce: RetryPolicy;
  readonly leaseMs: number;
  /**
   * [lease guard] A pod cut off from the ledger for longer than a lease keeps running its
   * handlers, but a sibling may have taken their items over by then (reclaimExpired): a late
   * rename would overwrite the newer attempt's output. Each claim's lease as this pod knows
   * it: from the claim's write, or from the last renewal that reached the ledger (it renews
   * every claim the owner holds). Past it, the output is not committed.
   */
  readonly leaseGuard: boolean;
  readonly source: AsyncIterable<DiscoveredItem> | undefined;
  readonly refresh: RefreshPolicy | undefined;
  readonly debug: boolean;
  readonly drain: Drain;
  readonly beforeClaim?: () => void;
  /**
   * Candidate ids (discovered, claimable when found), not claims: an item is claimed only
   * when a handler slot is free for it, so what waits here costs no attempt if we die.
   */
  readonly channel: Channel<string>;
  /** The source root as the pass found it: an unmounted or replaced one is not "files gone". */
  readonly sourceAtStart: Promise<SourceId | null>;
  /** What judges a failed or missing item needs; outputFullSeen is set by the first attempt that finds the output file system full. */
  readonly scene: FailureScene;
  /** Set by runPass once made (its callbacks need this state). */
  results!: ResultBatcher;

  /** Claims of attempts started in this pass whose result is not written yet. */
  readonly held = new Map<string, Claim>();
  readonly inflight = new Map<string, AttemptSignal>();
  /** Handler time per attempt, until its result is written (for the duration histogram). */
  readonly durations = new Map<Claim, number>();
  readonly claimedAt = new Map<Claim, number>();
  /** Claims a renewal found taken over by another pod: their lease is lapsed, whatever renewedAt says. */
  readonly lost = new WeakSet<Claim>();
  scanned = 0;
  claimed = 0;
  skippedDirectories = 0;
  noOutput = 0;
  /** Attempts whose output was committed: the handler writes outputs (attempt.ts). */
  committed = 0;
  scanComplete = false;
  sweepComplete = false;
  /** Set when a complete scan of the directory source proved which items exist (forgetUnseen). */
  wholeScan: { passId: string; startedAt: number } | undefined;
  error: Error | undefined;
  lastClaimAt = 0;
  renewedAt = Number.NEGATIVE_INFINITY;
  /** One wake-up list for the dispatcher: a task ended, a result was written, or a stop. */
  #waiters: Array<() => void> = [];

  constructor(deps: PassDeps) {
    const { config } = deps;
    this.config = config;
    this.ledger = deps.ledger;
    this.handler = deps.handler;
    this.outputs = deps.outputs;
    this.log = deps.log;
    this.now = deps.now ?? Date.now;
    this.owner = deps.owner;
    this.passId = deps.passId ?? deps.runId;
    this.shared = sharesPass(deps.ledger);
    this.retry = retryPolicy(config);
    this.deadAtOnce = { ...this.retry, maxAttempts: 1 };
    this.leaseMs = config.lease.seconds * 1000;
    this.leaseGuard = deps.leaseGuardsOutputs ?? this.shared;
    this.source = deps.source;
    this.refresh = deps.refresh;
    this.beforeClaim = deps.beforeClaim;
    this.debug = deps.log.isLevelEnabled('debug');
    this.drain = new Drain({
      stop: deps.stop,
      force: deps.force,
      gracePeriodMs: config.drain.gracePeriodSeconds * 1000,
      marginMs: config.drain.marginSeconds * 1000,
    });
    this.channel = new Channel<string>(config.queueSize);
    this.sourceAtStart = deps.source === undefined ? sourceIdentity(config.source.directory) : Promise.resolve(null);
    this.scene = {
      outputFullSeen: false,
      succeeded: false,
      outputDir: deps.outputs?.dir,
      source:
        deps.source === undefined
          ? sourceScene(config.source.directory, this.sourceAtStart, ownIdentities(ownFiles(config)))
          : undefined,
    };
    const source = this.scene.source;
    if (source !== undefined) void this.sourceAtStart.then((id) => (source.startId = id));
  }

  /** Wake the dispatcher. Called twice per attempt, mostly with nobody waiting: then it allocates nothing. */
  readonly notify = (): void => {
    if (this.#waiters.length === 0) return;
    const w = this.#waiters;
    this.#waiters = [];
    for (const f of w) f();
  };

  /** Resolves at the next notify(). */
  readonly changed = (): Promise<void> => new Promise<void>((resolve) => this.#waiters.push(resolve));

  readonly claimOpts = (): ClaimOptions & { runId: string } => {
    this.lastClaimAt = this.now();
    return { owner: this.owner, runId: this.passId, now: this.lastClaimAt, leaseMs: this.leaseMs };
  };

  leaseLapsed(claim: Claim): boolean {
    return this.lost.has(claim) || this.now() >= Math.max(this.claimedAt.get(claim) ?? 0, this.renewedAt) + this.leaseMs;
  }

  /**
   * Our own failure (the ledger, the scan): claim nothing more, end as failed. In-flight
   * attempts finish (until the drain deadline), as in stopForEnvironment: cut short, each
   * would need a hand-back the failing ledger may not take (a full disk), and the next run
   * would charge it as a dead run's claim. Finished, its committed output makes it done.
   */
  fail(err: unknown, msg: string, reason: string): void {
    // The run's stop ended a write's wait for another connection's write lock before the
    // pass's first claim (Ledger.stopEndsWaits: a sweep's claim in a pass that had nothing to
    // claim, a discovery): nothing was written and nothing is held, so the pass drains. It
    // ended as failed, exit 1, counted toward the Job's backoffLimit.
    if (err instanceof StoppedBeforeLedger) {
      this.log.info({ reason: err.message }, 'drain: a write waiting for the ledger ended by the stop (nothing claimed)');
      this.drain.requestStop(reason);
      this.channel.close();
      return;
    }
    const e = err instanceof Error ? err : new Error(String(err));
    this.error ??= e;
    this.log.error({ err: e }, msg);
    this.drain.requestStop(reason);
    this.channel.close();
  }

  /**
   * Whether the source root is another directory than the pass's scan found (a link
   * repointed, the directory renamed away and another made at its path, unmounted): one
   * stat(2). Asked before a batch of claims starts (dispatch.ts), before each result batch
   * is written (rootCheckedBeforeWrite) and before an output is committed (attempt.ts).
   */
  rootReplaced(): boolean {
    const source = this.scene.source;
    return source !== undefined && sourceReplaced(source.directory, source.startId);
  }

  /**
   * When the root was last found in place by the check before a result write
   * (rootCheckedBeforeWrite), on the monotonic clock; taken by the first start after it.
   */
  #rootInPlaceAt: number | undefined;

  /**
   * rootReplaced, asked just before a batch of claims starts (dispatch.ts). The claims come
   * back from the write that carried the results of the attempts that freed their slots, and
   * that write asked the root just before its transaction: found in place less than
   * ROOT_ANSWER_MS ago (a SQLite write, in this process), that answer is the start's too,
   * once. Otherwise (no completions in the write, a PostgreSQL round trip, a write that
   * waited for SQLite's lock) the root is asked again. Either way a root replaced after the
   * answer is found by the check before the attempts' results are written.
   */
  rootReplacedAtStart(): boolean {
    const at = this.#rootInPlaceAt;
    this.#rootInPlaceAt = undefined;
    if (at !== undefined && performance.now() - at < ROOT_ANSWER_MS) return false;
    return this.rootReplaced();
  }

  /**
   * Before a batch of results is written (ResultBatcher's beforeWrite): a root replaced since
   * the pass began may have been the one its handlers read, the other directory's files of the
   * same names, and a handler that exits 0 anyway would have its item recorded done, never
   * run. The check starts after every attempt of the batch ended, so it covers them all, at
   * one stat(2) per batch instead of one per attempt. Found replaced, the completions are
   * handed back uncharged (as the attempt's own check would have: judgeFailure's stop) and
   * the pass stops. Failures were judged after their handler ended by whereItWent, which asks
   * the root first; hand-backs and forgotten items charge nothing.
   */
  rootCheckedBeforeWrite(batch: Settlement): void {
    const source = this.scene.source;
    if (batch.complete.length === 0 || source === undefined) return;
    if (!this.rootReplaced()) {
      this.#rootInPlaceAt = performance.now();
      return;
    }
    const fault = sourceGone(source.directory);
    for (const claim of batch.complete) batch.release.push({ claim, reason: `not charged: ${fault.message}` });
    batch.complete = [];
    this.stopForEnvironment(fault);
  }

  /** The environment's fault: stop claiming, let in-flight attempts finish, end as failed (exit 1). */
  stopForEnvironment(err: Error, msg = 'the environment cannot run items; stopping the pass (nothing charged)'): void {
    if (this.error === undefined) this.log.error({ err }, msg);
    this.error ??= err;
    // Attempts that fail from now on are handed back uncharged (judgeFailure).
    this.scene.environmentStop ??= err.message;
    this.drain.requestStop(err.message);
  }
}

/** The scene's source: the root and its real path. */
function sourceScene(directory: string, atStart: Promise<SourceId | null>, own: SourceId[]): NonNullable<FailureScene['source']> {
  return { directory, atStart, realDirectory: realRootOf(directory), own };
}
