import { wellFormed } from '../well-formed.js';
import type { DiscoveredItem } from '../types.js';

/**
 * A discovered batch as the statements take it: parallel arrays for unnest. Shared by
 * discovery (discover.ts) and the refresh statements (refresh.ts), which neither import
 * each other.
 */
export interface BatchColumns {
  ids: string[];
  sizes: (number | null)[];
  mtimes: (number | null)[];
}

/** One id per row, well-formed (a repeat would make the upsert touch a row twice: an error). */
export function batchColumns(items: DiscoveredItem[]): BatchColumns {
  const batch: BatchColumns = { ids: [], sizes: [], mtimes: [] };
  const seen = new Set<string>();
  for (const it of items) {
    const id = wellFormed(it.id);
    if (seen.has(id)) continue;
    seen.add(id);
    batch.ids.push(id);
    batch.sizes.push(it.size ?? null);
    batch.mtimes.push(it.mtimeMs ?? null);
  }
  return batch;
}

/** The batch minus the ids in `drop` (parallel arrays kept aligned). */
export function batchWithout(b: BatchColumns, drop: Set<string>): BatchColumns {
  const out: BatchColumns = { ids: [], sizes: [], mtimes: [] };
  b.ids.forEach((id, i) => {
    if (drop.has(id)) return;
    out.ids.push(id);
    out.sizes.push(b.sizes[i] ?? null);
    out.mtimes.push(b.mtimes[i] ?? null);
  });
  return out;
}

/**
 * New ids a pod's discovery left unrecorded (DiscoverOptions.recordOnClaim), by id: the
 * stat to record and the pass that found them. The pod's claim (settleOffered) inserts
 * those it takes already claimed, one row write where the insert and the claim were two.
 */
export type Unrecorded = Map<string, { size: number | null; mtime: number | null; pass: string }>;
