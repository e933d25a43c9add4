import { RETRY_DEAD_PAGE } from '../dead-pages.js';
import { wellFormed } from '../well-formed.js';
import type { Claim, ReclaimOptions } from '../types.js';
import type { Exec, PostgresExecutor } from './connection.js';
import { bumpQuery } from './counters.js';
import { applyFailures, claimColumns, completeQuery, releaseQuery, type HeldFailure } from './finish.js';
import { STOP_KEY_PREFIX } from './meta.js';
import { ident, lookupIds, q, type Query } from './query.js';

/**
 * The owner's heartbeat: extend the lease of EVERY claim `owner` still holds, and return
 * them. Not only the ids asked about: a live owner also holds claims it has not started
 * yet (the rest of a discovered batch, waiting for a slot in the runner's channel), and
 * with many pods an un-renewed one would expire and be taken over while still queued.
 * Rows are locked in id order, the order discovery's upsert uses (no deadlock). Never
 * shortened: a claim sent after this renewal (its lease counted from later) may commit first,
 * and the claiming pod's lease guard counts from the claim.
 */
export const renewQuery = (schema: string, owner: string, leaseUntil: number): Query =>
  q(
    `UPDATE ${ident(schema)}.items AS i SET lease_until = greatest(i.lease_until, $2)
FROM (SELECT id FROM ${ident(schema)}.items WHERE state = 'claimed' AND owner = $1 ORDER BY id FOR UPDATE) AS r
WHERE i.id = r.id
RETURNING i.id`,
    owner,
    leaseUntil,
  );

/**
 * Every claim not owned by `exceptOwner`, locked. Only right when the caller knows no
 * other run is alive (the SQLite ledger under its flock); see expiredQuery for many pods.
 */
export const orphansQuery = (schema: string, exceptOwner: string): Query =>
  q(
    `SELECT id, owner, attempts, released, updated_at FROM ${ident(schema)}.items
WHERE state = 'claimed' AND owner <> $1 ORDER BY id FOR UPDATE`,
    exceptOwner,
  );

/**
 * Claims whose lease ran out before `now`: their run stopped renewing (killed, or cut
 * off from the database for longer than a lease); only the pass `pass`'s when given. SKIP
 * LOCKED: a row another pod is reclaiming or renewing right now is left to it.
 */
export const expiredQuery = (schema: string, now: number, pass: string | null = null): Query =>
  q(
    `SELECT id, owner, attempts, released, updated_at FROM ${ident(schema)}.items
WHERE state = 'claimed' AND lease_until < $1 AND ($2::text IS NULL OR seen_run = $2) ORDER BY id FOR UPDATE SKIP LOCKED`,
    now,
    pass,
  );

/**
 * last_error is kept: it is what the operator looked at before retrying. seen_run becomes
 * the latest pass's group, as requeue.ts does it and for its reason: a dead row keeps the
 * pass that last scanned it while pending, so a running pass whose scan already passed it
 * would forget it at its end of scan as a deleted file.
 */
const retrySet = (s: string) =>
  `SET state = 'pending', attempts = 0, released = 0, available_at = $1, dead_at = NULL, updated_at = $1,
    seen_run = coalesce((SELECT run_group FROM ${s}.run_lock ORDER BY acquired_at DESC LIMIT 1), seen_run)`;
/** By ids: the rows moved (RETURNING id). */
export const retryDeadQuery = (schema: string, ids: string[], now: number): Query => {
  const s = ident(schema);
  return q(`UPDATE ${s}.items ${retrySet(s)} WHERE state = 'dead' AND id = ANY($2::text[]) RETURNING id`, now, ids);
};

/**
 * One page of `limit` of all dead up to `upTo` (deadUpToQuery), oldest dead first
 * (items_dead); one row: how many it `picked` and how many it `moved`. The bound is in the
 * UPDATE's WHERE too: a row picked that a run dead-lettered again meanwhile is re-checked
 * against it when its lock is taken. A picked row that another session changed meanwhile
 * (a `dead-letter retry ID`, a `requeue --include-dead`, a pass's refresh) is re-checked
 * when its lock is taken and skipped, as it is no longer dead: the page then moves fewer
 * than it picked, and only a page that picked fewer than `limit` is the last one.
 */
export const retryDeadPageQuery = (schema: string, page: { limit: number; upTo: number | null }, now: number): Query => {
  const s = ident(schema);
  const upTo = `(dead_at IS NULL OR dead_at <= $3::bigint)`;
  return q(
    `WITH picked AS (SELECT id FROM ${s}.items WHERE state = 'dead' AND ${upTo} ORDER BY dead_at LIMIT $2),
moved AS (UPDATE ${s}.items ${retrySet(s)} WHERE state = 'dead' AND ${upTo} AND id IN (SELECT id FROM picked) RETURNING id)
SELECT (SELECT count(*) FROM picked)::int AS picked, (SELECT count(*) FROM moved)::int AS moved`,
    now,
    page.limit,
    page.upTo,
  );
};

/**
 * `retry --all` moves the items dead when it began: those dead-lettered up to the latest
 * dead_at then (the pods' time, not the operator's). Paging on until a page came back short
 * also retried again an item it had moved that a live pass then dead-lettered again, with
 * another whole retry budget. NULL: none but undated rows.
 */
export const deadUpToQuery = (schema: string): Query => q(`SELECT max(dead_at) AS up_to FROM ${ident(schema)}.items WHERE state = 'dead'`);

/**
 * Reclaimed rows made pending become the latest pass's (run_lock), as retryDead and requeue
 * do it and for their reason: discovery marks only pending rows, so a claim of an earlier
 * pass (its pod died) that this pass's scan passed while it was held still carries that
 * pass. Taken back by a pod joining late, it was then deleted as a gone file by a
 * sibling's end-of-scan forgetUnseen: its charged attempts and last error forgotten (an
 * item that kills pods was never dead-lettered), counted as gone, found again as new.
 */
export const passOfReclaimedQuery = (schema: string, ids: string[]): Query => {
  const s = ident(schema);
  return q(
    `UPDATE ${s}.items SET seen_run = coalesce((SELECT run_group FROM ${s}.run_lock ORDER BY acquired_at DESC LIMIT 1), seen_run)
WHERE id = ANY($1::text[]) AND state = 'pending'`,
    ids,
  );
};

interface OrphanRow {
  id: string;
  owner: string;
  attempts: number;
  released: number;
  updated_at: number;
}

/**
 * Of `owners`, those told to stop (an operator's signal: their drain began) before they
 * died: their claims were cut from outside, not by their items.
 */
const stoppedOwnersQuery = (schema: string, owners: string[]): Query =>
  q(`SELECT substr(key, ${STOP_KEY_PREFIX.length + 1}) AS owner FROM ${ident(schema)}.meta WHERE key = ANY($1::text[])`, owners.map((o) => STOP_KEY_PREFIX + o));

/**
 * The stop records of owners that hold no claim any more (reclaimed here, or handed back
 * by their own drain): nothing is left for them to protect. At each reclaim (a run's start,
 * and when a pass finds expired claims), so they do not pile up.
 */
const forgetStopsQuery = (schema: string): Query => {
  const s = ident(schema);
  return q(
    `DELETE FROM ${s}.meta AS m WHERE left(m.key, ${STOP_KEY_PREFIX.length}) = $1
  AND NOT EXISTS (SELECT 1 FROM ${s}.items AS i WHERE i.state = 'claimed' AND i.owner = substr(m.key, ${STOP_KEY_PREFIX.length + 1}))`,
    STOP_KEY_PREFIX,
  );
};

/** Crash recovery, lease renewal and dead-letter requeue. */
export interface RecoverOps {
  reclaimOrphans(exceptOwner: string, opts: ReclaimOptions): Promise<number>;
  reclaimExpired(opts: ReclaimOptions & { passId?: string }): Promise<number>;
  renew(owner: string, ids: string[], leaseUntil: number): Promise<string[]>;
  retryDead(ids: string[] | 'all', now: number, onPage?: (moved: number) => void): Promise<number>;
}

export function makeRecoverOps(ex: PostgresExecutor, schema: string): RecoverOps {
  // An orphan's attempt is charged like a failure: an item that kills the process
  // every time (OOM, segfault) must end up dead, not crash every run forever. One whose
  // output was committed before the run died (updated_at is the claim's time) is done.
  const reclaim = async (what: string, query: Query, why: string, opts: ReclaimOptions): Promise<number> => {
    const { count, dead } = await ex.tx(what, async (exec: Exec) => {
      const all = await exec<OrphanRow>(query);
      const rows: OrphanRow[] = [];
      const committed: Claim[] = [];
      for (const r of all) {
        if (opts.committed?.(r.id, Number(r.updated_at))) committed.push({ id: r.id, owner: r.owner, attempt: r.attempts, charged: 0 });
        else rows.push(r);
      }
      // completeQuery bumps items_done itself; the rows are locked by `query`.
      if (committed.length > 0) await exec(completeQuery(schema, claimColumns(committed), opts.now));
      // A pod killed while it drained (its stop recorded: a grace period shorter than
      // drain.gracePeriodSeconds) has its claims handed back uncharged, as its drain would
      // have: charged, a good item in flight at every such eviction was dead-lettered.
      const owners = [...new Set(rows.map((r) => r.owner))];
      const stopped = new Set(owners.length > 0 ? (await exec<{ owner: string }>(stoppedOwnersQuery(schema, owners))).map((r) => r.owner) : []);
      const handBack = rows.filter((r) => stopped.has(r.owner));
      if (handBack.length > 0) {
        const claims = handBack.map((r) => ({ id: r.id, owner: r.owner, attempt: r.attempts, charged: r.attempts - r.released }));
        await exec(releaseQuery(schema, claimColumns(claims), opts.now, 'interrupted: its run was killed while it drained (stopped by a signal); not charged'));
      }
      const held: HeldFailure[] = rows.filter((r) => !stopped.has(r.owner)).map((r) => ({
        claim: { id: r.id, owner: r.owner, attempt: r.attempts, charged: r.attempts - r.released },
        released: r.released,
        error: `attempt ${r.attempts} abandoned: ${why}`,
      }));
      const { outcomes, bumps } = await applyFailures(exec, schema, held, opts);
      const bump = bumpQuery(schema, bumps);
      if (bump) await exec(bump);
      if (rows.length > 0) await exec(passOfReclaimedQuery(schema, rows.map((r) => r.id)));
      await exec(forgetStopsQuery(schema));
      const dead = held.filter((_, i) => outcomes[i]?.result === 'applied' && outcomes[i]?.state === 'dead');
      return { count: all.length, dead };
    });
    for (const d of dead) opts.onDeadLettered?.(d.claim.id, d.error);
    return count;
  };

  return {
    reclaimOrphans: (exceptOwner, opts) =>
      reclaim('reclaimOrphans', orphansQuery(schema, exceptOwner), 'the run that claimed it died', opts),
    reclaimExpired: (opts) =>
      reclaim('reclaimExpired', expiredQuery(schema, opts.now, opts.passId ?? null), 'its lease expired (the run that claimed it stopped renewing)', opts),
    async renew(owner, ids, leaseUntil) {
      if (ids.length === 0) return [];
      const rows = await ex.tx('renew', (exec) => exec<{ id: string }>(renewQuery(schema, owner, leaseUntil)));
      const held = new Set(rows.map((r) => r.id));
      return ids.filter((id) => !held.has(wellFormed(id)));
    },
    async retryDead(ids, now, onPage) {
      const once = (query: Query, count: (rows: Record<string, unknown>[]) => { picked: number; moved: number }) =>
        ex.tx('retryDead', async (exec) => {
          const got = count(await exec<Record<string, unknown>>(query));
          const bump = bumpQuery(schema, { items_requeued: got.moved });
          if (bump) await exec(bump);
          return got;
        });
      if (ids !== 'all') {
        const keys = lookupIds(ids);
        return keys.length === 0 ? 0 : (await once(retryDeadQuery(schema, keys, now), (rows) => ({ picked: rows.length, moved: rows.length }))).moved;
      }
      // A page per transaction, as on SQLite: one statement over every dead row was rolled
      // back whole by a signal (Ctrl-C) and held its row locks against a running pass.
      const [row] = await ex.query<{ up_to: string | null }>('retryDead', deadUpToQuery(schema));
      const upTo = row?.up_to == null ? null : Number(row.up_to);
      let moved = 0;
      for (;;) {
        const page = await once(retryDeadPageQuery(schema, { limit: RETRY_DEAD_PAGE, upTo }, now), ([r]) => ({ picked: Number(r?.picked ?? 0), moved: Number(r?.moved ?? 0) }));
        moved += page.moved;
        onPage?.(page.moved);
        // Not `moved < limit`: a page whose rows another session changed meanwhile moves
        // fewer than it picked, and stopping there left every dead item after it dead.
        if (page.picked < RETRY_DEAD_PAGE) return moved;
      }
    },
  };
}
