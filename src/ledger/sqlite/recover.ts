import type { Database } from 'better-sqlite3';
import { RETRY_DEAD_PAGE } from '../dead-pages.js';
import type { ReclaimOptions } from '../types.js';
import type { Counters } from './counters.js';
import type { FinishOps } from './finish.js';
import { wellFormed } from '../well-formed.js';
import { abandonedError } from './claim.js';
import { GET_META_SQL, PASS_KEY, STOP_KEY } from './meta.js';
import { removeJournal } from './start-journal.js';
import { replayJournal } from './write-behind.js';

export const ORPHANS_SQL = `SELECT id, owner, attempts, updated_at FROM items WHERE state = 'claimed' AND owner IS NOT ?`;

export const RENEW_SQL = `UPDATE items SET lease_until = ? WHERE id = ? AND state = 'claimed' AND owner = ?`;

/**
 * updated_at past the row's last transition, whatever the caller's clock (see REQUEUE_SQL).
 * seen_run becomes the pass that discovered last (PASS_KEY), as REQUEUE_SQL and for its
 * reason: discovery does not rewrite a dead row found unchanged within the day (discover.ts),
 * so one a running pass has scanned already carries an older pass, and pending again, that
 * pass's end-of-scan forgetUnseen would take it for a deleted file.
 */
const RETRY_SET = `SET state = 'pending', attempts = 0, released = 0, available_at = @now,
  dead_at = NULL, updated_at = max(@now, updated_at + 1),
  seen_run = coalesce((SELECT value FROM meta WHERE key = '${PASS_KEY}'), seen_run)`;
/** last_error is kept: it is what the operator looked at before retrying. */
export const RETRY_DEAD_ONE_SQL = `UPDATE items ${RETRY_SET} WHERE id = @id AND state = 'dead'`;
/**
 * `retry --all` a page at a time, oldest dead first (the dead index), with a pause between
 * pages (SqliteLedger.retryDead): one transaction over a million dead rows held the write
 * lock for over 5 s, and a running pass's write gives up after that (BUSY_TIMEOUT_MS).
 * 200,000 dead rows: 2.3 s in all, another process's writer waiting at most ~50 ms
 * (bench/proto/retry-dead.mjs; one transaction: 1.5 s, the writer waiting all of it).
 */
export const RETRY_DEAD_PAGE_SQL = `UPDATE items ${RETRY_SET} WHERE id IN (
  SELECT id FROM items WHERE state = 'dead' AND (dead_at IS NULL OR dead_at <= @upTo) ORDER BY dead_at LIMIT @limit)`;
/**
 * `retry --all` moves the items dead when it began: those dead-lettered up to the latest
 * dead_at then (the ledger's own time, from the run's clock, not the operator's). Paging
 * on until a page came back short also retried again an item it had moved that a live run
 * then dead-lettered again, with another whole retry budget. NULL: none but undated rows.
 */
export const DEAD_UP_TO_SQL = `SELECT max(dead_at) FROM items WHERE state = 'dead'`;
export { RETRY_DEAD_PAGE };

/** Crash recovery, lease renewal and dead-letter requeue (synchronous; the Ledger wraps them). */
export interface RecoverOps {
  reclaimOrphans(exceptOwner: string, opts: ReclaimOptions): number;
  renew(owner: string, ids: string[], leaseUntil: number): string[];
  /**
   * By ids, or one page (RETRY_DEAD_PAGE) of all dead up to `upTo` (deadUpTo), oldest dead
   * first; returns how many moved.
   */
  retryDead(ids: string[] | { upTo: number | null }, now: number): number;
  /** Where `retry --all` stops (DEAD_UP_TO_SQL). */
  deadUpTo(): number | null;
}

export function makeRecoverOps(db: Database, finish: FinishOps, counters: Counters, journal?: string): RecoverOps {
  const orphans = db.prepare(ORPHANS_SQL);
  const renew = db.prepare(RENEW_SQL);
  const retryOne = db.prepare(RETRY_DEAD_ONE_SQL);
  const retryPage = db.prepare(RETRY_DEAD_PAGE_SQL);

  // An orphan's attempt is charged like a failure: an item that kills the process
  // every time (OOM, segfault) must end up dead, not crash every run forever. One whose
  // output was committed before the run died (updated_at is the claim's time) is done.
  // One of a run killed while it drained (its stop recorded: a grace period shorter than
  // drain.gracePeriodSeconds) is handed back uncharged, as its drain would have: the kill
  // came from outside, and charging it dead-lettered a good item by evictions alone.
  // The items a reclaim dead-lettered, told (ReclaimOptions.onDeadLettered) once it committed.
  let deadLettered: { id: string; error: string }[] = [];
  const reclaimTx = db.transaction((exceptOwner: string, opts: ReclaimOptions): number => {
    deadLettered = [];
    // What a dead run journalled and had not written yet becomes its claims and successes.
    if (journal !== undefined) replayJournal(db, finish, journal, opts.now, { strict: true, advance: true, committed: opts.committed });
    // Prepared here, not with the others: a read-only connection to an old ledger has no meta table.
    const stopped = db.prepare(GET_META_SQL).pluck().get(STOP_KEY) as string | undefined;
    const rows = orphans.all(exceptOwner) as { id: string; owner: string; attempts: number; updated_at: number }[];
    let moved = 0;
    for (const r of rows) {
      const claim = { id: r.id, owner: r.owner, attempt: r.attempts, charged: 0 };
      if (opts.committed?.(r.id, r.updated_at)) {
        if (finish.completeIn([claim], opts.now)[0]?.result === 'applied') moved++;
        continue;
      }
      const error = abandonedError(r.attempts);
      const out =
        r.owner === stopped
          ? finish.releaseOne(claim, opts.now, `attempt ${r.attempts} interrupted: its run was killed while it drained (stopped by a signal); not charged`)
          : finish.failOne(claim, error, opts);
      if (out.result !== 'applied') continue;
      if (out.state === 'dead') deadLettered.push({ id: r.id, error });
      moved++;
    }
    if (stopped !== undefined) db.prepare('DELETE FROM meta WHERE key = ?').run(STOP_KEY);
    return moved;
  });

  const renewTx = db.transaction((owner: string, ids: string[], leaseUntil: number): string[] =>
    ids.filter((id) => renew.run(leaseUntil, wellFormed(id), owner).changes === 0),
  );

  const deadUpTo = db.prepare(DEAD_UP_TO_SQL).pluck();
  const retryTx = db.transaction((ids: string[] | { upTo: number | null }, now: number): number => {
    let moved = 0;
    if (!Array.isArray(ids)) moved = retryPage.run({ now, upTo: ids.upTo, limit: RETRY_DEAD_PAGE }).changes;
    else for (const id of new Set(ids.map(wellFormed))) moved += retryOne.run({ id, now }).changes;
    counters.bump('items_requeued', moved);
    return moved;
  });

  return {
    reclaimOrphans: (exceptOwner, opts) => {
      const moved = reclaimTx.immediate(exceptOwner, opts);
      // Only once its records are committed: a crash before this replays them again, harmlessly.
      if (journal !== undefined) removeJournal(journal);
      for (const d of deadLettered) opts.onDeadLettered?.(d.id, d.error);
      deadLettered = [];
      return moved;
    },
    renew: (owner, ids, leaseUntil) => (ids.length === 0 ? [] : renewTx.immediate(owner, ids, leaseUntil)),
    retryDead: (ids, now) => retryTx.immediate(ids, now),
    deadUpTo: () => deadUpTo.get() as number | null,
  };
}
