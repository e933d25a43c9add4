import { setImmediate as yieldTurn } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { RetentionConfig } from '../config/types.js';
import type { Ledger } from '../ledger/types.js';

/** Rows per pruning transaction: short enough that a stop waits for one at most. */
export const PRUNE_BATCH = 1000;
/** Items looked at per step of the missing-file walk (a read of this many rows, few writes). */
export const MARK_WALK = 10_000;
/**
 * Steps of that walk per pass, at most: a pass looks at 200,000 items, then the next
 * complete pass goes on from there (a 1,000,000-item ledger is covered every 5 passes),
 * so what a pass pays for it does not grow with the ledger (docs/benchmarks.md).
 */
export const MARK_STEPS = 20;
/**
 * Forget steps per pass, at most (200,000 items): after a whole source is deleted, the
 * pass 30 days later stays short, and the next passes forget the rest.
 */
export const FORGET_STEPS = 200;
/** Pages per incremental-vacuum step (16 MiB at SQLite's 4 KiB pages). */
export const VACUUM_PAGES = 4096;

const DAY_MS = 24 * 3600 * 1000;

export interface PruneDeps {
  ledger: Ledger;
  retention: RetentionConfig;
  log: Logger;
  now: () => number;
  /** The pass is stopping (drain): prune no further. Checked before every step. */
  stop: AbortSignal;
  /**
   * Set only after a complete scan of the directory source (the condition under which
   * forgetUnseen runs): the pass and when its scan began. Without it, done items are
   * neither marked missing nor forgotten.
   */
  wholeScan?: { passId: string; startedAt: number };
}

export interface PruneReport {
  runs: number;
  events: number;
  /** Done items newly marked missing. */
  markedMissing: number;
  /** Done items forgotten (missing for retention.forgetMissingAfterDays). */
  forgotten: number;
  /** SQLite pages given back to the file system. */
  pagesFreed: number;
  /** The stop came first: the rest waits for the next pass. */
  stopped: boolean;
}

/**
 * Retention at the end of a pass (docs/configuration.md, `retention`): old runs and events
 * folded into totals and deleted, done items whose files complete scans no longer find
 * marked and, after forgetMissingAfterDays, forgotten; then the file shrinks. Bounded
 * steps, each its own transaction; a stop ends it between two steps. A failure is logged
 * and ends pruning, never the pass: retention can wait for the next run.
 */
export async function pruneLedger(d: PruneDeps): Promise<PruneReport> {
  const { ledger, retention, log, stop } = d;
  const r: PruneReport = { runs: 0, events: 0, markedMissing: 0, forgotten: 0, pagesFreed: 0, stopped: false };
  const now = d.now();
  const before = now - retention.days * DAY_MS;
  /**
   * Repeat `step` until it does less than a full batch, `maxSteps` are done, or the pass
   * stops. Each step yields to the event loop first: SQLite's steps are synchronous, so
   * without it a SIGTERM (and a metrics scrape) would wait for the whole loop.
   */
  const drainSteps = async (step: () => Promise<number>, full: number, maxSteps = Infinity): Promise<number> => {
    let total = 0;
    for (let i = 0; i < maxSteps; i++) {
      await yieldTurn();
      if (stop.aborted) {
        r.stopped = true;
        return total;
      }
      const n = await step();
      total += n;
      if (n < full) return total;
    }
    return total;
  };
  try {
    log.debug({ wholeScan: d.wholeScan !== undefined }, 'retention: pruning');
    const keep = { keep: retention.runs, before, limit: PRUNE_BATCH };
    r.runs = await drainSteps(() => ledger.pruneRuns(keep), PRUNE_BATCH);
    r.events = await drainSteps(() => ledger.pruneEvents(keep), PRUNE_BATCH);
    if (d.wholeScan && !stop.aborted) {
      for (let i = 0; i < MARK_STEPS; i++) {
        await yieldTurn();
        if (stop.aborted) {
          r.stopped = true;
          break;
        }
        const step = await ledger.markMissing({ passId: d.wholeScan.passId, scanStartedAt: d.wholeScan.startedAt, now, limit: MARK_WALK });
        r.markedMissing += step.marked;
        if (step.wrapped) break;
      }
      if (!r.stopped) {
        const forgetBefore = now - retention.forgetMissingAfterDays * DAY_MS;
        r.forgotten = await drainSteps(() => ledger.forgetMissing({ before: forgetBefore, limit: PRUNE_BATCH }), PRUNE_BATCH, FORGET_STEPS);
      }
    }
    let shrinkable = true;
    let free = 0;
    if (!stop.aborted && r.runs + r.events + r.forgotten > 0) {
      r.pagesFreed = await drainSteps(async () => {
        const s = await ledger.reclaimSpace(VACUUM_PAGES);
        shrinkable = s.shrinkable;
        free = s.free;
        return s.freed;
      }, 1);
    }
    if (r.stopped || r.runs + r.events + r.markedMissing + r.forgotten + r.pagesFreed > 0) log.info({ pruned: r }, 'retention: pruned the ledger');
    if (!shrinkable) {
      log.warn(
        { freePages: free },
        'retention: this SQLite ledger was created before cronsafe shrank its files; freed space is reused, but the file only shrinks after a one-time VACUUM (docs/operations.md)',
      );
    }
  } catch (err) {
    log.warn({ err, pruned: r }, 'retention: pruning failed; the next pass tries again');
  }
  return r;
}
