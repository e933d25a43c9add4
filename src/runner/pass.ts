import { statSync } from 'node:fs';
import type { Logger } from 'pino';
import { sharesPass, type Ledger } from '../ledger/types.js';
import { AbortReason } from './drain.js';
import { sourceGone } from './failure.js';
import { EnvironmentFault } from './faults.js';
import { dispatch } from './dispatch.js';
import { PassState, passOutcome, scanResult, type PassDeps, type PassResult } from './pass-state.js';
import { produce } from './produce.js';
import { Progress, type ProgressSnapshot } from './progress.js';
import { pruneLedger } from './prune.js';
import { startRenewal } from './renew.js';
import { sourceReplaced, type SourceId } from './scan.js';
import { ResultBatcher } from './results.js';

export { passOutcome, resumeAtOnce, retryPolicy, type PassDeps, type PassObserver, type PassOutcome, type PassResult, type ScanResult } from './pass-state.js';

/** Results per ledger write, at most (a batch is also written 20 ms after its first result). */
const MAX_BATCH = 128;

/**
 * The environment's stop said "nothing charged", but the ledger refused the writes after it
 * (its volume gone read-only with output.directory's, or full): the hand-backs of the attempts
 * running then were never recorded, and the next run took their claims for a dead run's and
 * charged them. The message says so instead.
 */
function handBacksUnrecorded(stop: Error, ledgerError: Error, n: number): Error {
  const them = n === 1 ? 'the attempt' : `the ${n} attempts`;
  const said = `${them} running then handed back uncharged, but the ledger write failed (${ledgerError.message}), so the next run charges ${n === 1 ? 'it' : 'them'}`;
  if (!stop.message.includes('nothing charged')) return stop;
  const e = new EnvironmentFault(stop.message.replace(/nothing charged/g, said));
  e.cause = stop;
  return e;
}

/**
 * One pass over the backlog: scan lazily -> discover in batches -> bounded channel of
 * candidate ids (produce.ts) -> claims for free handler slots (claim-loop.ts) -> at most
 * `concurrency` handlers (dispatch.ts, attempt.ts) -> batched, fenced results. Then a
 * sweep for the pass's items that are due again (failures past their backoff,
 * hand-backs). Never throws: a ledger failure ends the pass as `failed` after in-flight
 * work has finished (or the drain deadline cut it short).
 */
export async function runPass(deps: PassDeps): Promise<PassResult> {
  const p = new PassState(deps);
  const { config, ledger, log, now, drain, channel, held, inflight } = p;

  p.results = new ResultBatcher(ledger, log, {
    now,
    maxBatch: MAX_BATCH,
    maxDelayMs: 20,
    // Stop, not abort: in-flight attempts finish (PassState.fail says why).
    onError: (err) => p.fail(err, 'ledger write failed; stopping the pass', 'ledger failure'),
    onSettled: (c) => {
      if (held.get(c.id) === c) held.delete(c.id);
      p.claimedAt.delete(c);
      p.notify();
    },
    onDeadLettered: (id, error) => deps.observer?.deadLettered?.(id, error),
    beforeWrite: (batch) => p.rootCheckedBeforeWrite(batch),
    onOutcome: (c, outcome) => {
      deps.observer?.attempt(outcome, p.durations.get(c) ?? 0);
      p.durations.delete(c);
    },
  });

  const snapshot = (): ProgressSnapshot => ({
    scanned: p.scanned,
    claimed: p.claimed,
    ...p.results.counts,
    inFlight: inflight.size,
    queued: channel.size,
    scanComplete: p.scanComplete,
    skippedDirectories: p.skippedDirectories,
  });
  const progress = new Progress(log, now, deps.progressIntervalMs ?? 15_000, snapshot);
  deps.observer?.live?.(snapshot);

  // On stop: claim nothing more. What waits in the channel was never claimed: drop it.
  // (The stop may have come before the pass began: a signal during start-up.)
  whenAborted(drain.stopping, () => {
    log.info({ reason: String(drain.stopping.reason), inFlight: inflight.size }, 'drain: stopped claiming; in-flight items may finish');
    channel.closeAndTake();
    p.notify();
  });
  whenAborted(drain.aborting, () => {
    const reason = drain.aborting.reason as AbortReason;
    log.warn({ reason: reason.message, inFlight: inflight.size }, 'drain: aborting in-flight items');
    for (const ctl of inflight.values()) ctl.abort(reason);
    p.notify();
  });

  const renewTimer = startRenewal({
    ledger,
    owner: p.owner,
    held,
    inflight,
    log,
    now,
    leaseMs: p.leaseMs,
    everyMs: config.lease.renewSeconds * 1000,
    killAfterMs: () => drain.killAfterMs(),
    onRenewed: (at) => (p.renewedAt = Math.max(p.renewedAt, at)),
    onLost: (claim) => p.lost.add(claim),
  });

  progress.start();
  try {
    const producer = produce(p).catch(async (err: unknown) => p.fail(await rootGone(err, config.source.directory, p.sourceAtStart), 'scan or discovery failed; stopping the pass', 'scan/discovery failure'));
    await Promise.all([producer, dispatch(p)]);
    await p.results.flush().catch(() => undefined);
  } finally {
    clearInterval(renewTimer);
    progress.stop();
    drain.dispose();
  }
  p.error ??= p.results.error;
  if (p.error !== undefined && p.results.unrecordedHandBacks > 0 && p.results.error !== undefined && p.error !== p.results.error) p.error = handBacksUnrecorded(p.error, p.results.error, p.results.unrecordedHandBacks);
  const error = p.error;
  const counts = { scanned: p.scanned, claimed: p.claimed, skippedDirectories: p.skippedDirectories, noOutput: p.noOutput, ...p.results.counts };
  // After a stop the sweep did not prove the pass over: ask the ledger whether anything it saw is due.
  const askLedger = p.scanComplete && !p.sweepComplete && !error;
  const dueLeft = askLedger && (await workLeft(ledger, p.passId, p.owner, now(), log).catch(() => true));
  const outcome = passOutcome({ error, scanComplete: p.scanComplete, sweepComplete: p.sweepComplete, dueLeft });
  // Retention last, and never on the way out of a drain (pruneLedger also checks between steps).
  const stopping = AbortSignal.any([deps.stop, deps.force]);
  const pruned =
    config.retention && !error && !stopping.aborted
      ? await pruneLedger({ ledger, retention: config.retention, log, now, stop: stopping, wholeScan: p.wholeScan })
      : undefined;
  return { outcome, counts, scan: scanResult(p.scanComplete, p.skippedDirectories), error, ...(pruned ? { pruned } : {}) };
}

/**
 * After a stop, whether the pass has work left: an item of it due. On a shared pass
 * (PostgreSQL) also a sibling's claim of it, live or expired: it may come back (a hand-back,
 * a failure, a pod killed with it), and this pod's exit 0 would tell a Kubernetes Job that
 * the work is done, so that no pod replaces a sibling drained or evicted after it.
 */
async function workLeft(ledger: Ledger, passId: string, owner: string, now: number, log: Logger): Promise<boolean> {
  if (sharesPass(ledger)) {
    const s = await ledger.siblings(passId, owner, now);
    const claims = s.live + s.expired + s.stray;
    if (claims > 0) log.info({ claims, due: s.due }, 'stopped before the pass was over: other pods still hold claims of it (a pod that replaces this one joins the pass)');
    return s.due || claims > 0;
  }
  const t = await ledger.nextDueAt(passId);
  return t !== null && t <= now;
}

/** Run `fn` once when `signal` aborts, or now if it already has. */
function whenAborted(signal: AbortSignal, fn: () => void): void {
  if (signal.aborted) fn();
  else signal.addEventListener('abort', fn, { once: true });
}

/**
 * The scan's error, or, when source.directory itself was moved away or replaced since the
 * pass began (its opendir's ENOENT, ENOTDIR from the check after it, or ELOOP for a link to
 * itself put in its place), the fault that says so by its key, as an attempt that meets it
 * does: a bare "ENOENT: ..., opendir" named no key, "ENOTDIR: not a directory" a directory
 * that was merely gone, and "ELOOP: too many symbolic links encountered, opendir" neither.
 */
async function rootGone(err: unknown, directory: string, atStart: Promise<SourceId | null>): Promise<unknown> {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code !== 'ENOENT' && code !== 'ENOTDIR' && code !== 'ELOOP') return err;
  // Its identity at the pass's start is looked up asynchronously: a root moved away before
  // that look finished has none, and is gone if it is no directory now.
  const since = await atStart.catch(() => null);
  const gone = since !== null ? sourceReplaced(directory, since) : !isDirectory(directory);
  return gone ? sourceGone(directory) : err;
}

function isDirectory(directory: string): boolean {
  try {
    return statSync(directory, { throwIfNoEntry: false })?.isDirectory() === true;
  } catch {
    return false;
  }
}
