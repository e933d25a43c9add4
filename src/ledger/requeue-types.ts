import type { ItemState } from './item-state.js';

/**
 * The ledger verbs behind `cronsafe requeue` and `cronsafe plan` (issue 17), apart from
 * types.ts so that the two can grow without touching the runner's interface.
 */

/** The finished states `requeue` may move back to pending. */
export type FinishedState = 'done' | 'dead';

/**
 * Which finished items to list or requeue: every condition holds. `finishedAt` is done_at
 * for a done item and dead_at for a dead one; an item without one never matches a bound.
 */
export interface FinishedFilter {
  /** Non-empty. */
  states: readonly FinishedState[];
  /** finishedAt >= after (epoch ms, inclusive). */
  after?: number;
  /** finishedAt < before (epoch ms, exclusive). */
  before?: number;
}

/** A finished item as listed for requeue. */
export interface FinishedItem {
  id: string;
  state: FinishedState;
  finishedAt: number | null;
}

/** What a scan's look at the ledger needs to know of one known item (plan). */
export interface ItemPeek {
  id: string;
  state: ItemState;
  attempts: number;
  /** Attempts handed back uncharged: attempts = released, never charged (no backoff to wait for). */
  released: number;
  availableAt: number;
  doneAt: number | null;
  /** The stat of the version last claimed (refresh: on-change compares with it). */
  claimedSize: number | null;
  claimedMtimeMs: number | null;
}

export interface RequeueLedger {
  /**
   * Finished items matching `filter`, in id order, as pages of at most `pageSize` (default
   * 500), each read after the last id of the one before: memory holds one page, and an
   * item requeued (or finished) while the caller iterates is seen at most once.
   */
  finishedPages(filter: FinishedFilter, pageSize?: number): AsyncIterable<FinishedItem[]>;
  /**
   * Those of `ids` that still match `filter` -> pending, in one transaction: attempts and
   * released 0 (a new cycle with the whole retry budget, as dead-letter retry and refresh
   * do), available now, doneAt and deadAt cleared, lastError kept. A claimed or pending
   * item never matches, so a run in progress keeps its claims. Counted in
   * LedgerTotals.requeued in the same transaction. Returns the ids moved.
   */
  requeue(ids: string[], filter: FinishedFilter, now: number): Promise<string[]>;
  /** The known items among `ids` (any order; unknown ids left out). Only reads. */
  peek(ids: string[]): Promise<ItemPeek[]>;
}

export const FINISHED_PAGE_SIZE = 500;

/** Parameters of the filter as both adapters bind them: the states as a JSON array / text[], bounds or null. */
export function filterParams(f: FinishedFilter): { states: FinishedState[]; after: number | null; before: number | null } {
  const states = [...new Set(f.states)];
  if (states.length === 0 || states.some((s) => s !== 'done' && s !== 'dead')) {
    throw new TypeError(`requeue filter: states must be a non-empty list of 'done' and 'dead', got ${JSON.stringify(f.states)}`);
  }
  for (const [k, v] of [['after', f.after], ['before', f.before]] as const) {
    if (v !== undefined && !Number.isFinite(v)) throw new TypeError(`requeue filter: ${k} must be epoch milliseconds, got ${String(v)}`);
  }
  return { states, after: f.after ?? null, before: f.before ?? null };
}

/** Pages keyed by the last id seen (both adapters). `fetch(afterId, n)`: up to n items after it. */
export async function* finishedPages(
  fetch: (afterId: string, n: number) => FinishedItem[] | Promise<FinishedItem[]>,
  pageSize = FINISHED_PAGE_SIZE,
): AsyncGenerator<FinishedItem[]> {
  if (!Number.isSafeInteger(pageSize) || pageSize < 1) throw new RangeError(`finishedPages: pageSize must be a positive integer, got ${pageSize}`);
  // Ids are never empty: '' is before every one.
  let after = '';
  for (;;) {
    const page = await fetch(after, pageSize);
    if (page.length > 0) yield page;
    const last = page[page.length - 1];
    if (page.length < pageSize || last === undefined) return;
    after = last.id;
  }
}
