import path from 'node:path';
import pLimit from 'p-limit';
import type { Logger } from 'pino';
import type { Config } from '../config/types.js';
import type { Claim, DiscoveredItem, Ledger, RefreshPolicy, RetryPolicy } from '../ledger/types.js';
import { Channel } from './channel.js';
import { AbortReason, Drain } from './drain.js';
import { checkItemId, type OutputStore } from './output.js';
import { Progress, type ProgressSnapshot } from './progress.js';
import { ResultBatcher, type AttemptOutcome, type ResultCounts } from './results.js';
import { ownFiles } from './own-files.js';
import { batches, scanDirectory } from './scan.js';
import { startRenewal } from './renew.js';
import { waitForTasks } from './settle.js';
import { HandlerFailure, type Handler, type WorkItem } from './types.js';

export interface PassDeps {
  config: Config;
  ledger: Ledger;
  handler: Handler;
  outputs?: OutputStore;
  log: Logger;
  runId: string;
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
  counts: ResultCounts & { scanned: number; claimed: number };
  error?: Error;
}

/** How many scanned items go to the ledger in one discover-and-claim transaction. */
const DISCOVER_BATCH = 256;

/**
 * One pass over the backlog: scan lazily -> discover+claim in batches -> bounded channel ->
 * at most `concurrency` handlers (p-limit) -> batched, fenced results. Then a retry sweep
 * for items that failed during this pass and are due again. Never throws: a ledger
 * failure ends the pass as `failed` after in-flight work is stopped.
 */
export async function runPass(deps: PassDeps): Promise<PassResult> {
  const { config, ledger, handler, outputs, owner, runId } = deps;
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

  const drain = new Drain({
    stop: deps.stop,
    force: deps.force,
    gracePeriodMs: config.drain.gracePeriodSeconds * 1000,
    marginMs: config.drain.marginSeconds * 1000,
  });
  const channel = new Channel<Claim>(config.queueSize);
  const held = new Map<string, Claim>();
  const inflight = new Map<string, AbortController>();
  // Handler time per attempt, until its result is written (for the duration histogram).
  const durations = new Map<string, number>();
  let scanned = 0;
  let claimed = 0;
  let scanComplete = false;
  let sweepComplete = false;
  let settledWaiters: Array<() => void> = [];
  const notifySettled = () => {
    const w = settledWaiters;
    settledWaiters = [];
    for (const f of w) f();
  };

  const results = new ResultBatcher(ledger, log, {
    now,
    maxBatch: 128,
    maxDelayMs: 20,
    onError: (err) => {
      log.error({ err }, 'ledger write failed; stopping the pass');
      drain.abortNow(new AbortReason('ledger failure', drain.killAfterMs()));
    },
    onSettled: (c) => {
      held.delete(c.id);
      notifySettled();
    },
    onDeadLettered: (id, error) => deps.observer?.deadLettered?.(id, error),
    onOutcome: (c, outcome) => {
      const key = `${c.id}\0${c.attempt}`;
      deps.observer?.attempt(outcome, durations.get(key) ?? 0);
      durations.delete(key);
    },
  });

  const snapshot = (): ProgressSnapshot => ({
    scanned,
    claimed,
    ...results.counts,
    inFlight: inflight.size,
    queued: channel.size,
    scanComplete,
  });
  const progress = new Progress(log, now, deps.progressIntervalMs ?? 15_000, snapshot);
  deps.observer?.live?.(snapshot);

  // On stop: hand back everything claimed but not started.
  drain.stopping.addEventListener('abort', () => {
    log.info({ reason: String(drain.stopping.reason), inFlight: inflight.size }, 'drain: stopped claiming; in-flight items may finish');
    for (const c of channel.closeAndTake()) results.release(c, 'handed back unstarted: run stopping');
    notifySettled();
  });
  drain.aborting.addEventListener('abort', () => {
    const reason = drain.aborting.reason as AbortReason;
    log.warn({ reason: reason.message, inFlight: inflight.size }, 'drain: aborting in-flight items');
    for (const ctl of inflight.values()) ctl.abort(reason);
    notifySettled();
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
  });

  const claimOpts = () => ({ owner, runId, now: now(), leaseMs, refresh: deps.refresh });
  const shared = config.state.postgres !== undefined;

  async function offer(claims: Claim[]): Promise<boolean> {
    for (const c of claims) {
      held.set(c.id, c);
      claimed++;
      if (drain.stopping.aborted) {
        results.release(c, 'handed back unstarted: run stopping');
        continue;
      }
      try {
        await channel.send(c);
      } catch {
        results.release(c, 'handed back unstarted: run stopping');
      }
    }
    return !drain.stopping.aborted;
  }

  async function produce(): Promise<void> {
    const source =
      deps.source ??
      scanDirectory({
        directory: config.source.directory,
        include: config.source.include,
        exclude: config.source.exclude,
        skipPaths: ownFiles(config),
        withStats: config.schedule?.refresh === 'on-change',
        signal: drain.stopping,
      });
    try {
      for await (const batch of batches(source, DISCOVER_BATCH)) {
        if (drain.stopping.aborted) return;
        // With a shared ledger, claim no more than the channel holds, so a small backlog
        // spreads across the pods of the pass; what is left stays pending for the others
        // (and for this pod's sweep). Alone on SQLite, the whole batch is ours anyway.
        const claims = await ledger.discoverAndClaim(batch, { ...claimOpts(), limit: shared ? config.queueSize : undefined });
        scanned += batch.length;
        if (!(await offer(claims))) return;
      }
      scanComplete = true;
      // Retry sweep: items that failed in this pass and whose backoff has passed.
      for (;;) {
        if (drain.stopping.aborted) return;
        // Write settled results first, so failures whose backoff is over are claimable.
        const settled = new Promise<void>((resolve) => settledWaiters.push(resolve));
        await results.flush();
        const due = await ledger.claimDue({ ...claimOpts(), limit: config.queueSize });
        if (due.length > 0) {
          if (!(await offer(due))) return;
          continue;
        }
        // Every claim of this pass is settled and written: nothing can become due now.
        if (held.size === 0) break;
        await settled;
      }
      sweepComplete = true;
    } finally {
      channel.close();
    }
  }

  async function processItem(claim: Claim): Promise<void> {
    const ctl = new AbortController();
    inflight.set(claim.id, ctl);
    if (drain.aborting.aborted) ctl.abort(drain.aborting.reason);
    const itemLog = log.child({ itemId: claim.id, attempt: claim.attempt });
    const unsafe = checkItemId(claim.id);
    if (unsafe) {
      inflight.delete(claim.id);
      results.fail(claim, `unsafe item id: ${unsafe}`, deadAtOnce);
      return;
    }
    const item: WorkItem = { id: claim.id, path: path.join(config.source.directory, claim.id), attempt: claim.attempt };
    const tempPath = outputs?.tempPathFor(claim.id, claim.attempt);
    const started = now();
    const timed = () => durations.set(`${claim.id}\0${claim.attempt}`, now() - started);
    try {
      await handler.run(item, { signal: ctl.signal, outputPath: tempPath, log: itemLog, attempt: claim.attempt });
      // Output first, ledger second: a crash in between means a redo that overwrites.
      if (tempPath && outputs) await outputs.commit(tempPath, claim.id);
      timed();
      itemLog.debug({ ms: now() - started }, 'item done');
      results.complete(claim);
    } catch (err) {
      timed();
      if (tempPath && outputs) await outputs.discard(tempPath).catch(() => undefined);
      const message = err instanceof Error ? err.message : String(err);
      const interrupted = (err instanceof HandlerFailure && err.interrupted) || ctl.signal.aborted;
      if (interrupted) {
        itemLog.warn({ reason: message }, 'item interrupted; claim handed back (attempt not charged)');
        results.release(claim, `interrupted: ${message}`);
      } else {
        results.fail(claim, message, retry);
      }
    } finally {
      inflight.delete(claim.id);
    }
  }

  async function dispatch(): Promise<void> {
    const limit = pLimit(config.concurrency);
    const tasks = new Set<Promise<void>>();
    // Woken when a task ends; one waiter at a time (this loop), so no Promise.race per item.
    let slotFreed: (() => void) | undefined;
    for await (const claim of channel) {
      // Keep p-limit's own queue empty: the bounded channel is the only buffer.
      while (limit.activeCount + limit.pendingCount >= config.concurrency) {
        await new Promise<void>((resolve) => (slotFreed = resolve));
      }
      // The stop may have come while we waited for a slot: this claim was never started.
      if (drain.stopping.aborted) {
        results.release(claim, 'handed back unstarted: run stopping');
        continue;
      }
      const task: Promise<void> = limit(() => processItem(claim)).finally(() => {
        tasks.delete(task);
        const wake = slotFreed;
        slotFreed = undefined;
        wake?.();
        notifySettled();
      });
      tasks.add(task);
    }
    await waitForTasks(tasks, drain, log);
  }

  let error: Error | undefined;
  progress.start();
  try {
    const producer = produce().catch((err: unknown) => {
      error = err instanceof Error ? err : new Error(String(err));
      log.error({ err: error }, 'scan or claim failed; stopping the pass');
      drain.abortNow(new AbortReason('scan/claim failure', drain.killAfterMs()));
      channel.close();
    });
    await Promise.all([producer, dispatch()]);
    await results.flush().catch(() => undefined);
  } finally {
    clearInterval(renewTimer);
    progress.stop();
    drain.dispose();
  }
  error ??= results.error;
  const counts = { scanned, claimed, ...results.counts };
  // A stop that came after the scan, once everything in flight finished, may still have
  // left nothing to do: then the pass is complete (exit 0), not drained (75).
  const finished =
    scanComplete &&
    (sweepComplete ||
      (!error && results.counts.released === 0 && !(await ledger.nextDueAt(runId).then((t) => t !== null && t <= now(), () => true))));
  const outcome: PassOutcome = error ? 'failed' : finished && results.counts.released === 0 ? 'completed' : 'drained';
  return { outcome, counts, error };
}
