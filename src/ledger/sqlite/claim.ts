import type { Database } from 'better-sqlite3';
import type { Claim, ClaimOptions } from '../types.js';
import { batchJson } from '../well-formed.js';
import { toClaim, type ClaimedRow } from '../item-rows.js';

// Ids travel as ONE JSON array parameter expanded by json_each, as discovery's batches do (discover.ts).

// A batch travels as ONE JSON parameter ([[id, size, mtimeMs], ...]) expanded by
// json_each: one statement per batch instead of one per item took discover + claim +
// complete from ~57k to ~90k items/s (sequential ids, measured on one core).

/**
 * A claim also records the stat of the version it claims (the row's, just refreshed
 * by discovery), the baseline `refresh: on-change` compares later discoveries with.
 */
const CLAIM_SET = `SET state = 'claimed', owner = @owner, attempts = attempts + 1,
  lease_until = @leaseUntil, claimed_size = size, claimed_mtime_ms = mtime_ms, updated_at = @now`;

/**
 * Claim at the slot, step 1: of the ids asked for (a flat JSON array, in order), the rows
 * claimable now, with what the claim needs to know. Step 2 (CLAIM_IDS_SQL) writes them.
 * Two plain statements cost less than one UPDATE ... RETURNING for the few ids of a
 * slot batch (measured), and inside the IMMEDIATE transaction nothing changes between them.
 */
export const CLAIMABLE_ROWS_SQL = `
SELECT i.id, i.attempts, i.released FROM json_each(@batch) AS j CROSS JOIN items AS i ON i.id = j.value
WHERE +i.state = 'pending' AND +i.available_at <= @now ORDER BY j.key`;

export const CLAIM_IDS_SQL = `UPDATE items ${CLAIM_SET} WHERE id IN (SELECT value FROM json_each(@batch))`;

/** The last error recovery gives an attempt whose run died while it ran (recover.ts). */
export const abandonedError = (attempt: number): string => `attempt ${attempt} abandoned: the run that claimed it died`;

/**
 * A suspect: charged twice or more, the last time by a run that died while it ran. Nothing
 * can tell which of the attempts in flight killed the process (an out-of-memory kill, a
 * segfault), so the sweep runs suspects one at a time: the item that kills the process is
 * then charged alone, and the good items that happened to run beside it twice are not
 * dead-lettered with it. Twice: one death is most often the node or an eviction, and its
 * attempts then run again side by side, not one after another; an item that kills the
 * process does it again. A suspect that fails or succeeds on its own is one no longer.
 * Word for word the predicate of the items_suspect index (migration 005).
 */
export const ABANDONED_GLOB = `'attempt * abandoned: the run that claimed it died'`;
const SUSPECT = `attempts - released >= 2 AND last_error GLOB ${ABANDONED_GLOB}`;
/** A claimed row that was a suspect when it was claimed (the claim added an attempt). */
export const CLAIMED_SUSPECT = `attempts - released >= 3 AND last_error GLOB ${ABANDONED_GLOB}`;

/**
 * The end-of-scan sweep: this run's pending items whose backoff has passed, earliest
 * first, but for the suspects (below). Its bound LIMIT costs a re-prepare per call, which
 * is fine once per sweep. Equal waits go oldest row first: rowid is the pending index's
 * last column, so the LIMIT stops after `limit` entries; ordered by id, SQLite sorted every
 * row of an equal wait per call (a requeue of 50,000 items behind the scan: ~26 ms per
 * claim of 8, a sweep of ~300 items/s).
 */
export const CLAIM_DUE_SQL = `
UPDATE items ${CLAIM_SET}
WHERE id IN (
  SELECT id FROM items
  WHERE state = 'pending' AND seen_run = @runId AND available_at <= @now AND (${SUSPECT}) IS NOT 1
  ORDER BY available_at, rowid LIMIT @limit)
RETURNING id, attempts, released, available_at`;

/**
 * The sweep's suspect: the due one of this run waiting longest, unless one of this owner's
 * claims is a suspect still running (its few claimed rows, by the owner index).
 */
export const CLAIM_SUSPECT_SQL = `
UPDATE items ${CLAIM_SET}
WHERE id = (
  SELECT id FROM items INDEXED BY items_suspect
  WHERE state = 'pending' AND ${SUSPECT} AND seen_run = @runId AND available_at <= @now
  ORDER BY available_at, id LIMIT 1)
AND NOT EXISTS (SELECT 1 FROM items WHERE state = 'claimed' AND owner = @owner AND ${CLAIMED_SUSPECT})
RETURNING id, attempts, released, available_at`;

export const NEXT_DUE_SQL = `SELECT min(available_at) FROM items WHERE state = 'pending' AND seen_run = ?`;

/** The claim verbs of the SQLite ledger (synchronous; the Ledger wraps them). */
export interface ClaimOps {
  claim(ids: string[], opts: ClaimOptions): Claim[];
  /** claim() without its own transaction (settle runs it inside its own). */
  claimIn(ids: string[], opts: ClaimOptions): Claim[];
  claimDue(opts: ClaimOptions & { limit: number }): Claim[];
  nextDueAt(runId: string): number | null;
}

export function makeClaimOps(db: Database): ClaimOps {
  const claimableRows = db.prepare(CLAIMABLE_ROWS_SQL);
  const claimIds = db.prepare(CLAIM_IDS_SQL);
  const claimDue = db.prepare(CLAIM_DUE_SQL);
  // Every claim of the sweep asks for a suspect first: with none (the rule), one seek.
  const claimSuspect = db.prepare(CLAIM_SUSPECT_SQL);
  const nextDue = db.prepare(NEXT_DUE_SQL).pluck();

  const claimIn = (ids: string[], opts: ClaimOptions): Claim[] => {
    if (ids.length === 0) return [];
    const unique = ids.length === 1 ? ids : [...new Set(ids)];
    const rows = claimableRows.all({ batch: batchJson(unique), now: opts.now }) as ClaimedRow[];
    if (rows.length === 0) return [];
    claimIds.run({ ...claimParams(opts), batch: batchJson(rows.map((r) => r.id)) });
    // The claim is attempt + 1 of what the row had.
    return rows.map((r) => toClaim({ id: r.id, attempts: r.attempts + 1, released: r.released }, opts.owner));
  };
  const claimTx = db.transaction(claimIn);

  const claimDueTx = db.transaction((opts: ClaimOptions & { limit: number }): Claim[] => {
    if (opts.limit <= 0) return [];
    const params = { ...claimParams(opts), runId: opts.runId };
    const claimed = claimSuspect.all(params) as (ClaimedRow & { available_at: number })[];
    if (opts.limit > claimed.length) claimed.push(...(claimDue.all({ ...params, limit: opts.limit - claimed.length }) as (ClaimedRow & { available_at: number })[]));
    // RETURNING order is unspecified; the longest-waiting item goes first.
    claimed.sort((a, b) => a.available_at - b.available_at || (a.id < b.id ? -1 : 1));
    return claimed.map((r) => toClaim(r, opts.owner));
  });

  return {
    claim: (ids, opts) => (ids.length === 0 ? [] : claimTx.immediate(ids, opts)),
    claimIn,
    claimDue: (opts) => claimDueTx.immediate(opts),
    nextDueAt: (runId) => (nextDue.get(runId) as number | null | undefined) ?? null,
  };
}

function claimParams(opts: ClaimOptions): { owner: string; leaseUntil: number; now: number } {
  return { owner: opts.owner, leaseUntil: opts.now + opts.leaseMs, now: opts.now };
}
