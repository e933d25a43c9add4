import type { DeadItem, DeadQuery } from './types.js';

/** Dead items `retryDead('all')` moves per transaction (both adapters). */
export const RETRY_DEAD_PAGE = 2000;

/** Rows per round trip to the ledger when none is asked for. */
export const DEAD_PAGE_SIZE = 500;

/** Where the next page starts: strictly after (at, id) in (dead_at, id) order. */
export interface DeadCursor {
  at: number;
  id: string;
}

/**
 * Ledger.deadPages for both adapters: pages keyed by the last (dead_at, id) seen (no
 * OFFSET, which rereads every earlier row), so each page is one index range and memory
 * holds one page. `fetch(after, n)`: up to n dead items after `after`, in that order. The
 * first cursor is (since, ''): ids are never empty, so it takes every item dead at `since`.
 * Pages, not items: a consumer handles a page synchronously, with one await per page.
 */
export async function* deadPages(
  fetch: (after: DeadCursor, n: number) => DeadItem[] | Promise<DeadItem[]>,
  query: DeadQuery = {},
): AsyncGenerator<DeadItem[]> {
  const size = query.pageSize ?? DEAD_PAGE_SIZE;
  if (!Number.isSafeInteger(size) || size < 1) throw new RangeError(`deadPages: pageSize must be a positive integer, got ${size}`);
  let left = query.limit ?? Infinity;
  let after: DeadCursor = { at: query.since ?? Number.MIN_SAFE_INTEGER, id: '' };
  while (left > 0) {
    const want = Math.min(size, left);
    const page = await fetch(after, want);
    if (page.length > 0) yield page;
    left -= page.length;
    const last = page[page.length - 1];
    if (page.length < want || last === undefined) return;
    after = { at: last.deadAt ?? Number.MIN_SAFE_INTEGER, id: last.id };
  }
}
