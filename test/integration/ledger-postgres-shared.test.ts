/**
 * The PostgreSQL ledger as many pods of one pass use it (SharedPassLedger, issue 11):
 * claims from an offer filled up from the pass, completions in the same statement, the
 * siblings' claims, discovery of known ids, statistics for a table that was just filled.
 * Real server, one schema per test.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { claimBatchQuery, settleOfferedQuery } from '../../src/ledger/postgres/claim.js';
import { clientConfig, SESSIONS } from '../../src/ledger/postgres/connection.js';
import { openPostgresLedger, type PostgresLedger } from '../../src/ledger/postgres/index.js';
import type { Claim, Settlement } from '../../src/ledger/types.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

const T0 = 1_700_000_000_000;
const RETRY = { maxAttempts: 3, backoffMs: 1000, backoffMaxMs: 8000 };
const PASS = 'group:p';
const ids = (n: number, prefix = 'i') => Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(2, '0')}`);
const none: Settlement = { complete: [], fail: [], release: [], gone: [] };
const opts = (owner: string, limit: number, over: Record<string, unknown> = {}) => ({ owner, runId: PASS, now: T0, leaseMs: 60_000, limit, ...over });

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL ledger shared by the pods of a pass', () => {
  let server: PgServer;
  let url = '';
  let n = 0;
  const fresh = () => openPostgresLedger({ url, schema: `s_${++n}` });
  const row = async (l: PostgresLedger, id: string) =>
    (await server.admin<{ state: string; owner: string | null; seen_run: string; attempts: number; released: number; xmin: string }>(
      `SELECT state, owner, seen_run, attempts, released, xmin::text FROM ${l.schema}.items WHERE id = $1`,
      [id],
      'shared',
    ))[0]!;
  const offer = (l: PostgresLedger, s: Settlement, offered: string[], o: ReturnType<typeof opts>) => l.settleOffered(s, T0, { ids: offered, opts: o });

  beforeAll(async () => {
    server = await startPostgres();
    url = await server.createDatabase('shared');
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('claims the offered ids still claimable, in order, up to the limit, and says how far it looked', async () => {
    const l = await fresh();
    await l.discover(ids(20).map((id) => ({ id })), { runId: PASS, now: T0 });
    const b = await offer(l, none, ['i02'], opts('pod-b', 1));
    expect(b.claims.map((c) => c.id)).toEqual(['i02']);
    const a = await offer(l, none, ids(10), opts('pod-a', 4));
    // i02 is pod-b's: passed over; the limit is reached at i04, the 5th offered.
    expect(a.claims.map((c) => [c.id, c.owner, c.attempt])).toEqual([
      ['i00', 'pod-a', 1],
      ['i01', 'pod-a', 1],
      ['i03', 'pod-a', 1],
      ['i04', 'pod-a', 1],
    ]);
    expect(a.considered).toBe(5);
    // Short of the limit with what was offered: everything offered was looked at.
    const c = await offer(l, none, ['i00', 'i05'], opts('pod-c', 1));
    expect(c.claims.map((x) => x.id)).toEqual(['i05']);
    expect(c.considered).toBe(2);
    await l.close();
  });

  it('looks at a prefix of a long offer only (4x the slots, at least 32), says so, and fills from the pass when the prefix is taken', async () => {
    const l = await fresh();
    const all = ids(100);
    await l.discover(all.map((id) => ({ id })), { runId: PASS, now: T0 });
    expect((await offer(l, none, all.slice(0, 40), opts('pod-b', 40))).claims).toHaveLength(40);
    const a = await offer(l, none, all, opts('pod-a', 2));
    // The first 32 offered were all pod-b's: looked at and passed over; the rest not looked at.
    expect(a.considered).toBe(32);
    expect(a.claims.map((c) => c.id)).toEqual(['i40', 'i41']);
    // Offered again from where it stopped, the claim reaches them.
    const again = await offer(l, none, all.slice(32).reverse(), opts('pod-a', 3));
    expect(again.claims.map((c) => c.id)).toEqual(['i99', 'i98', 'i97']);
    expect(again.considered).toBe(3);
    await l.close();
  });

  it('completes the freed claims in the same statement (fenced, counted) and fills up from the pass, whoever scanned it', async () => {
    const l = await fresh();
    await l.discover(ids(10).map((id) => ({ id })), { runId: PASS, now: T0 });
    await l.discover([{ id: 'elsewhere' }], { runId: 'group:other', now: T0 });
    const first = await offer(l, none, ['i00', 'i01'], opts('pod-a', 2));
    const stale: Claim = { ...first.claims[0]!, attempt: 9 };
    const out = await offer(l, { ...none, complete: [...first.claims, stale] }, [], opts('pod-a', 3));
    expect(out.complete.map((o) => o.result)).toEqual(['applied', 'applied', 'fenced']);
    expect(out.complete[2]).toMatchObject({ reason: expect.stringMatching(/attempt 9/) });
    // Nothing offered: the pass's pending items, earliest first, never another pass's.
    expect(out.claims.map((c) => c.id)).toEqual(['i02', 'i03', 'i04']);
    expect(out.considered).toBe(0);
    expect(await l.attemptTotals()).toMatchObject({ succeeded: 2, fenced: 1 });
    expect((await l.get('i00'))?.state).toBe('done');
    // Offered explicitly, another pass's item is claimed, and becomes this pass's.
    const other = await offer(l, none, ['elsewhere'], opts('pod-a', 1));
    expect(other.claims.map((c) => c.id)).toEqual(['elsewhere']);
    expect((await row(l, 'elsewhere')).seen_run).toBe(PASS);
    await l.close();
  });

  it('never fills with an id the caller holds (a claim a server crash forgot), nor sweeps one', async () => {
    const l = await fresh();
    await l.discover(ids(3).map((id) => ({ id })), { runId: PASS, now: T0 });
    const [held] = (await offer(l, none, ['i00'], opts('pod-a', 1))).claims;
    // As after a server crash: the claim's commit is gone, the row pending with its old count.
    await server.admin(`UPDATE ${l.schema}.items SET state = 'pending', owner = NULL, lease_until = NULL, attempts = 0 WHERE id = 'i00'`, [], 'shared');
    const out = await offer(l, none, [], opts('pod-a', 3, { exclude: [held!.id] }));
    expect(out.claims.map((c) => c.id)).toEqual(['i01', 'i02']);
    expect(await l.claimDue({ owner: 'pod-a', runId: PASS, now: T0, leaseMs: 60_000, limit: 5, exclude: ['i00'] })).toEqual([]);
    expect((await l.claimDue({ owner: 'pod-b', runId: PASS, now: T0, leaseMs: 60_000, limit: 5 })).map((c) => c.id)).toEqual(['i00']);
    await l.close();
  });

  it('never hands one item to two pods claiming at once from overlapping offers', async () => {
    const all = ids(60).concat(ids(60, 'j'), ids(60, 'k'));
    const schema = `s_${++n}`;
    const pods = await Promise.all([1, 2, 3].map(() => openPostgresLedger({ url, schema })));
    await pods[0]!.discover(all.map((id) => ({ id })), { runId: PASS, now: T0 });
    const work = async (l: PostgresLedger, owner: string) => {
      const got: string[] = [];
      let done: Claim[] = [];
      for (let i = 0; ; i++) {
        // Everyone offers the same candidates, from different places.
        const from = (i * 7 + owner.length * 13) % all.length;
        const out = await l.settleOffered({ ...none, complete: done }, T0, { ids: all.slice(from, from + 32), opts: opts(owner, 8) });
        if (out.claims.length === 0) return got;
        got.push(...out.claims.map((c) => c.id));
        done = out.claims;
      }
    };
    const got = await Promise.all(pods.map((l, i) => work(l, `pod-${'x'.repeat(i + 1)}`)));
    const flat = got.flat();
    expect(new Set(flat).size).toBe(flat.length);
    expect(flat.length).toBe(all.length);
    // The last claim of each pod is still held: the rest were completed with the next.
    expect((await pods[0]!.counts()).pending).toBe(0);
    for (const l of pods) await l.close();
  });

  const later = { runId: PASS, now: T0, recordOnClaim: true };
  const rows = async (l: PostgresLedger) =>
    (await server.admin<{ id: string; state: string; owner: string | null; attempts: number; released: number; seen_run: string }>(
      `SELECT id, state, owner, attempts, released, seen_run FROM ${l.schema}.items ORDER BY id`,
      [],
      'shared',
    )).map((r) => [r.id, r.state, r.owner, r.attempts, r.released, r.seen_run]);

  it('recordOnClaim: a new item is written once, by the claim that takes it (claimed, attempt 1); a sibling records the ones it takes itself', async () => {
    const schema = `s_${++n}`;
    const [a, b] = await Promise.all([0, 1].map(() => openPostgresLedger({ url, schema })));
    const all = ids(12);
    expect(await a!.discover(all.map((id) => ({ id, size: 5, mtimeMs: 7 })), later)).toEqual(all);
    // Nothing written yet: the discovery only looked the ids up.
    expect(await rows(a!)).toEqual([]);
    const first = await offer(a!, none, all, opts('pod-a', 4));
    expect(first.claims.map((c) => [c.id, c.owner, c.attempt, c.charged])).toEqual(all.slice(0, 4).map((id) => [id, 'pod-a', 1, 1]));
    expect(first.considered).toBe(4);
    expect(await rows(a!)).toEqual(all.slice(0, 4).map((id) => [id, 'claimed', 'pod-a', 1, 0, PASS]));
    // The sibling scans the same ids: pod-a's are known and not claimable, the rest new to it too.
    expect(await b!.discover(all.map((id) => ({ id })), later)).toEqual(all.slice(4));
    expect((await offer(b!, none, all.slice(4), opts('pod-b', 4))).claims.map((c) => c.id)).toEqual(all.slice(4, 8));
    // pod-a's next four were recorded by pod-b first: passed over, the claim goes on to the next ones.
    const next = await offer(a!, { ...none, complete: first.claims }, all.slice(4), opts('pod-a', 4));
    expect(next.complete.map((o) => o.result)).toEqual(['applied', 'applied', 'applied', 'applied']);
    expect(next.claims.map((c) => [c.id, c.attempt])).toEqual(all.slice(8).map((id) => [id, 1]));
    expect(next.considered).toBe(8);
    const final = await rows(a!);
    expect(final.map((r) => [r[0], r[1], r[2], r[3]])).toEqual([
      ...all.slice(0, 4).map((id) => [id, 'done', null, 1]),
      ...all.slice(4, 8).map((id) => [id, 'claimed', 'pod-b', 1]),
      ...all.slice(8).map((id) => [id, 'claimed', 'pod-a', 1]),
    ]);
    const [stat] = await server.admin<{ claimed_size: string; claimed_mtime_ms: number }>(`SELECT claimed_size::text, claimed_mtime_ms FROM ${schema}.items WHERE id = 'i00'`, [], 'shared');
    expect(stat).toEqual({ claimed_size: '5', claimed_mtime_ms: 7 });
    // A stop's undo of a claim that never started leaves the item pending, uncharged, the pass's.
    await a!.release([next.claims[0]!], T0, 'handed back unstarted: run stopping', true);
    expect((await rows(a!)).find((r) => r[0] === 'i08')).toEqual(['i08', 'pending', null, 0, 0, PASS]);
    for (const l of [a, b]) await l!.close();
  });

  it('recordOnClaim: an offer mixing known and new ids is claimed in its order, the new ones inserted claimed, the rest kept for later', async () => {
    const l = await fresh();
    await l.discover([{ id: 'i00' }, { id: 'i02' }], { runId: PASS, now: T0 });
    expect(await l.discover(ids(5).map((id) => ({ id })), later)).toEqual(ids(5));
    const out = await offer(l, none, ids(5), opts('pod-a', 3));
    expect(out.claims.map((c) => [c.id, c.attempt])).toEqual([
      ['i00', 1],
      ['i01', 1],
      ['i02', 1],
    ]);
    expect(out.considered).toBe(3);
    expect((await rows(l)).map((r) => r[0])).toEqual(['i00', 'i01', 'i02']);
    // Fewer new ids than slots: inserted, and the fill finds nothing else of the pass.
    expect((await offer(l, none, ['i03', 'i04'], opts('pod-a', 4))).claims.map((c) => c.id)).toEqual(['i03', 'i04']);
    expect((await rows(l)).map((r) => [r[0], r[1], r[3]])).toEqual(ids(5).map((id) => [id, 'claimed', 1]));
    await l.close();
  });

  it('recordOnClaim: a claim that takes nothing records the new ids left pending first (the caller drops its candidates then)', async () => {
    const schema = `s_${++n}`;
    const [a, b] = await Promise.all([0, 1].map(() => openPostgresLedger({ url, schema })));
    const all = ids(6);
    await a!.discover(all.map((id) => ({ id })), later);
    await b!.discover(all.map((id) => ({ id })), later);
    expect((await offer(b!, none, all.slice(0, 3), opts('pod-b', 3))).claims).toHaveLength(3);
    // pod-a offers the three pod-b took (the rest still in its channel): nothing to claim.
    const out = await offer(a!, none, all.slice(0, 3), opts('pod-a', 3));
    expect(out.claims).toEqual([]);
    expect(await rows(a!)).toEqual([
      ...all.slice(0, 3).map((id) => [id, 'claimed', 'pod-b', 1, 0, PASS]),
      ...all.slice(3).map((id) => [id, 'pending', null, 0, 0, PASS]),
    ]);
    // Any pod's sweep takes them; pod-b's own new ids, recorded by pod-a, are passed over.
    expect((await offer(b!, none, all.slice(3), opts('pod-b', 3))).claims.map((c) => [c.id, c.attempt])).toEqual(all.slice(3).map((id) => [id, 1]));
    for (const l of [a, b]) await l!.close();
  });

  it('recordOnClaim: pods scanning the same new ids and claiming at once never share an item, and each item is written claimed once', async () => {
    const all = ids(60).concat(ids(60, 'j'), ids(60, 'k'));
    const schema = `s_${++n}`;
    const pods = await Promise.all([1, 2, 3].map(() => openPostgresLedger({ url, schema })));
    const work = async (l: PostgresLedger, owner: string, from: number) => {
      const got: Claim[] = [];
      let front = (await l.discover(all.map((id) => ({ id })), later)).map((_, i, a) => a[(from + i) % a.length]!);
      let done: Claim[] = [];
      for (;;) {
        const out = await l.settleOffered({ ...none, complete: done }, T0, { ids: front.slice(0, 32), opts: opts(owner, 8) });
        front = front.slice(out.considered);
        if (out.claims.length === 0) front = [];
        if (out.claims.length === 0 && front.length === 0) {
          const last = await l.settleOffered({ ...none, complete: out.claims }, T0, { ids: [], opts: opts(owner, 8) });
          if (last.claims.length === 0) return got;
          got.push(...last.claims);
          done = last.claims;
          continue;
        }
        got.push(...out.claims);
        done = out.claims;
      }
    };
    const got = (await Promise.all(pods.map((l, i) => work(l, `pod-${i}`, i * 61)))).flat();
    expect(new Set(got.map((c) => c.id)).size).toBe(got.length);
    expect(got.map((c) => c.id).sort()).toEqual([...all].sort());
    expect(got.every((c) => c.attempt === 1)).toBe(true);
    expect((await pods[0]!.counts()).pending).toBe(0);
    for (const l of pods) await l.close();
  });

  it("reports the siblings' claims of the pass by lease, and hands back the caller's own claims it does not know of", async () => {
    const l = await fresh();
    await l.discover(ids(6).map((id) => ({ id })), { runId: PASS, now: T0 });
    await l.discover([{ id: 'other-pass' }], { runId: 'group:other', now: T0 });
    await offer(l, none, ['i00', 'i01'], opts('live-pod', 2));
    await offer(l, none, ['i02'], opts('dead-pod', 1, { leaseMs: 1000 }));
    await offer(l, none, ['i03'], opts('me', 1));
    await l.claim(['other-pass'], { owner: 'other-pod', runId: 'group:other', now: T0, leaseMs: 1000 });
    const now = T0 + 5000;
    // Expired: i02 (the pass's) and other-pass (an earlier pass's, whose pod died: this
    // pass takes it back rather than leave it to the next run).
    expect(await l.siblings(PASS, 'me', now)).toEqual({ live: 2, expired: 2, stray: 1, due: true });
    expect(await row(l, 'i03')).toMatchObject({ state: 'pending', owner: null, attempts: 1, released: 1 });
    expect(await l.siblings(PASS, 'me', now)).toEqual({ live: 2, expired: 2, stray: 0, due: true });
    // Only the pass's expired claims are reclaimed (charged), not another pass's.
    expect(await l.reclaimExpired({ now, retry: RETRY, passId: PASS, random: () => 0 })).toBe(1);
    expect(await l.get('i02')).toMatchObject({ state: 'pending', attempts: 1 });
    expect((await l.get('other-pass'))?.state).toBe('claimed');
    expect(await l.siblings(PASS, 'me', now)).toEqual({ live: 2, expired: 1, stray: 0, due: true });
    expect(await l.reclaimExpired({ now, retry: RETRY, random: () => 0 })).toBe(1);
    expect(await l.get('other-pass')).toMatchObject({ state: 'pending', attempts: 1 });
    expect(await l.siblings(PASS, 'me', now)).toEqual({ live: 2, expired: 0, stray: 0, due: true });
    // `due` is the pass's items claimable now only: not another pass's, nor one in its backoff.
    const taken = await l.settleOffered(none, now, { ids: ['i03', 'i04', 'i05'], opts: opts('live-pod', 3, { now }) });
    await l.discover([{ id: 'other-pending' }], { runId: 'group:other', now: T0 });
    expect(taken.claims).toHaveLength(3);
    expect(await l.siblings(PASS, 'me', now)).toEqual({ live: 5, expired: 0, stray: 0, due: true }); // i02, due within a second
    const later = now + 1000;
    const [c02] = (await l.settleOffered(none, later, { ids: ['i02'], opts: opts('live-pod', 1, { now: later }) })).claims;
    const slow = { ...RETRY, backoffMs: 60_000, backoffMaxMs: 60_000 };
    await l.settle({ ...none, fail: [{ claim: c02!, error: 'boom', retry: slow }] }, later, undefined, () => 0);
    expect(await l.siblings(PASS, 'me', later)).toEqual({ live: 5, expired: 0, stray: 0, due: false });
    expect(await l.siblings(PASS, 'me', later + 120_000)).toMatchObject({ due: true });
    await l.close();
  });

  it('reclaimExpired completes an expired claim whose output was committed after its claim (asked with the claim time), and charges the rest', async () => {
    const l = await fresh();
    await l.discover(ids(3).map((id) => ({ id })), { runId: PASS, now: T0 });
    await l.settleOffered(none, T0 + 3, { ids: ['i00', 'i01'], opts: opts('dead-pod', 2, { leaseMs: 1000, now: T0 + 3 }) });
    await offer(l, none, ['i02'], opts('live-pod', 1));
    const asked: Array<[string, number]> = [];
    const committed = (id: string, claimedAt: number) => (asked.push([id, claimedAt]), id === 'i00');
    expect(await l.reclaimExpired({ now: T0 + 5000, retry: { ...RETRY, maxAttempts: 1 }, passId: PASS, committed })).toBe(2);
    expect(asked.sort()).toEqual([['i00', T0 + 3], ['i01', T0 + 3]]);
    expect(await l.get('i00')).toMatchObject({ state: 'done', attempts: 1, doneAt: T0 + 5000 });
    expect(await l.get('i01')).toMatchObject({ state: 'dead', attempts: 1 });
    expect(await row(l, 'i02')).toMatchObject({ state: 'claimed', owner: 'live-pod' });
    expect((await l.totals()).itemsDone).toBe(1);
    await l.close();
  });

  it("discovery marks known pending items as the pass's, returns the claimable ones in order, and rewrites nothing unchanged", async () => {
    const l = await fresh();
    await l.discover(['a', 'b', 'c', 'd'].map((id) => ({ id })), { runId: 'group:old', now: T0 });
    const [c] = await l.claim(['c'], { owner: 'o', runId: 'group:old', now: T0, leaseMs: 60_000 });
    await l.complete([c!], T0);
    const [d] = await l.claim(['d'], { owner: 'o', runId: 'group:old', now: T0, leaseMs: 60_000 });
    await l.fail([{ claim: d!, error: 'x' }], { now: T0, retry: RETRY, random: () => 0 });
    // New and known ids mixed; c is done, d backs off.
    const found = await l.discover(['b', 'new', 'a', 'c', 'd'].map((id) => ({ id })), { runId: PASS, now: T0 + 1 });
    expect(found).toEqual(['b', 'new', 'a']);
    for (const id of ['a', 'b', 'd']) expect((await row(l, id)).seen_run).toBe(PASS);
    expect((await row(l, 'c')).seen_run).toBe('group:old');
    const before = await Promise.all(['a', 'b', 'new'].map(async (id) => (await row(l, id)).xmin));
    expect(await l.discover(['b', 'new', 'a'].map((id) => ({ id })), { runId: PASS, now: T0 + 2 })).toEqual(['b', 'new', 'a']);
    expect(await Promise.all(['a', 'b', 'new'].map(async (id) => (await row(l, id)).xmin))).toEqual(before);
    await l.close();
  });

  it('a pod behind its siblings looks known batches up first and inserts only the rest: same claimable ids, in order, and marks', async () => {
    const schema = `s_${++n}`;
    const [ahead, behind] = await Promise.all([0, 1].map(() => openPostgresLedger({ url, schema })));
    await ahead!.discover(ids(40).map((id) => ({ id })), { runId: 'group:old', now: T0 });
    const [c] = await ahead!.claim(['i05'], { owner: 'o', runId: 'group:old', now: T0, leaseMs: 60_000 });
    await ahead!.complete([c!], T0);
    await ahead!.claim(['i06'], { owner: 'o', runId: 'group:old', now: T0, leaseMs: 60_000 });
    // All known: the pod switches to looking up first for its next batch.
    expect(await behind!.discover(ids(5).map((id) => ({ id })), { runId: PASS, now: T0 + 1 })).toEqual(ids(5));
    // Known (done, claimed, pending) and new ids mixed: new ones are inserted, as the pass's.
    const batch = ['n1', 'i05', 'i06', 'i07', 'n2', 'i08'];
    expect(await behind!.discover(batch.map((id) => ({ id })), { runId: PASS, now: T0 + 2 })).toEqual(['n1', 'i07', 'n2', 'i08']);
    for (const id of ['n1', 'n2', 'i07', 'i08']) expect((await row(behind!, id)).seen_run).toBe(PASS);
    expect(await behind!.counts()).toMatchObject({ pending: 40 - 2 + 2, claimed: 1, done: 1 });
    // Mostly new again: back to inserting first; a batch of only new ids.
    expect(await behind!.discover(ids(3, 'm').map((id) => ({ id })), { runId: PASS, now: T0 + 3 })).toEqual(ids(3, 'm'));
    expect(await behind!.discover(['m00', 'z'].map((id) => ({ id })), { runId: PASS, now: T0 + 4 })).toEqual(['m00', 'z']);
    for (const l of [ahead!, behind!]) await l.close();
  });

  it('counts completions written by many pods at once (counter shards summed)', async () => {
    const schema = `s_${++n}`;
    const pods = await Promise.all([0, 1, 2].map(() => openPostgresLedger({ url, schema })));
    await pods[0]!.discover(ids(30).map((id) => ({ id })), { runId: PASS, now: T0 });
    const claims = await Promise.all(pods.map((l, i) => offer(l, none, ids(10).map((_, k) => `i${i}${k}`), opts(`pod-${i}`, 10))));
    await Promise.all(pods.map((l, i) => offer(l, { ...none, complete: [...claims[i]!.claims, { ...claims[i]!.claims[0]!, attempt: 7 }] }, [], opts(`pod-${i}`, 0))));
    for (const l of pods) expect(await l.attemptTotals()).toMatchObject({ succeeded: 30, fenced: 3 });
    expect((await pods[1]!.totals()).itemsDone).toBe(30);
    for (const l of pods) await l.close();
  });

  it('analyzes the table once discovery has found 256 claimable rows: a first pass is not planned against an empty table', async () => {
    const l = await fresh();
    const reltuples = async () =>
      Number((await server.admin<{ t: number }>(`SELECT reltuples AS t FROM pg_class WHERE oid = '${l.schema}.items'::regclass`, [], 'shared'))[0]!.t);
    const all = ids(200).concat(ids(100, 'x'));
    await l.discover(all.slice(0, 200).map((id) => ({ id })), { runId: PASS, now: T0 });
    expect(await reltuples()).toBeLessThan(0); // never analyzed
    await l.discover(all.slice(200).map((id) => ({ id })), { runId: PASS, now: T0 });
    expect(await reltuples()).toBe(300);
    await l.close();
  });
  it('claims offered ids by primary key, however few pending rows the statistics saw: the claim statement, prepared and run 10 times', async () => {
    // A shared pass inserts its rows claimed: analyzed then, the table says no row is pending,
    // and every plan (generic or custom) read the whole pending index once per claim to match
    // the offered ids (20 ms a claim with 3,400 pending rows, against 0.2 ms by primary key).
    const l = await fresh();
    const first = ids(300, 'a');
    await l.discover(first.map((id) => ({ id })), { runId: PASS, now: T0 });
    const taken = await offer(l, none, first, opts('pod-a', 300));
    await offer(l, { ...none, complete: taken.claims }, [], opts('pod-a', 0));
    await server.admin(`ANALYZE ${l.schema}.items`, [], 'shared');
    const pending = ids(600, 'b');
    await l.discover(pending.map((id) => ({ id })), { runId: PASS, now: T0 });
    const c = new pg.Client(clientConfig({ url, schema: l.schema }, SESSIONS.claims));
    await c.connect();
    try {
      const noDone = { ids: [], owners: [], attempts: [] };
      // Offered from the end of the pass's order: a read of the pending index reaches them last.
      const offerAt = (k: number) => pending.slice(-32 - 8 * k, pending.length - 8 * k).reverse();
      const claimQuery = (k: number) => settleOfferedQuery(l.schema, noDone, offerAt(k), { owner: 'pod-b', now: T0, leaseUntil: T0 + 60_000 }, PASS, 8, []);
      for (let k = 0; k < 10; k++) expect((await c.query(claimQuery(k))).rows).toHaveLength(8);
      const explain = async (sql: string, values: unknown[] = []) => (await c.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`, values)).rows.map((r) => r['QUERY PLAN']).join('\n');
      // EXECUTE takes no bind parameters: the values as literals (the statement's types cast them).
      const literal = (v: unknown): string => (Array.isArray(v) ? c.escapeLiteral(`{${v.map((x) => `"${String(x)}"`).join(',')}}`) : c.escapeLiteral(String(v)));
      const q = claimQuery(10);
      const plan = await explain(`EXECUTE "${q.name}"(${q.values.map(literal).join(', ')})`);
      // The plan of the offered ids' CTE (c): its lines, up to the next at its depth.
      const offered = (p: string) => /\n {2}CTE c\n((?: {3,}.*\n?)*)/.exec(p)?.[1] ?? '';
      expect(offered(plan)).toMatch(/Index Scan using items_pkey on items it\b/);
      expect(offered(plan)).not.toMatch(/items_pending_pass/);
      // ledger.claim's statement (by ids) too.
      const byIds = claimBatchQuery(l.schema, offerAt(20), { owner: 'pod-b', now: T0, leaseUntil: T0 + 60_000 });
      const byIdsPlan = await explain(byIds.text, byIds.values);
      expect(offered(byIdsPlan)).toMatch(/items_pkey/);
      expect(offered(byIdsPlan)).not.toMatch(/items_pending_pass/);
    } finally {
      await c.end();
    }
    await l.close();
  });

  it('suspects (charged twice, the last time by a dead pod) are claimed last, one at a time per pod; a hand-back keeps one a suspect', async () => {
    const l = await fresh();
    const offerAt = (led: PostgresLedger, st: Settlement, offered: string[], o: ReturnType<typeof opts>) => led.settleOffered(st, o.now, { ids: offered, opts: o });
    const resume = { ...RETRY, maxAttempts: 5, backoffMs: 0, backoffMaxMs: 0 };
    const three = ['a', 'b', 'c'];
    await l.discover([...three, ...ids(2)].map((id) => ({ id })), { runId: PASS, now: T0 });
    // Two pods died, one after the other, with a, b and c in flight: all three are suspects.
    for (const [k, dead] of ['dead-1', 'dead-2'].entries()) {
      expect((await offerAt(l, none, three, opts(dead, 3, { now: T0 + k * 100_000 }))).claims).toHaveLength(3);
      expect(await l.reclaimExpired({ now: T0 + k * 100_000 + 60_001, retry: resume, passId: PASS })).toBe(3);
    }
    const now = T0 + 300_000;
    // Offered first, they are passed over; fresh items (offered, then filled) go first, and
    // one suspect takes a slot left over.
    const a = await offerAt(l, none, [...three, 'i00'], opts('pod-a', 4, { now }));
    expect(a.claims.map((c) => c.id)).toEqual(['i00', 'i01', 'a']);
    expect(a.considered).toBe(4);
    const taken = a.claims.filter((c) => three.includes(c.id));
    // No slot left after fresh items: no suspect.
    await l.discover([{ id: 'i02' }], { runId: PASS, now });
    expect((await offerAt(l, none, [], opts('pod-c', 1, { now }))).claims.map((c) => c.id)).toEqual(['i02']);
    // pod-a runs a suspect: none more for it, but one for pod-b, whose pod is another process.
    expect((await offerAt(l, none, three, opts('pod-a', 2, { now }))).claims.filter((c) => three.includes(c.id))).toEqual([]);
    expect((await l.claimDue(opts('pod-b', 3, { now }))).filter((c) => three.includes(c.id))).toHaveLength(1);
    // pod-a is drained: its suspect is handed back uncharged and is still a suspect.
    await l.release(taken, now + 1, 'interrupted: drain deadline reached');
    expect(await l.get(taken[0]!.id)).toMatchObject({ state: 'pending', lastError: expect.stringMatching(/^attempt 2 abandoned: its lease expired/) });
    // Completing its running suspect in the claim's own statement lets pod-a take the next one.
    const done = a.claims.filter((c) => !three.includes(c.id));
    const next = await offerAt(l, { ...none, complete: done.slice(0, 1) }, [], opts('pod-a', 1, { now: now + 2 }));
    // (c, waiting longest: b is pod-b's, a was handed back just now)
    expect(next.claims.map((c) => c.id)).toEqual(['c']);
    const after = await offerAt(l, { ...none, complete: next.claims }, [], opts('pod-a', 4, { now: now + 3 }));
    expect(after.claims.filter((c) => three.includes(c.id)).map((c) => c.id)).toEqual(['a']);
    await l.close();
  });
});
