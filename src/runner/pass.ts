import path from 'node:path';
import pLimit from 'p-limit';
import type { Logger } from 'pino';
import type { Config } from '../config/types.js';
import { sharesPass, type Claim, type DiscoveredItem, type Ledger, type RefreshPolicy, type RetryPolicy } from '../ledger/types.js';
import { Channel } from './channel.js';
import { AbortReason, Drain } from './drain.js';
import { checkItemId, type OutputStore } from './output.js';
import { EnvironmentFault } from './faults.js';
import { judgeFailure, whereItWent, type FailureScene, type FailureVerdict } from './failure.js';
import { isPlainId, itemPaths } from './item-id.js';
import { Progress, type ProgressSnapshot } from './progress.js';
import { ResultBatcher, type AttemptOutcome, type ResultCounts } from './results.js';
import { batches, itemGone, scanSource, sourceIdentity, sourcePresent } from './scan.js';
import { startRenewal } from './renew.js';
import { waitForTasks } from './settle.js';
import { claimLoop } from './claim-loop.js';
import { HandlerFailure, type Handler, type HandlerContext, type WorkItem } from './types.js';
import { AttemptSignal } from './attempt-signal.js';
import { pruneLedger, type PruneReport } from './prune.js';

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
   * every pod of the pass (src/ledger/postgres/lock.ts).
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

export type PassOutcome = 'completed' | 'drained' | 'failed';

export interface PassResult {
  outcome: PassOutcome;
  /** `noOutput`: attempts whose handler succeeded but wrote nothing to `{output}` (with output.directory). */
  counts: ResultCounts & { scanned: number; claimed: number; skippedDirectories: number; noOutput: number };
  /** `partial` when the scan skipped directories it could not read (their items wait). */
  scan: 'complete' | 'partial' | 'incomplete';
  error?: Error;
  /** What retention pruned at the end of the pass (absent: skipped, the pass stopped or failed). */
  pruned?: PruneReport;
}

/** How many scanned items go to the ledger in one discovery transaction. */
const DISCOVER_BATCH = 256;
/** Results per ledger write, at most (a batch is also written 20 ms after its first result). */
const MAX_BATCH = 128;

/**
 * One pass over the backlog: scan lazily -> discover in batches -> bounded channel of
 * candidate ids -> claims for free handler slots (claim-loop.ts) -> at most `concurrency`
 * handlers (p-limit) -> batched, fenced results. Then a sweep for the pass's items that are
 * due again (failures past their backoff, hand-backs). Never throws: a ledger
 * failure ends the pass as `failed` after in-flight work is stopped.
 */
export async function runPass(deps: PassDeps): Promise<PassResult> {
  const { config, ledger, handler, outputs, owner } = deps;
  const passId = deps.passId ?? deps.runId;
  const shared = sharesPass(ledger);
  const now = deps.now ?? Date.now;
  const log = deps.log;
  const retry: RetryPolicy = {
    maxAttempts: config.retry.maxAttempts,
    backoffMs: config.retry.backoffSeconds * 1000,
    backoffMaxMs: config.retry.backoffMaxSeconds * 1000,
  };
  // An id that would escape the output directory can never succeed: dead at once.
  const deadAtOnce: RetryPolicy = { ...retry, maxAttempts: 1 };
  const leaseMs = config.lease.seconds * 1000;

  // [lease guard] A pod cut off from the ledger for longer than a lease keeps running its
  // handlers, but a sibling may have taken their items over by then (reclaimExpired): a late
  // rename would overwrite the newer attempt's output. Each claim's lease as this pod knows
  // it: from the claim's write, or from the last renewal that reached the ledger (it renews
  // every claim the owner holds). Past it, the output is not committed.
  const leaseGuard = deps.leaseGuardsOutputs ?? shared;
  let lastClaimAt = 0;
  let renewedAt = Number.NEGATIVE_INFINITY;
  const claimedAt = new Map<Claim, number>();
  const leaseLapsed = (claim: Claim): boolean => now() >= Math.max(claimedAt.get(claim) ?? 0, renewedAt) + leaseMs;

  const drain = new Drain({
    stop: deps.stop,
    force: deps.force,
    gracePeriodMs: config.drain.gracePeriodSeconds * 1000,
    marginMs: config.drain.marginSeconds * 1000,
  });
  // Candidate ids (discovered, claimable when found), not claims: an item is claimed only
  // when a handler slot is free for it, so what waits here costs no attempt if we die.
  const channel = new Channel<string>(config.queueSize);
  // Claims of attempts started in this pass whose result is not written yet.
  const held = new Map<string, Claim>();
  const inflight = new Map<string, AttemptSignal>();
  // Handler time per attempt, until its result is written (for the duration histogram).
  const durations = new Map<Claim, number>();
  // The source root as the pass found it: an unmounted or replaced one is not "files gone".
  const sourceAtStart = deps.source === undefined ? sourceIdentity(config.source.directory) : Promise.resolve(null);
  // What judges a failed or missing item needs; outputFullSeen is set by the first attempt that finds the output file system full.
  const scene: FailureScene = {
    outputFullSeen: false,
    outputDir: outputs?.dir,
    source: deps.source === undefined ? { directory: config.source.directory, atStart: sourceAtStart } : undefined,
  };
  let scanned = 0;
  let claimed = 0;
  let skippedDirectories = 0;
  let noOutput = 0;
  let scanComplete = false;
  let sweepComplete = false;
  // Set when a complete scan of the directory source proved which items exist (forgetUnseen).
  let wholeScan: { passId: string; startedAt: number } | undefined;
  // One wake-up list for the dispatcher: a task ended, a result was written, or a stop.
  let waiters: Array<() => void> = [];
  const notify = () => {
    if (waiters.length === 0) return; // called twice per attempt, mostly with nobody waiting
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };
  const changed = () => new Promise<void>((resolve) => waiters.push(resolve));

  const results = new ResultBatcher(ledger, log, {
    now,
    maxBatch: MAX_BATCH,
    maxDelayMs: 20,
    onError: (err) => {
      log.error({ err }, 'ledger write failed; stopping the pass');
      drain.abortNow(new AbortReason('ledger failure', drain.killAfterMs()));
    },
    onSettled: (c) => {
      if (held.get(c.id) === c) held.delete(c.id);
      claimedAt.delete(c);
      notify();
    },
    onDeadLettered: (id, error) => deps.observer?.deadLettered?.(id, error),
    onOutcome: (c, outcome) => {
      deps.observer?.attempt(outcome, durations.get(c) ?? 0);
      durations.delete(c);
    },
  });

  const snapshot = (): ProgressSnapshot => ({
    scanned,
    claimed,
    ...results.counts,
    inFlight: inflight.size,
    queued: channel.size,
    scanComplete,
    skippedDirectories,
  });
  const progress = new Progress(log, now, deps.progressIntervalMs ?? 15_000, snapshot);
  deps.observer?.live?.(snapshot);

  // On stop: claim nothing more. What waits in the channel was never claimed: drop it.
  // (The stop may have come before the pass began: a signal during start-up.)
  whenAborted(drain.stopping, () => {
    log.info({ reason: String(drain.stopping.reason), inFlight: inflight.size }, 'drain: stopped claiming; in-flight items may finish');
    channel.closeAndTake();
    notify();
  });
  whenAborted(drain.aborting, () => {
    const reason = drain.aborting.reason as AbortReason;
    log.warn({ reason: reason.message, inFlight: inflight.size }, 'drain: aborting in-flight items');
    for (const ctl of inflight.values()) ctl.abort(reason);
    notify();
  });

  const renewTimer = startRenewal({
    ledger,
    owner,
    held,
    inflight,
    log,
    now,
    leaseMs,
    everyMs: config.lease.renewSeconds * 1000,
    killAfterMs: () => drain.killAfterMs(),
    onRenewed: (at) => (renewedAt = Math.max(renewedAt, at)),
  });

  const claimOpts = () => {
    lastClaimAt = now();
    return { owner, runId: passId, now: lastClaimAt, leaseMs };
  };

  /** Scan lazily, record what is found, and queue the ids claimable now. */
  async function produce(): Promise<void> {
    const scanStartedAt = now();
    const source =
      deps.source ??
      scanSource(config, drain.stopping, (dir) => {
        skippedDirectories++;
        log.warn({ path: dir.path, code: dir.code }, 'scan: skipped a directory it cannot read; its items wait until it is readable (the scan is partial)');
      });
    try {
      for await (const batch of batches(source, DISCOVER_BATCH)) {
        if (drain.stopping.aborted) return;
        const ids = await ledger.discover(batch, { runId: passId, now: now(), refresh: deps.refresh });
        scanned += batch.length;
        // The pods of a shared pass scan one directory in one order: each goes through a
        // batch from its own random place, or they would all offer their claims the same
        // candidates and mostly find them taken.
        const from = shared ? Math.floor(Math.random() * ids.length) : 0;
        for (let i = 0; i < ids.length; i++) {
          if (drain.stopping.aborted) return;
          await channel.send(ids[(from + i) % ids.length]!);
        }
      }
      // The scan also ends early when the stop aborts it: that is not a complete scan.
      scanComplete = !drain.stopping.aborted;
      // Pending items a whole scan of the same source did not see were deleted since an
      // earlier run found them: forget them, or the backlog never reaches 0. Not after a
      // partial scan (their directory may be the unreadable one), nor when the source root
      // is no longer the directory the pass began with. A file that comes back is new.
      if (scanComplete && deps.source === undefined && skippedDirectories === 0 && (await sourcePresent(config.source.directory, await sourceAtStart))) {
        const n = await ledger.forgetUnseen(passId);
        if (n > 0) log.warn({ items: n }, 'forgot pending items whose files are gone (a complete scan did not find them); not charged, not dead');
        wholeScan = { passId, startedAt: scanStartedAt };
      }
    } catch (err) {
      // A send on the channel the stop closed is not an error.
      if (!drain.stopping.aborted) throw err;
    } finally {
      channel.close();
    }
  }

  const debug = log.isLevelEnabled('debug');

  async function processItem(claim: Claim): Promise<void> {
    const abort = new AttemptSignal();
    const ctx = new AttemptContext(abort, log, claim);
    inflight.set(claim.id, abort);
    if (drain.aborting.aborted) abort.abort(drain.aborting.reason);
    // A child logger costs ~2 us: made only for handlers that log, and for our own lines.
    const logOf = () => ctx.log;
    // Problems known before the handler runs cannot be fixed by running it again: an id
    // that would escape output.directory, or something foreign where its output goes.
    const unsafeId = checkItemId(claim.id);
    const unsafe = unsafeId ? `unsafe item id: ${unsafeId}` : outputs?.outputProblem(claim.id);
    if (unsafe) {
      inflight.delete(claim.id);
      results.fail(claim, `${unsafe} (the handler was not run)`, deadAtOnce);
      return;
    }
    const item = workItem(config.source.directory, claim);
    // Deleted between the scan and now: forgotten before its handler runs (a handler that
    // shrugs at a missing input would otherwise turn it into an empty "done" output). One
    // lstat, no exception on a miss; a source that vanished as a whole stops the pass.
    if (scene.source !== undefined && itemGone(fsPath(item))) {
      inflight.delete(claim.id);
      settle(claim, (await whereItWent(fsPath(item), scene)) ?? { kind: 'gone' }, logOf);
      return;
    }
    const tempPath = outputs?.tempPathFor(claim.id, claim.attempt);
    ctx.outputPath = tempPath;
    const started = now();
    try {
      await handler.run(item, ctx);
      if (leaseGuard && tempPath && leaseLapsed(claim)) {
        throw new HandlerFailure(
          `the claim's lease may have run out (no renewal reached the ledger for ${config.lease.seconds}s), so another pod may hold the item now: output not committed, claim handed back`,
          true,
        );
      }
      // Output first, ledger second: a crash in between means a redo that overwrites.
      if (tempPath && outputs && !(await outputs.commit(tempPath, claim.id))) {
        noOutput++;
        if (config.handler.expectOutput) {
          throw new HandlerFailure('the handler succeeded but wrote nothing to its output path ({output}), and handler.expectOutput is true');
        }
      }
      durations.set(claim, now() - started);
      if (debug) logOf().debug({ ms: now() - started }, 'item done');
      results.complete(claim);
    } catch (err) {
      durations.set(claim, now() - started);
      // Asked before the clean-up, which frees what the failed attempt wrote.
      const full = outputs !== undefined && (await outputs.full());
      // The environment's fault found by the clean-up (output.directory gone) stops the pass.
      const tempGone = tempPath && outputs ? await outputs.discard(tempPath).catch((e: unknown) => (e instanceof EnvironmentFault ? e : null)) : null;
      const message = err instanceof Error ? err.message : String(err);
      const attempt = { err, message, aborted: abort.aborted, tempGone: tempGone ?? undefined, outputFull: full, itemPath: fsPath(item) };
      settle(claim, await judgeFailure(attempt, scene), logOf);
    } finally {
      inflight.delete(claim.id);
    }
  }

  /** Charge, hand back, stop or forget, as the verdict says (judgeFailure, whereItWent). */
  function settle(claim: Claim, verdict: FailureVerdict, logOf: () => Logger): void {
    switch (verdict.kind) {
      case 'charge':
        results.fail(claim, verdict.message, retry);
        return;
      case 'gone':
        results.gone(claim);
        return;
      case 'release':
        if (verdict.warn) logOf().warn(verdict.warn.fields, verdict.warn.msg);
        results.release(claim, verdict.reason);
        return;
      case 'stop':
        if (verdict.outputFull) scene.outputFullSeen = true;
        results.release(claim, verdict.reason);
        stopForEnvironment(verdict.fault);
        return;
    }
  }

  /** The environment's fault: stop claiming, let in-flight attempts finish, end as failed (exit 1). */
  function stopForEnvironment(err: Error): void {
    if (error === undefined) log.error({ err }, 'the environment cannot run items; stopping the pass (nothing charged)');
    error ??= err;
    drain.requestStop(err.message);
  }

  /** Start attempts for claims (at most the free slots), then wait for them all. */
  async function dispatch(): Promise<void> {
    const tasks = new Set<Promise<void>>();
    // p-limit is the slot count; we claim only for free slots, so its queue stays empty.
    const limit = pLimit(config.concurrency);
    const start = (claim: Claim) => {
      held.set(claim.id, claim);
      if (leaseGuard) claimedAt.set(claim, lastClaimAt);
      claimed++;
      const task: Promise<void> = limit(() => processItem(claim)).finally(() => {
        tasks.delete(task);
        notify();
      });
      tasks.add(task);
    };
    try {
      sweepComplete = await claimLoop({
        ledger,
        results,
        channel,
        drain,
        log,
        held,
        claimOpts,
        freeSlots: () => config.concurrency - limit.activeCount - limit.pendingCount,
        running: () => tasks.size,
        start,
        changed,
        scanComplete: () => scanComplete,
        queueSize: config.queueSize,
        // Claims of the pass whose lease expired resume at once, as at start (charged).
        retry: { ...retry, backoffMs: 0, backoffMaxMs: 0 },
        outputs,
      });
    } catch (err) {
      fail(err, 'claim failed; stopping the pass', 'claim failure');
    }
    if (await waitForTasks(tasks, drain, log)) {
      // Attempts that did not stop in time (a module ignoring its signal, a child's pipes
      // held by a process that left its group) are not the items' fault: hand them back
      // uncharged before we exit. Should one still finish, its write is fenced.
      for (const id of inflight.keys()) {
        const claim = held.get(id);
        if (claim) results.release(claim, 'interrupted: its handler did not stop within the drain margin');
      }
    }
  }

  let error: Error | undefined;
  function fail(err: unknown, msg: string, reason: string): void {
    const e = err instanceof Error ? err : new Error(String(err));
    error ??= e;
    log.error({ err: e }, msg);
    drain.abortNow(new AbortReason(reason, drain.killAfterMs()));
    channel.close();
  }

  progress.start();
  try {
    const producer = produce().catch((err: unknown) => fail(err, 'scan or discovery failed; stopping the pass', 'scan/discovery failure'));
    await Promise.all([producer, dispatch()]);
    await results.flush().catch(() => undefined);
  } finally {
    clearInterval(renewTimer);
    progress.stop();
    drain.dispose();
  }
  error ??= results.error;
  const counts = { scanned, claimed, skippedDirectories, noOutput, ...results.counts };
  const scan = !scanComplete ? 'incomplete' : skippedDirectories > 0 ? 'partial' : 'complete';
  // Complete: the scan finished and nothing this pass saw is due any more. The sweep proves
  // it (attempts handed back without a stop, e.g. when our temp directory vanished, are
  // claimed again by it); after a stop, the ledger is asked: a stop that came once
  // everything was done still left nothing to do (exit 0, not 75), while hand-backs are due.
  const finished =
    scanComplete &&
    (sweepComplete || (!error && !(await ledger.nextDueAt(passId).then((t) => t !== null && t <= now(), () => true))));
  const outcome: PassOutcome = error ? 'failed' : finished ? 'completed' : 'drained';
  // Retention last, and never on the way out of a drain (pruneLedger also checks between steps).
  const stopping = AbortSignal.any([deps.stop, deps.force]);
  const pruned =
    config.retention && !error && !stopping.aborted
      ? await pruneLedger({ ledger, retention: config.retention, log, now, stop: stopping, wholeScan })
      : undefined;
  return { outcome, counts, scan, error, ...(pruned ? { pruned } : {}) };
}

/** Run `fn` once when `signal` aborts, or now if it already has. */
function whenAborted(signal: AbortSignal, fn: () => void): void {
  if (signal.aborted) fn();
  else signal.addEventListener('abort', fn, { once: true });
}

/**
 * The handler's view of an item. For a plain id (valid UTF-8, no escapes) the path is the
 * text, and the bytes are made only if a handler asks for rawPath (a Buffer per item would
 * be pure garbage for the others). A class: its getter lives on the prototype, so every
 * item has one shape (an object literal with a getter costs more per item, measured).
 */
class PlainItem implements WorkItem {
  #raw: Buffer | undefined;
  constructor(
    readonly id: string,
    readonly path: string,
    readonly attempt: number,
  ) {}
  get rawPath(): Buffer {
    return (this.#raw ??= Buffer.from(this.path, 'utf8'));
  }
}

/** The item's path for our own file system calls: the text for a plain id (no Buffer made). */
const fsPath = (item: WorkItem): string | Buffer => (item instanceof PlainItem ? item.path : (item.rawPath ?? item.path));

function workItem(sourceDir: string, claim: Claim): WorkItem {
  if (isPlainId(claim.id)) {
    return new PlainItem(claim.id, sourceDir.endsWith(path.sep) ? sourceDir + claim.id : `${sourceDir}${path.sep}${claim.id}`, claim.attempt);
  }
  const where = itemPaths(sourceDir, claim.id);
  return { id: claim.id, path: where.text ?? where.raw.toString('utf8'), rawPath: where.raw, attempt: claim.attempt };
}

/**
 * What a handler gets for one attempt. A class, not an object literal with getters and
 * closures: one object per attempt, its signal and child logger made only when read.
 */
class AttemptContext implements HandlerContext {
  outputPath: string | undefined;
  #log: Logger | undefined;
  constructor(
    private readonly abort: AttemptSignal,
    private readonly parentLog: Logger,
    private readonly claim: Claim,
  ) {}
  get signal(): AbortSignal {
    return this.abort.signal;
  }
  onAbort(fn: (reason: unknown) => void): () => void {
    return this.abort.onAbort(fn);
  }
  get log(): Logger {
    return (this.#log ??= this.parentLog.child({ itemId: this.claim.id, attempt: this.claim.attempt }));
  }
  get attempt(): number {
    return this.claim.attempt;
  }
}
