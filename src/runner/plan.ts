import type { Config } from '../config/types.js';
import type { ItemPeek, RequeueLedger } from '../ledger/requeue-types.js';
import type { DiscoveredItem, ItemCounts, Ledger, RefreshPolicy } from '../ledger/types.js';
import { sourceScanFailed } from './faults.js';
import { batches, scanSource } from './scan.js';

/**
 * What the next pass would do with each item, by the rules discovery applies (claim.ts,
 * refresh.ts): computed from a scan and a read of the ledger, claiming and writing nothing.
 *   new            not in the ledger: recorded and attempted
 *   pending        pending and past its backoff: attempted
 *   refresh        finished, outstanding again under schedule.refresh: attempted (attempt 1)
 *   retryWaiting   pending, backing off: attempted only if its backoff ends while the pass runs
 *   claimed        an attempt runs now (or its run died: a run takes it back at start)
 *   dead           dead-lettered: left alone
 *   done           finished: nothing to do
 */
export type PlanCategory = 'new' | 'pending' | 'refresh' | 'retryWaiting' | 'claimed' | 'dead' | 'done';
export const PLAN_CATEGORIES: readonly PlanCategory[] = ['new', 'pending', 'refresh', 'retryWaiting', 'claimed', 'dead', 'done'];

/** A stat field counts as changed only when both sides are known and differ (refresh.ts `differs`). */
const differs = (found: number | undefined, claimed: number | null): boolean => found !== undefined && claimed !== null && found !== claimed;

/** The category of one scanned item; `known` is its ledger row, if any. Pure. */
export function classify(item: DiscoveredItem, known: ItemPeek | undefined, now: number, refresh: RefreshPolicy | undefined): PlanCategory {
  if (known === undefined) return 'new';
  const changed = refresh?.onChange === true && (differs(item.size, known.claimedSize) || differs(item.mtimeMs, known.claimedMtimeMs));
  switch (known.state) {
    case 'pending':
      // Never charged (new, handed back, requeued): no backoff, whatever clock wrote available_at (discover.ts).
      return known.availableAt <= now || known.attempts === known.released ? 'pending' : 'retryWaiting';
    case 'claimed':
      return 'claimed';
    case 'done':
      if (refresh?.doneBefore !== undefined && known.doneAt !== null && known.doneAt < refresh.doneBefore) return 'refresh';
      return changed ? 'refresh' : 'done';
    case 'dead':
      return changed ? 'refresh' : 'dead';
  }
}

export interface PlanGroup {
  count: number;
  /** The first ids found, in scan order (at most the limit). */
  first: string[];
}

export interface PassPlan {
  /** Items the scan found. */
  scanned: number;
  /** `partial`: directories the scan could not read were skipped (their items wait; nothing is forgotten). */
  scan: 'complete' | 'partial';
  skippedDirectories: number;
  groups: Record<PlanCategory, PlanGroup>;
  /** Attempts the pass would start at once: new + pending + refresh. */
  wouldAttempt: number;
  /** Earliest end of a backoff among retryWaiting items (epoch ms), or null. */
  nextRetryAt: number | null;
  /**
   * Pending items in the ledger that the scan did not find (their files are gone): a pass
   * whose scan is complete forgets them. Counted from the ledger at the end of the scan, less
   * the rows added to it meanwhile (a running pass's discoveries, which the scan read as new).
   */
  gone: number;
}

export interface PlanDeps {
  config: Config;
  /** Null: no ledger yet (every item is new). */
  ledger: (Pick<Ledger, 'counts'> & Pick<RequeueLedger, 'peek'>) | null;
  now: number;
  /**
   * The time of each ledger read, when it may be later than `now` (default `now`): a pending
   * row is due by the time it was read at. A running pass writes rows while the scan goes on
   * (a discovery, a hand-back: available_at is the writer's clock), and judged by the plan's
   * start such a row, due at once, was listed as retry-waiting.
   */
  clock?: () => number;
  refresh?: RefreshPolicy;
  /** Ids kept per category. */
  limit: number;
  /** Items to plan for; default a scan of source.directory as the pass makes it. */
  source?: AsyncIterable<DiscoveredItem>;
  signal?: AbortSignal;
}

/** As the pass's DISCOVER_BATCH: one ledger read per 256 items found. */
const BATCH = 256;

/** Scan as the pass would, and sort what it finds. Memory: one batch, plus `limit` ids per category. */
export async function planPass(deps: PlanDeps): Promise<PassPlan> {
  const { config, ledger, now, refresh, limit } = deps;
  let skippedDirectories = 0;
  const source = deps.source ?? scanSource(config, deps.signal, () => skippedDirectories++);
  const groups = Object.fromEntries(PLAN_CATEGORIES.map((c) => [c, { count: 0, first: [] as string[] }])) as Record<PlanCategory, PlanGroup>;
  let scanned = 0;
  let nextRetryAt: number | null = null;
  // Rows a running pass adds while the scan goes on (its discoveries) are pending at the end
  // though the scan read them as new: they are not gone.
  const rowsBefore = ledger ? rowCount(await ledger.counts()) : 0;
  try {
    for await (const batch of batches(source, BATCH)) {
      const known = new Map((ledger ? await ledger.peek(batch.map((i) => i.id)) : []).map((p) => [p.id, p]));
      // After the read: a row it returned was written before it, at the writer's clock.
      const readAt = Math.max(now, deps.clock?.() ?? now);
      for (const item of batch) {
        scanned++;
        const row = known.get(item.id);
        const category = classify(item, row, readAt, refresh);
        const g = groups[category];
        g.count++;
        if (g.first.length < limit) g.first.push(item.id);
        if (category === 'retryWaiting' && row) nextRetryAt = Math.min(nextRetryAt ?? Infinity, row.availableAt);
      }
    }
  } catch (err) {
    // The ledger's reads fail as the store (StateUnavailable): an errno here is the scan's.
    throw deps.source === undefined ? sourceScanFailed(err, config.source.directory) : err;
  }
  // Pending in the ledger, less those the scan found: their files are gone.
  const pendingSeen = groups.pending.count + groups.retryWaiting.count;
  const after = ledger ? await ledger.counts() : undefined;
  const gone = after ? Math.max(0, after.pending - pendingSeen - Math.max(0, rowCount(after) - rowsBefore)) : 0;
  return {
    scanned,
    scan: skippedDirectories > 0 ? 'partial' : 'complete',
    skippedDirectories,
    groups,
    wouldAttempt: groups.new.count + groups.pending.count + groups.refresh.count,
    nextRetryAt,
    gone: skippedDirectories > 0 ? 0 : gone,
  };
}

const rowCount = (c: ItemCounts): number => c.pending + c.claimed + c.done + c.dead;
