/**
 * The ledger as the start journal says it is. While a run writes claims and successes
 * behind (write-behind.ts), and after a run that died before its next run replayed its
 * journal, the rows lag: an attempt that started shows `pending`, a success `claimed` or
 * `pending`. Every other connection (`status`, `dead-letter`, tools) reads the rows
 * through the journal, so it sees what happened, as the run itself does.
 */
import type { FinishedFilter, FinishedItem } from '../requeue-types.js';
import type { ItemCounts, ItemRecord } from '../types.js';
import { readJournal } from './start-journal.js';

interface Journalled {
  /** 'released': started and handed back (an R record: start-journal.ts). */
  state: 'claimed' | 'done' | 'released';
  owner: string;
  attempt: number;
  at: number;
}

/**
 * What the journal says of each id it names (its last record wins), from the segments not
 * written into the ledger yet (`written`: the last one that is), and its hand-backs of any
 * segment (fenced by the claim they hand back, as a replay is).
 */
export function journalled(file: string, written: number): Map<string, Journalled> {
  const { starts, done, released } = readJournal(file, false, written);
  const out = new Map<string, Journalled>();
  for (const s of starts) if (s.segment > written) out.set(s.id, { state: 'claimed', owner: s.owner, attempt: s.attempt, at: s.at });
  for (const r of released) out.set(r.id, { state: 'released', owner: r.owner, attempt: r.attempt, at: r.at });
  for (const d of done) if (d.segment > written) out.set(d.id, { state: 'done', owner: d.owner, attempt: d.attempt, at: d.at });
  return out;
}

/**
 * A row as the journal has moved it on, or as it is when the journal's record does not
 * follow from it (written already, or overtaken: a replay would not apply it either).
 */
export function throughJournal(row: ItemRecord, j: Journalled | undefined, updatedAt?: number): ItemRecord {
  if (!j) return row;
  // A hand-back of the claim the row holds: pending, not charged (the replay's HELD_SQL).
  if (j.state === 'released' && row.state === 'claimed' && row.owner === j.owner && row.attempts === j.attempt) {
    return { ...row, state: 'pending', owner: null, leaseUntil: null, released: row.released + 1 };
  }
  // Written since the record (a requeue, a dead-letter retry): the record is history.
  if (updatedAt !== undefined && updatedAt > j.at) return row;
  const startedFromRow = row.state === 'pending' && row.attempts === j.attempt - 1;
  if (j.state === 'claimed' && startedFromRow) {
    return { ...row, state: 'claimed', attempts: j.attempt, owner: j.owner };
  }
  const claimedByIt = row.state === 'claimed' && row.owner === j.owner && row.attempts === j.attempt;
  if (j.state === 'done' && (startedFromRow || claimedByIt)) {
    return { ...row, state: 'done', attempts: j.attempt, owner: null, leaseUntil: null, doneAt: j.at };
  }
  return row;
}

/** Counts moved on by the journal: each journalled id's row is read and re-counted. */
export function countsThroughJournal(
  counts: ItemCounts,
  j: Map<string, Journalled>,
  get: (id: string) => ItemRecord | null,
  updatedAt: (id: string) => number | undefined,
): ItemCounts {
  const out = { ...counts };
  for (const [id, rec] of j) {
    const row = get(id);
    if (!row) continue;
    const now = throughJournal(row, rec, updatedAt(id));
    if (now.state === row.state) continue;
    out[row.state]--;
    out[now.state]++;
  }
  return out;
}

/**
 * Items the journal finished whose rows do not show it yet, that `filter` selects (the
 * journal records successes only): what a read-only finishedPages adds to the rows' pages,
 * as a writer's catch-up would have written them first.
 */
export function finishedThroughJournal(
  j: Map<string, Journalled>,
  filter: FinishedFilter,
  get: (id: string) => ItemRecord | null,
  updatedAt: (id: string) => number | undefined,
): FinishedItem[] {
  if (!filter.states.includes('done')) return [];
  const out: FinishedItem[] = [];
  for (const [id, rec] of j) {
    if (rec.state !== 'done') continue;
    const row = get(id);
    // A finished row is listed (or not) by the rows' own pages: the journal never moves it.
    if (!row || row.state === 'done' || row.state === 'dead') continue;
    const now = throughJournal(row, rec, updatedAt(id));
    const at = now.doneAt;
    if (now.state !== 'done' || at == null) continue;
    if ((filter.after !== undefined && at < filter.after) || (filter.before !== undefined && at >= filter.before)) continue;
    out.push({ id: row.id, state: 'done', finishedAt: at });
  }
  return out.sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
}

/**
 * The rows' pages with `extra` (sorted by id) merged in: each extra item goes into the page
 * whose ids reach past it, so the pages stay in id order (such a page holds more than the
 * page size); any left over make a last page.
 */
export async function* withFinished(pages: AsyncIterable<FinishedItem[]>, extra: FinishedItem[]): AsyncGenerator<FinishedItem[]> {
  const left = [...extra];
  for await (const page of pages) {
    const last = page[page.length - 1]!.id;
    let k = 0;
    while (k < left.length && left[k]!.id < last) k++;
    yield k === 0 ? page : [...page, ...left.splice(0, k)].sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
  }
  if (left.length > 0) yield left;
}
