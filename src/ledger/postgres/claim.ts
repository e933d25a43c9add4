import { toClaim, type ClaimedRow } from '../item-rows.js';
import { wellFormed } from '../well-formed.js';
import type { Claim, ClaimOptions, FenceOutcome, PassSiblings } from '../types.js';
import type { PostgresExecutor } from './connection.js';
import { claimColumns, completeWrite, COMPLETED, fencedOutcomes, fencedWriteCtes, type Applied, type ClaimColumns } from './finish.js';
import { ident, numberArray, q, textArray, type NamedQuery, type Query } from './query.js';
import type { BatchColumns, Unrecorded } from './batch.js';
import { insertNewQuery } from './discover.js';
import { claimedSuspect, handBackError, suspect } from './suspect.js';

/**
 * A claim records the stat of the version it claims (the row's, just refreshed by
 * discovery): the baseline `refresh: on-change` compares later discoveries with. The
 * arguments are parameter references ($n) of the statement's owner, now and lease end.
 */
const claimSet = (owner: string, now: string, leaseUntil: string): string =>
  `SET state = 'claimed', owner = ${owner}, attempts = i.attempts + 1, lease_until = ${leaseUntil},
  claimed_size = i.size, claimed_mtime_ms = i.mtime_ms, updated_at = ${now}`;
/** $owner, $now, $leaseUntil are parameters 2, 3, 4 of the claim-only statements. */
const CLAIM_SET = claimSet('$2', '$3', '$4');

/**
 * `it` is pending, for a statement that looks given ids up: written so that the planner can
 * only reach them by primary key, one probe per id. With `state = 'pending'` as such, the
 * partial index items_pending_pass (WHERE state = 'pending') qualifies, and a table analyzed
 * while hardly a row was pending (a shared pass inserts its rows claimed) says it holds one
 * row: every plan, generic or custom, then read the whole index and matched the ids against
 * it, once per claim. A pass that had piled up pending rows paid for all of them at each claim
 * (3,400 pending: 5-20 ms a claim instead of 0.2-0.4). plan_cache_mode does not help (custom
 * plans chose the same). Compared under another collation, the test no longer implies the
 * index's predicate (PostgreSQL proves a partial index's predicate only from a comparison
 * under the same collation); "C" and the column's collation agree on equality, so the rows
 * are the same. docs/benchmarks.md, 2026-12-06 10:11.
 */
const PENDING_BY_ID = `it.state = 'pending' COLLATE "C"`;

export interface ClaimParams {
  owner: string;
  now: number;
  leaseUntil: number;
}

/**
 * Claim those of `ids` still claimable (pending, past their backoff), for the handler
 * slots free now. FOR UPDATE SKIP LOCKED: a row another transaction is claiming right
 * now is skipped, never waited for and never handed out twice; the state is re-checked
 * on the row's latest version under the lock (READ COMMITTED).
 */
export const claimBatchQuery = (schema: string, ids: string[], p: ClaimParams): Query =>
  q(
    `WITH c AS (
  SELECT it.id FROM ${ident(schema)}.items AS it
  WHERE it.id = ANY($1::text[]) AND ${PENDING_BY_ID} AND it.available_at <= $3
  ORDER BY it.id
  FOR UPDATE OF it SKIP LOCKED)
UPDATE ${ident(schema)}.items AS i ${CLAIM_SET}
FROM c WHERE i.id = c.id
RETURNING i.id, i.attempts, i.released`,
    ids,
    p.owner,
    p.now,
    p.leaseUntil,
  );

/**
 * `s`: the pass's suspect waiting longest ($pass, $now, $owner, $limit, $exclude as `at`
 * numbers them), when a slot is left after the claims `taken` counts: suspects go last, as
 * on SQLite, so a pod evicted again and again soon after its start charges fresh items,
 * not the same suspects. Not while the owner runs a suspect (its few claimed rows, by
 * items_claimed_owner); `completing`: one the statement completes (CTE `w`) is over.
 * Only once the caller's scan is over (`at(8)`, a boolean): until its scan has marked them,
 * the pass's only suspects are the ones the pod's start just reclaimed (recover.ts makes
 * them the pass's), so the item in flight at each kill was taken first again, and again,
 * until dead, while the suspects waiting longer were never looked at.
 * By the items_suspect index (migration 005): one seek, none there unless pods died.
 */
const suspectCte = (schema: string, at: (n: number) => string, completing: boolean, taken: string): string => `s AS (
  SELECT it.id, NULL::bigint AS ord FROM ${ident(schema)}.items AS it
  WHERE it.state = 'pending' AND ${suspect('it')} AND it.seen_run = ${at(5)} AND it.available_at <= ${at(2)}
    AND ${at(8)}::boolean AND ${at(6)} > ${taken} AND NOT (it.id = ANY (${at(7)}::text[]))
    AND NOT EXISTS (SELECT 1 FROM ${ident(schema)}.items AS h
      WHERE h.state = 'claimed' AND h.owner = ${at(3)} AND ${claimedSuspect('h')}${completing ? ' AND h.id NOT IN (SELECT id FROM w)' : ''})
  ORDER BY it.available_at, it.id LIMIT 1
  FOR UPDATE OF it SKIP LOCKED)`;

/**
 * A shared pass's claim (SharedPassLedger.settleOffered): at most `limit` items, first the
 * offered ids (in the caller's order) still pending and past their backoff, then, when those
 * fall short, the pass's other pending items as the sweep takes them (claimDueQuery), never
 * one the caller holds (`exclude`). Rows other pods hold are skipped (SKIP LOCKED, under
 * LIMIT: only rows locked here count toward it). A pod's candidates are what its own scan
 * found, and a pod behind its siblings finds most of them taken: the fill gives it full
 * claims anyway, whoever scanned the items. `ord` says how far down the offered list the
 * claim got (NULL for the fill). The claim marks the row as the pass's: whoever claims it,
 * it is then one of the pass's claims (siblingsQuery).
 *
 * `done`: the caller's finished attempts, completed (fenced, counted) in the same statement,
 * so that a pod's claims in the ledger never outnumber its slots: a kill right after the
 * claim leaves at most `concurrency` claims to charge, as on SQLite. Without completions the
 * statement is the claim alone. `again`: the executor's retry, whose completions allow for
 * the first try's commit (fencedWriteCtes's `already`).
 *
 * Suspects (suspect.ts) are neither offered nor filled: with a slot left, the claim takes
 * one, only while the caller runs none (an attempt completed by this very statement is
 * over), so the item that kills the pod is charged alone among them; and only when
 * `suspects` says the caller's scan is over (suspectCte).
 */
export const settleOfferedQuery = (
  schema: string,
  done: ClaimColumns,
  ids: string[],
  p: ClaimParams,
  pass: string,
  limit: number,
  exclude: readonly string[],
  suspects = true,
  again = false,
  fresh?: FreshColumns,
): NamedQuery => {
  const items = `${ident(schema)}.items`;
  // With `fresh`: the offer's first `limit` claimable ids, known (c) or new (nn), by offer order.
  const taken = fresh ? '(SELECT count(*) FROM p WHERE NOT p.fresh) + (SELECT count(*) FROM n)' : '(SELECT count(*) FROM c)';
  const freshCtes = (at: (n: number) => string): string => `nn AS (
  SELECT n.id, n.size, n.mtime_ms, n.ord FROM unnest(${at(9)}::text[], ${at(10)}::bigint[], ${at(11)}::float8[], ${at(12)}::bigint[]) AS n(id, size, mtime_ms, ord)
  WHERE n.id NOT IN (SELECT id FROM c)),
p AS (SELECT id, ord, false AS fresh FROM c UNION ALL SELECT id, ord, true FROM nn ORDER BY ord LIMIT ${at(6)}),
n AS (
  INSERT INTO ${items} AS i (id, size, mtime_ms, seen_run, available_at, first_seen_at, updated_at, seen_at,
    state, owner, attempts, lease_until, claimed_size, claimed_mtime_ms)
  SELECT nn.id, nn.size, nn.mtime_ms, ${at(5)}, ${at(2)}, ${at(2)}, ${at(2)}, ${at(2)}, 'claimed', ${at(3)}, 1, ${at(4)}, nn.size, nn.mtime_ms
  FROM nn JOIN p ON p.id = nn.id AND p.fresh
  ORDER BY nn.id COLLATE "C"
  ON CONFLICT (id) DO NOTHING
  RETURNING i.id, i.attempts, i.released),
`;
  // Parameter numbers: with completions as in completeQuery ($1-$5), the claim's after them.
  const claim = (at: (n: number) => string, completing: boolean): string => `c AS (
  SELECT it.id, b.ord FROM unnest(${at(1)}::text[]) WITH ORDINALITY AS b(id, ord)
  JOIN ${items} AS it ON it.id = b.id
  WHERE ${PENDING_BY_ID} AND it.available_at <= ${at(2)} AND (${suspect('it')}) IS NOT TRUE
  ORDER BY b.ord LIMIT ${at(6)}
  FOR UPDATE OF it SKIP LOCKED),
${fresh ? freshCtes(at) : ''}f AS (
  SELECT it.id, NULL::bigint AS ord FROM ${items} AS it
  WHERE it.state = 'pending' AND it.seen_run = ${at(5)} AND it.available_at <= ${at(2)} AND (${suspect('it')}) IS NOT TRUE
    AND NOT (it.id = ANY (${at(7)}::text[])) AND it.id NOT IN (SELECT id FROM c)
  ORDER BY it.available_at, it.id LIMIT greatest(0, ${at(6)} - ${taken})
  FOR UPDATE OF it SKIP LOCKED),
${suspectCte(schema, at, completing, `${taken} + (SELECT count(*) FROM f)`)},
cl AS (
  UPDATE ${items} AS i ${claimSet(at(3), at(2), at(4))}, seen_run = ${at(5)}
  FROM (SELECT id, ord FROM ${fresh ? 'p WHERE NOT p.fresh' : 'c'} UNION ALL SELECT id, ord FROM f UNION ALL SELECT id, ord FROM s) AS x WHERE i.id = x.id
  RETURNING i.id, i.attempts, i.released, x.ord)`;
  // New ids taken (n), and those a sibling recorded first (PASSED_OVER: the claim got past them).
  const claimed = `SELECT id, attempts, released, ord, NULL::text AS owner FROM cl${
    fresh
      ? `
UNION ALL
SELECT n.id, n.attempts, n.released, nn.ord, NULL FROM n JOIN nn ON nn.id = n.id
UNION ALL
SELECT p.id, 0, 0, p.ord, '${PASSED_OVER}' FROM p WHERE p.fresh AND p.id NOT IN (SELECT id FROM n)`
      : ''
  }`;
  // Arrays as PostgreSQL's text (textArray: less work per claim than pg's own serialising).
  const freshValues = fresh ? [textArray(fresh.ids), numberArray(fresh.sizes), numberArray(fresh.mtimes), numberArray(fresh.ords)] : [];
  const offered = textArray(ids);
  const excluded = textArray(exclude);
  const suffix = fresh ? '-new' : '';
  if (done.ids.length === 0) {
    return {
      name: `cronsafe-claim${suffix}`,
      ...q(`WITH ${claim((n) => `$${n}`, false)}\n${claimed}`, offered, p.now, p.owner, p.leaseUntil, pass, limit, excluded, suspects, ...freshValues),
    };
  }
  // $2 of the claim is completeQuery's $4 (now); the others follow $5.
  const at = (n: number): string => (n === 2 ? '$4' : `$${n === 1 ? 6 : n + 4}`);
  return {
    name: `${again ? 'cronsafe-complete-claim-again' : 'cronsafe-complete-claim'}${suffix}`,
    ...completing(schema, done, p.now, again, claim(at, true), claimed, [offered, p.owner, p.leaseUntil, pass, limit, excluded, suspects, ...freshValues]),
  };
};

/**
 * A claim statement that first completes `done` (fenced, counted: $1-$5 as completeQuery's,
 * `again` its retry), then runs the claim's CTEs (`ctes`, the rest of the values after $5)
 * and returns the claim's rows (`rows`) and the completions applied (`owner` set).
 */
const completing = (schema: string, done: ClaimColumns, now: number, again: boolean, ctes: string, rows: string, values: unknown[]): Query =>
  q(
    `WITH ${fencedWriteCtes(schema, completeWrite(schema, '$4'), 'items_done', '$5', again ? COMPLETED : 'false')},
${ctes}
${rows}
UNION ALL
SELECT id, attempt, NULL, NULL, owner FROM ok`,
    textArray(done.ids),
    textArray(done.owners),
    numberArray(done.attempts),
    now,
    done.ids.length,
    ...values,
  );

/**
 * settleOfferedQuery's claim when the offer's first `limit` ids are all new (the first pod of
 * a pass, through its scan): nothing to look up, fill or pick, only the fenced completions and
 * an insert of those ids already claimed, attempt 1 (`fresh`: exactly them, in offer order).
 * An id a sibling recorded first is passed over (ON CONFLICT DO NOTHING; the insert goes in
 * id order, as discovery's, so two pods' inserts never wait on each other in a circle).
 */
export const settleNewQuery = (schema: string, done: ClaimColumns, fresh: FreshColumns, p: ClaimParams, pass: string, again = false): NamedQuery => {
  // Without completions: $1-$3 the new ids, then now, owner, lease end, pass; with them, completeQuery's $1-$5 first.
  const at = (n: number): string => (done.ids.length > 0 ? (n === 4 ? '$4' : `$${n < 4 ? n + 5 : n + 4}`) : `$${n}`);
  const insert = `n AS (
  INSERT INTO ${ident(schema)}.items AS i (id, size, mtime_ms, seen_run, available_at, first_seen_at, updated_at, seen_at,
    state, owner, attempts, lease_until, claimed_size, claimed_mtime_ms)
  SELECT d.id, d.size, d.mtime_ms, ${at(7)}, ${at(4)}, ${at(4)}, ${at(4)}, ${at(4)}, 'claimed', ${at(5)}, 1, ${at(6)}, d.size, d.mtime_ms
  FROM unnest(${at(1)}::text[], ${at(2)}::bigint[], ${at(3)}::float8[]) AS d(id, size, mtime_ms)
  ORDER BY d.id COLLATE "C"
  ON CONFLICT (id) DO NOTHING
  RETURNING i.id, i.attempts, i.released)`;
  const claimed = `SELECT id, attempts, released, NULL::bigint AS ord, NULL::text AS owner FROM n`;
  const values = [textArray(fresh.ids), numberArray(fresh.sizes), numberArray(fresh.mtimes)];
  if (done.ids.length === 0) return { name: 'cronsafe-claim-new-only', ...q(`WITH ${insert}\n${claimed}`, ...values, p.now, p.owner, p.leaseUntil, pass) };
  return {
    name: again ? 'cronsafe-complete-claim-new-only-again' : 'cronsafe-complete-claim-new-only',
    ...completing(schema, done, p.now, again, insert, claimed, [...values, p.owner, p.leaseUntil, pass]),
  };
};

/** The new ids (DiscoverOptions.recordOnClaim) of a claim's offer: their stat and place in it (1-based). */
export interface FreshColumns {
  ids: string[];
  sizes: (number | null)[];
  mtimes: (number | null)[];
  ords: number[];
}

/** The `owner` of a row settleOfferedQuery returns for a new id a sibling recorded first (no owner is empty). */
const PASSED_OVER = '';

/** suspectCte's parameter numbers in claimDueQuery. */
const SWEEP_AT: Record<number, string> = { 2: '$3', 3: '$2', 5: '$5', 6: '$6', 7: '$1', 8: 'true' };

/**
 * The sweep: pending items of the pass ($5) whose backoff has passed, earliest first,
 * whoever scanned them (SKIP LOCKED too), never one the caller holds ($1). The order is
 * the index items_pending_pass's (migration 003): a range scan that stops after $6 rows.
 * Suspects last and one at a time, as settleOfferedQuery takes them.
 */
export const claimDueQuery = (schema: string, runId: string, p: ClaimParams, limit: number, exclude: readonly string[] = []): NamedQuery => ({
  name: 'cronsafe-sweep',
  ...q(
    `WITH c AS (
  SELECT it.id FROM ${ident(schema)}.items AS it
  WHERE it.state = 'pending' AND it.seen_run = $5 AND it.available_at <= $3 AND NOT (it.id = ANY($1::text[])) AND (${suspect('it')}) IS NOT TRUE
  ORDER BY it.available_at, it.id LIMIT $6
  FOR UPDATE OF it SKIP LOCKED),
${suspectCte(schema, (n) => SWEEP_AT[n] ?? '', false, '(SELECT count(*) FROM c)')}
UPDATE ${ident(schema)}.items AS i ${CLAIM_SET}
FROM (SELECT id FROM s UNION ALL SELECT id FROM c) AS c WHERE i.id = c.id
RETURNING i.id, i.attempts, i.released, i.available_at`,
    exclude,
    p.owner,
    p.now,
    p.leaseUntil,
    runId,
    limit,
  ),
});

export const nextDueQuery = (schema: string, runId: string): Query =>
  q(`SELECT min(available_at) AS t FROM ${ident(schema)}.items WHERE state = 'pending' AND seen_run = $1`, runId);

/**
 * How far ahead of the caller's `now` a pending item of the pass still counts as due for
 * siblingsQuery: a sibling stamps its hand-back with its own clock, which may read a little
 * later than the caller's (the caller read its clock before the statement; pods' clocks
 * agree only to NTP's precision).
 */
export const DUE_SLACK_MS = 1000;

/**
 * Where the pass's other pods stand, for a pod that has nothing left of its own (no claim
 * held, nothing claimable): their claims of the pass by lease (live ones may come back, as
 * a hand-back or a failure; expired ones are its to reclaim), and whether an item of the
 * pass is due after all (DUE_SLACK_MS), in the same snapshot. `expired` also counts an
 * earlier pass's claims whose lease ran out (a pod of the Job before, killed with claims just
 * before this pass began: live at this pass's start, they were not taken back then, and
 * would otherwise wait for the run after this one). A sibling's hand-back
 * committed after the pod's last sweep is no longer a claim, and must not pass for the end
 * of the pass (by the pending index, items_pending_pass: one seek). First, every claim `owner`
 * still has in the ledger goes back to pending, not charged: the caller holds none, so these
 * are claims committed on a try whose acknowledgement was lost (the retry claimed others),
 * or claims whose completion a database crash forgot (it was written asynchronously).
 * Few rows either way: claims are at most `concurrency` per pod (items_claimed_owner).
 */
export const siblingsQuery = (schema: string, pass: string, owner: string, now: number): Query =>
  q(
    `WITH stray AS (
  UPDATE ${ident(schema)}.items AS i SET state = 'pending', owner = NULL, lease_until = NULL,
    released = i.released + 1, available_at = $3, updated_at = $3,
    last_error = ${handBackError('i', `'handed back: its owner was not running it (a lost acknowledgement, or a completion a database crash forgot)'`)}
  WHERE i.state = 'claimed' AND i.owner = $2
  RETURNING i.id)
SELECT (SELECT count(*) FROM stray) AS stray,
  count(*) FILTER (WHERE lease_until >= $3) AS live,
  count(*) FILTER (WHERE lease_until < $3) AS expired,
  EXISTS (SELECT 1 FROM ${ident(schema)}.items WHERE state = 'pending' AND seen_run = $1 AND available_at <= $3::bigint + ${DUE_SLACK_MS}) AS due
FROM ${ident(schema)}.items WHERE state = 'claimed' AND owner <> $2 AND (seen_run = $1 OR lease_until < $3)`,
    pass,
    owner,
    now,
  );

/** The claim verbs of the PostgreSQL ledger (each one retried transaction or statement). */
export interface ClaimOps {
  claim(ids: string[], opts: ClaimOptions): Promise<Claim[]>;
  /** Complete `done` and claim from the offer, in one statement on the claim session. */
  settleOffered(
    done: Claim[],
    offered: string[],
    opts: ClaimOptions & { limit: number; exclude?: readonly string[]; suspects?: boolean },
  ): Promise<{ complete: FenceOutcome[]; claims: Claim[]; considered: number }>;
  claimDue(opts: ClaimOptions & { limit: number; exclude?: readonly string[] }): Promise<Claim[]>;
  nextDueAt(runId: string): Promise<number | null>;
  siblings(pass: string, owner: string, now: number): Promise<PassSiblings>;
}

/** How many offered ids a claim for `limit` slots looks at (see settleOffered). */
export const offerPrefix = (limit: number): number => Math.max(32, limit * 4);
const claimParams = (opts: ClaimOptions): ClaimParams => ({ owner: opts.owner, now: opts.now, leaseUntil: opts.now + opts.leaseMs });

export function makeClaimOps(ex: PostgresExecutor, schema: string, unrecorded: Unrecorded): ClaimOps {
  /** The offer's ids its discovery left to the claim (DiscoverOptions.recordOnClaim), with their place in it. */
  const freshOf = (wanted: string[], pass: string): FreshColumns | undefined => {
    const out: FreshColumns = { ids: [], sizes: [], mtimes: [], ords: [] };
    wanted.forEach((id, i) => {
      const u = unrecorded.get(id);
      if (u === undefined) return;
      if (u.pass !== pass) unrecorded.delete(id); // another pass's: its scan records it anew
      else {
        out.ids.push(id);
        out.sizes.push(u.size);
        out.mtimes.push(u.mtime);
        out.ords.push(i + 1);
      }
    });
    return out.ids.length > 0 ? out : undefined;
  };
  /**
   * A claim that took nothing makes the caller drop its candidates (the siblings took them):
   * the new ids among them that no claim got to are recorded pending first, so that none is
   * dropped unrecorded (the pass's sweep, any pod's, then claims them).
   */
  const recordLeft = async (pass: string, now: number): Promise<void> => {
    const left = [...unrecorded].filter(([, u]) => u.pass === pass);
    unrecorded.clear();
    for (let i = 0; i < left.length; i += 256) {
      const part = left.slice(i, i + 256);
      const b: BatchColumns = { ids: part.map(([id]) => id), sizes: part.map(([, u]) => u.size), mtimes: part.map(([, u]) => u.mtime) };
      await ex.on('discovery', 'discover', { name: 'cronsafe-insert', ...insertNewQuery(schema, b, pass, now) });
    }
  };

  return {
    async claim(ids, opts) {
      if (ids.length === 0) return [];
      const wanted = ids.map(wellFormed);
      const rows = await ex.tx('claim', (exec) => exec<ClaimedRow>(claimBatchQuery(schema, wanted, claimParams(opts))));
      // RETURNING order is unspecified; hand claims out in the order asked (an id asked twice
      // at its first place, as SQLite does).
      const order = new Map<string, number>();
      for (const [i, id] of wanted.entries()) if (!order.has(id)) order.set(id, i);
      rows.sort((a, b) => (order.get(a.id) ?? 0) - (order.get(b.id) ?? 0));
      return rows.map((r) => toClaim(r, opts.owner));
    },

    async settleOffered(done, offered, opts) {
      if (done.length === 0 && opts.limit <= 0) return { complete: [], claims: [], considered: 0 };
      // The claim looks at a prefix of the offer only (`considered` tells the caller where it
      // stopped; the rest is offered again): a pod offers its whole channel, but each offered
      // id costs a lookup and a sort place, and a claim for a few slots rarely needs more than
      // a few candidates. Those a sibling took are passed over; when the prefix falls short,
      // the fill takes the pass's other pending items.
      const wanted = offered.slice(0, offerPrefix(opts.limit)).map(wellFormed);
      const exclude = (opts.exclude ?? []).map(wellFormed);
      const fresh = opts.limit > 0 ? freshOf(wanted, opts.runId) : undefined;
      if (fresh && fresh.ords.length >= opts.limit && fresh.ords[opts.limit - 1] === opts.limit) {
        // The offer's first `limit` ids are all new: insert them claimed, nothing else to do.
        const first: FreshColumns = { ids: fresh.ids.slice(0, opts.limit), sizes: fresh.sizes.slice(0, opts.limit), mtimes: fresh.mtimes.slice(0, opts.limit), ords: fresh.ords.slice(0, opts.limit) };
        const query = (again: boolean) => settleNewQuery(schema, claimColumns(done), first, claimParams(opts), opts.runId, again);
        const rows = await ex.on<ClaimedRow & { ord: number | null; owner: string | null }>('claims', 'claim', query(false), query(true));
        for (const id of first.ids) unrecorded.delete(id);
        const applied = rows.filter((r) => r.owner !== null).map((r) => ({ id: r.id, owner: r.owner!, attempt: r.attempts }));
        const order = new Map(first.ids.map((id, i) => [id, i]));
        const claimed = rows.filter((r) => r.owner === null).sort((a, b) => order.get(a.id)! - order.get(b.id)!);
        const complete = await fencedOutcomes(ex, schema, 'complete', done, applied, (c) => ({ id: c.id, result: 'applied', state: 'done' }));
        if (claimed.length > 0) return { complete, claims: claimed.map((r) => toClaim(r, opts.owner)), considered: opts.limit };
        // Siblings recorded them all first: claim from the rest of the offer and the pass.
        const more = await this.settleOffered([], offered.slice(opts.limit), opts);
        return { complete, claims: more.claims, considered: opts.limit + more.considered };
      }
      const query = (again: boolean) =>
        settleOfferedQuery(schema, claimColumns(done), wanted, claimParams(opts), opts.runId, Math.max(0, opts.limit), exclude, opts.suspects ?? true, again, fresh);
      const rows = await ex.on<ClaimedRow & { ord: number | null; owner: string | null }>('claims', 'claim', query(false), query(true));
      const applied: Applied[] = [];
      const claimed: (ClaimedRow & { ord: number | null })[] = [];
      let fromOffer = 0;
      let last = 0;
      for (const r of rows) {
        if (r.owner !== null && r.owner !== PASSED_OVER) applied.push({ id: r.id, owner: r.owner, attempt: r.attempts });
        else {
          if (r.owner === null) claimed.push(r);
          if (r.ord !== null) {
            fromOffer++;
            last = Math.max(last, r.ord);
          }
        }
      }
      // RETURNING order is unspecified; hand claims out in the order offered, the fill last.
      claimed.sort((a, b) => (a.ord ?? Infinity) - (b.ord ?? Infinity));
      const considered = fromOffer < opts.limit ? wanted.length : last;
      // The new ids the claim got to are recorded now (taken here, or by a sibling first).
      if (fresh) fresh.ids.forEach((id, i) => (fresh.ords[i]! <= considered ? unrecorded.delete(id) : undefined));
      if (opts.limit > 0 && claimed.length === 0 && unrecorded.size > 0) await recordLeft(opts.runId, opts.now);
      const complete = await fencedOutcomes(ex, schema, 'complete', done, applied, (c) => ({ id: c.id, result: 'applied', state: 'done' }));
      return { complete, claims: claimed.map((r) => toClaim(r, opts.owner)), considered };
    },

    async claimDue(opts) {
      if (opts.limit <= 0) return [];
      const exclude = opts.exclude?.map(wellFormed);
      const rows = await ex.on<ClaimedRow & { available_at: number }>('claims', 'claimDue', claimDueQuery(schema, opts.runId, claimParams(opts), opts.limit, exclude));
      // The longest-waiting item goes first.
      rows.sort((a, b) => a.available_at - b.available_at || (a.id < b.id ? -1 : 1));
      return rows.map((r) => toClaim(r, opts.owner));
    },

    async nextDueAt(runId) {
      const [row] = await ex.query<{ t: number | null }>('nextDueAt', nextDueQuery(schema, runId));
      return row?.t ?? null;
    },

    async siblings(pass, owner, now) {
      const [row] = await ex.query<PassSiblings>('siblings', siblingsQuery(schema, pass, owner, now));
      return { live: row?.live ?? 0, expired: row?.expired ?? 0, stray: row?.stray ?? 0, due: row?.due ?? false };
    },
  };
}
