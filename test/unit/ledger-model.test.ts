/**
 * Model-based test of both ledger adapters: fast-check generates random sequences of
 * discover (with stat data and refresh policies) / claimDue / complete / fail / release /
 * reclaimOrphans / retryDead / renew / clock ticks, with claims picked from every claim ever issued (so many are stale)
 * and sometimes forged with another owner or attempt. After every step the real ledger
 * must match a plain in-memory model exactly, and the invariants must hold.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { backoffDelayMs } from '../../src/ledger/backoff.js';
import { openPostgresLedger } from '../../src/ledger/postgres/index.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import type { Claim, DiscoveredItem, ItemState, Ledger, LedgerTotals, RetryPolicy } from '../../src/ledger/types.js';
import { discoverAndClaim } from '../contract/ledger-fixtures.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';

const IDS = ['a', 'b', 'c', 'd', 'e'];
const OWNERS = ['o0', 'o1', 'o2'];
const RETRY: RetryPolicy = { maxAttempts: 3, backoffMs: 100, backoffMaxMs: 400 };
const RANDOM = (): number => 0.5;
const runOf = (owner: string): string => `run-${owner}`;

interface MItem {
  state: ItemState;
  attempts: number;
  released: number;
  owner: string | null;
  availableAt: number;
  lastError: string | null;
  seenRun: string;
  doneAt: number | null;
  size: number | null;
  mtimeMs: number | null;
  /** The stat recorded by the last claim (the on-change baseline). */
  claimed: { size: number | null; mtimeMs: number | null };
}
interface Model {
  /**
   * A shared store (Ledger.shared, PostgreSQL) marks only pending rows as seen by the
   * discovering pass: N pods scanning one source must not rewrite every claimed or finished
   * row N times (postgres/discover.ts). The sweep (claimDue) only takes pending rows.
   */
  shared: boolean;
  now: number;
  items: Map<string, MItem>;
  issued: Claim[];
  totals: LedgerTotals;
  errors: number;
  /** Attempts the ledger reported at the previous check, per id. */
  seenAttempts: Map<string, number>;
  /** The run of the last discovery that found something (SQLite's meta discovery.pass), or null. */
  lastPass: string | null;
}
interface Real {
  ledger: Ledger;
}

type Stale = 'none' | 'owner' | 'attempt';
/** doneBefore as an offset back from the model's clock. */
type Refresh = { doneBeforeAgo: number | undefined; onChange: boolean };
type Op =
  | { kind: 'discover'; found: DiscoveredItem[]; owner: number; limit: number | undefined; refresh: Refresh | undefined }
  | { kind: 'claimDue'; owner: number; limit: number }
  | { kind: 'complete' | 'fail' | 'release'; pick: number; stale: Stale }
  | { kind: 'reclaim'; owner: number }
  | { kind: 'retryDead'; ids: string[] | 'all' }
  | { kind: 'renew'; owner: number; ids: string[] }
  | { kind: 'settle'; owner: number; complete: { pick: number; stale: Stale }[]; ids: string[] }
  | { kind: 'tick'; ms: number };

function newModel(shared: boolean): Model {
  const totals = { deadLettered: 0, overruns: 0, lockSkips: 0, missed: 0, stale: 0, itemsDone: 0, itemsFailed: 0, requeued: 0 };
  return { shared, now: 1_000_000, items: new Map(), issued: [], totals, errors: 0, seenAttempts: new Map(), lastPass: null };
}

/** The claim a fenced op uses: one ever issued, possibly forged to be stale. */
function pickClaim(m: Model, pick: number, stale: Stale): Claim | undefined {
  // Two times in three a claim that still holds, else any claim ever issued (mostly stale).
  const held = m.issued.filter((c) => holds(m, c) !== undefined);
  const from = pick % 3 === 0 || held.length === 0 ? m.issued : held;
  const c = from[Math.floor(pick / 3) % Math.max(1, from.length)];
  if (c === undefined) return undefined;
  if (stale === 'owner') return { ...c, owner: OWNERS[(OWNERS.indexOf(c.owner) + 1) % OWNERS.length] ?? 'x' };
  if (stale === 'attempt') return { ...c, attempt: c.attempt + (pick % 2 === 0 ? 1 : -1) };
  return c;
}

/** Does this claim still hold in the model (the fence)? */
function holds(m: Model, c: Claim): MItem | undefined {
  const it = m.items.get(c.id);
  return it?.state === 'claimed' && it.owner === c.owner && it.attempts === c.attempt ? it : undefined;
}

/** A failed or abandoned attempt: dead when charged is spent, else back off. */
function failInModel(m: Model, it: MItem, error: string): MItem['state'] {
  const charged = it.attempts - it.released;
  Object.assign(it, { owner: null, lastError: error });
  m.totals.itemsFailed++;
  if (charged >= RETRY.maxAttempts) {
    it.state = 'dead';
    m.totals.deadLettered++;
  } else {
    it.state = 'pending';
    it.availableAt = m.now + backoffDelayMs(charged, RETRY, RANDOM);
  }
  return it.state;
}

function claimInModel(m: Model, id: string, it: MItem, owner: string): Claim {
  Object.assign(it, { state: 'claimed', owner, attempts: it.attempts + 1, claimed: { size: it.size, mtimeMs: it.mtimeMs } });
  const claim = { id, owner, attempt: it.attempts, charged: it.attempts - it.released };
  m.issued.push(claim);
  return claim;
}

const claimable = (m: Model, it: MItem): boolean => it.state === 'pending' && it.availableAt <= m.now;

/** Charged last by a run that died while it ran (the sweep isolates these: sqlite/claim.ts, postgres/suspect.ts). */
const suspect = (it: MItem): boolean => it.attempts - it.released >= 2 && /^attempt .* abandoned: the run that claimed it died$/.test(it.lastError ?? '');

/** A stat field changed: known on both sides and different. */
const differs = (found: number | undefined, claimed: number | null): boolean =>
  found !== undefined && claimed !== null && found !== claimed;

/** The refresh policy on the batch `rows` (first occurrence of each id), after the upsert. */
function refreshInModel(m: Model, rows: DiscoveredItem[], r: Refresh, doneBefore: number | undefined, runId: string): void {
  for (const f of rows) {
    const it = m.items.get(f.id) as MItem;
    const finished = it.state === 'done' || it.state === 'dead';
    const changed = differs(f.size, it.claimed.size) || differs(f.mtimeMs, it.claimed.mtimeMs);
    const old = it.state === 'done' && doneBefore !== undefined && (it.doneAt ?? 0) < doneBefore;
    if (old || (r.onChange && finished && changed)) {
      Object.assign(it, { state: 'pending', attempts: 0, released: 0, availableAt: m.now, doneAt: null, seenRun: runId });
    } else if (r.onChange && finished) {
      it.claimed = { size: it.claimed.size ?? it.size, mtimeMs: it.claimed.mtimeMs ?? it.mtimeMs };
    }
  }
}

/** Apply `op` to both the model and the ledger, and compare what each returns. */
async function step(op: Op, m: Model, ledger: Ledger): Promise<void> {
  const opts = (o: number) => ({ owner: OWNERS[o] ?? 'x', runId: runOf(OWNERS[o] ?? 'x'), now: m.now, leaseMs: 1000 });
  switch (op.kind) {
    case 'discover': {
      const o = opts(op.owner);
      const rows = op.found.filter((f, i) => op.found.findIndex((g) => g.id === f.id) === i); // first of each id
      if (rows.length > 0) m.lastPass = o.runId;
      for (const { id, size, mtimeMs } of rows) {
        const it = m.items.get(id);
        const stat = { size: size ?? it?.size ?? null, mtimeMs: mtimeMs ?? it?.mtimeMs ?? null };
        // SQLite rewrites a done or dead row found unchanged (its seen mark a day old at most,
        // as every row here is) not at all (sqlite/discover.ts): it keeps its pass.
        const changed = it !== undefined && ((size !== undefined && size !== it.size) || (mtimeMs !== undefined && mtimeMs !== it.mtimeMs));
        const marked = m.shared ? it?.state === 'pending' : it?.state === 'pending' || it?.state === 'claimed' || changed;
        // A pending row never charged has no backoff: written by a clock ahead of this one, it comes down to now (discover.ts).
        const due = it?.state === 'pending' && it.attempts === it.released ? { availableAt: Math.min(it.availableAt, m.now) } : {};
        if (it) Object.assign(it, { ...stat, ...(marked ? { seenRun: o.runId } : {}), ...due });
        else m.items.set(id, { state: 'pending', attempts: 0, released: 0, owner: null, availableAt: m.now, lastError: null,
          seenRun: o.runId, doneAt: null, ...stat, claimed: { size: null, mtimeMs: null } });
      }
      const doneBefore = op.refresh?.doneBeforeAgo === undefined ? undefined : m.now - op.refresh.doneBeforeAgo;
      if (op.refresh) refreshInModel(m, rows, op.refresh, doneBefore, o.runId);
      const due = rows.filter((f) => claimable(m, m.items.get(f.id) as MItem)).slice(0, op.limit ?? Infinity);
      const want = due.map((f) => claimInModel(m, f.id, m.items.get(f.id) as MItem, o.owner));
      const refresh = op.refresh && { doneBefore, onChange: op.refresh.onChange };
      const got = await discoverAndClaim(ledger, op.found, { ...o, limit: op.limit, refresh });
      expect(got).toEqual(want);
      return;
    }
    case 'claimDue': {
      const o = opts(op.owner);
      const byWait = ([ia, a]: [string, MItem], [ib, b]: [string, MItem]): number => a.availableAt - b.availableAt || (ia < ib ? -1 : 1);
      const all = [...m.items.entries()].filter(([, it]) => claimable(m, it) && it.seenRun === o.runId).sort(byWait);
      // Suspects (charged last by a run that died) one at a time per owner: SQLite first,
      // PostgreSQL last, with a slot left over.
      const running = [...m.items.values()].some((it) => it.state === 'claimed' && it.owner === o.owner && suspect({ ...it, attempts: it.attempts - 1 }));
      // Among equal waits SQLite's sweep takes the oldest rows first (rowid: the model's
      // insertion order, a forgotten item re-inserted last), PostgreSQL's by id.
      const rowid = new Map([...m.items.keys()].map((id, i) => [id, i]));
      const byRowid = ([ia, a]: [string, MItem], [ib, b]: [string, MItem]): number => a.availableAt - b.availableAt || rowid.get(ia)! - rowid.get(ib)!;
      const plain = all.filter(([, it]) => !suspect(it)).sort(m.shared ? byWait : byRowid);
      const oneSuspect = running ? [] : all.filter(([, it]) => suspect(it)).slice(0, 1);
      const suspects = m.shared && plain.length >= op.limit ? [] : oneSuspect;
      const rest = plain.slice(0, m.shared ? op.limit : op.limit - suspects.length);
      const due = [...suspects, ...rest].slice(0, Math.max(0, op.limit)).sort(byWait);
      const want = due.map(([id, it]) => claimInModel(m, id, it, o.owner));
      expect(await ledger.claimDue({ ...o, limit: op.limit })).toEqual(want);
      return;
    }
    case 'complete':
    case 'fail':
    case 'release': {
      const claim = pickClaim(m, op.pick, op.stale);
      if (claim === undefined) return;
      const it = holds(m, claim);
      const error = `err-${++m.errors}`;
      let want: { result: string; state?: ItemState; availableAt?: number } = { result: 'fenced' };
      if (it && op.kind === 'complete') {
        Object.assign(it, { state: 'done', owner: null, doneAt: m.now });
        m.totals.itemsDone++;
        want = { result: 'applied', state: 'done' };
      } else if (it && op.kind === 'fail') {
        const state = failInModel(m, it, error);
        want = { result: 'applied', state, ...(state === 'pending' ? { availableAt: it.availableAt } : {}) };
      } else if (it) {
        // A suspect handed back is still one (its last charge stands), so its error stays.
        const wasSuspect = suspect({ ...it, attempts: it.attempts - 1 });
        Object.assign(it, { state: 'pending', owner: null, released: it.released + 1, availableAt: m.now, lastError: wasSuspect ? it.lastError : error });
        want = { result: 'applied', state: 'pending', availableAt: m.now };
      }
      const [got] =
        op.kind === 'complete'
          ? await ledger.complete([claim], m.now)
          : op.kind === 'fail'
            ? await ledger.fail([{ claim, error }], { now: m.now, retry: RETRY, random: RANDOM })
            : await ledger.release([claim], m.now, error);
      expect(got).toMatchObject({ id: claim.id, ...want });
      return;
    }
    case 'reclaim': {
      const except = OWNERS[op.owner] ?? 'x';
      let moved = 0;
      for (const it of m.items.values()) {
        if (it.state !== 'claimed' || it.owner === except) continue;
        failInModel(m, it, `attempt ${it.attempts} abandoned: the run that claimed it died`);
        moved++;
      }
      expect(await ledger.reclaimOrphans(except, { now: m.now, retry: RETRY, random: RANDOM })).toBe(moved);
      return;
    }
    case 'retryDead': {
      const ids = op.ids === 'all' ? [...m.items.keys()] : [...new Set(op.ids)];
      let moved = 0;
      for (const id of ids) {
        const it = m.items.get(id);
        if (it?.state !== 'dead') continue;
        // SQLite gives it the pass that discovered last (sqlite/recover.ts), so that a pass
        // going on sweeps it rather than forget it at its end of scan.
        Object.assign(it, { state: 'pending', attempts: 0, released: 0, availableAt: m.now, ...(!m.shared && m.lastPass !== null ? { seenRun: m.lastPass } : {}) });
        moved++;
      }
      m.totals.requeued += moved;
      expect(await ledger.retryDead(op.ids, m.now)).toBe(moved);
      return;
    }
    case 'renew': {
      const owner = OWNERS[op.owner] ?? 'x';
      const lost = op.ids.filter((id) => !(m.items.get(id)?.state === 'claimed' && m.items.get(id)?.owner === owner));
      expect(await ledger.renew(owner, op.ids, m.now + 5000)).toEqual(lost);
      return;
    }
    case 'settle': {
      // The runner's write: successes, then a claim of candidates (ResultBatcher.flushAndClaim).
      const o = opts(op.owner);
      // One success per item per write, as the runner settles them.
      const claims = op.complete
        .map((c) => pickClaim(m, c.pick, c.stale))
        .filter((c, i, all): c is Claim => c !== undefined && all.findIndex((d) => d?.id === c.id) === i);
      const wantComplete = claims.map((c) => {
        const it = holds(m, c);
        if (!it) return { id: c.id, result: 'fenced' };
        Object.assign(it, { state: 'done', owner: null, doneAt: m.now });
        m.totals.itemsDone++;
        return { id: c.id, result: 'applied', state: 'done' };
      });
      const wantClaims = [...new Set(op.ids)]
        .filter((id) => m.items.has(id) && claimable(m, m.items.get(id) as MItem))
        .map((id) => claimInModel(m, id, m.items.get(id) as MItem, o.owner));
      const got = await ledger.settle({ complete: claims, fail: [], release: [], gone: [] }, m.now, { ids: op.ids, opts: o });
      expect(got.complete).toMatchObject(wantComplete);
      expect(got.claims).toEqual(wantClaims);
      return;
    }
    case 'tick':
      m.now += op.ms;
  }
}

/** The ledger equals the model, and the invariants hold whatever the model says. */
async function verify(m: Model, ledger: Ledger, op: Op): Promise<void> {
  const before = m.seenAttempts;
  const counts = { pending: 0, claimed: 0, done: 0, dead: 0 };
  for (const id of IDS) {
    const rec = await ledger.get(id);
    const it = m.items.get(id);
    if (it === undefined) {
      expect(rec).toBeNull();
      continue;
    }
    counts[it.state]++;
    const { state, attempts, released, owner, availableAt, lastError, doneAt, size, mtimeMs } = it;
    expect(rec).toMatchObject({ id, state, attempts, released, owner, availableAt, lastError, doneAt, size, mtimeMs });
    if (rec === null) continue;
    expect(rec.owner !== null).toBe(rec.state === 'claimed');
    expect(rec.doneAt !== null).toBe(rec.state === 'done');
    expect(rec.attempts - rec.released).toBeLessThanOrEqual(RETRY.maxAttempts);
    if (rec.state === 'pending') expect(rec.attempts - rec.released).toBeLessThan(RETRY.maxAttempts);
    // Attempts only restart with a new cycle: retryDead, or a discovery with a refresh policy.
    if (op.kind !== 'retryDead' && !(op.kind === 'discover' && op.refresh)) {
      expect(rec.attempts).toBeGreaterThanOrEqual(before.get(id) ?? 0);
    }
    before.set(id, rec.attempts);
  }
  expect(await ledger.counts()).toEqual(counts);
  expect(await ledger.totals()).toEqual(m.totals);
}

class OpCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly op: Op) {}
  check(): boolean {
    return true;
  }
  async run(m: Model, r: Real): Promise<void> {
    await step(this.op, m, r.ledger);
    await verify(m, r.ledger, this.op);
  }
  toString(): string {
    return JSON.stringify(this.op);
  }
}

const id = fc.constantFrom(...IDS);
const owner = fc.nat({ max: OWNERS.length - 1 });
const stale = fc.constantFrom<Stale>('none', 'none', 'owner', 'attempt');
// Few stat values, so files often keep or revert to the version claimed; fractional mtimes as fs.stat gives them.
const found = fc.record({ id, size: fc.constantFrom(1, 2), mtimeMs: fc.constantFrom(1.5, 2.25) }, { requiredKeys: ['id'] });
const refresh = fc.record({ doneBeforeAgo: fc.option(fc.constantFrom(0, 200, 1000), { nil: undefined }), onChange: fc.boolean() });
const ops: fc.Arbitrary<Op>[] = [
  fc.record({
    kind: fc.constant('discover' as const),
    found: fc.array(found, { minLength: 1, maxLength: 6 }),
    owner,
    limit: fc.option(fc.nat({ max: 4 }), { nil: undefined }),
    refresh: fc.option(refresh, { nil: undefined }),
  }),
  fc.record({ kind: fc.constant('claimDue' as const), owner, limit: fc.integer({ min: 1, max: 4 }) }),
  ...(['complete', 'fail', 'fail', 'release'] as const).map((kind) => fc.record({ kind: fc.constant(kind), pick: fc.nat(), stale })),
  fc.record({ kind: fc.constant('reclaim' as const), owner }),
  fc.record({ kind: fc.constant('retryDead' as const), ids: fc.oneof(fc.constant('all' as const), fc.array(id, { maxLength: 3 })) }),
  fc.record({ kind: fc.constant('renew' as const), owner, ids: fc.array(id, { maxLength: 3 }) }),
  fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: -300, max: 500 }) }),
  fc.record({
    kind: fc.constant('settle' as const),
    owner,
    complete: fc.array(fc.record({ pick: fc.nat(), stale }), { maxLength: 3 }),
    ids: fc.array(id, { maxLength: 4 }),
  }),
];

/** Random sequences against a fresh ledger each, `open` making it. */
async function behavesLikeTheModel(open: () => Promise<Ledger>, numRuns: number): Promise<void> {
  const sequence = fc.commands(ops.map((a) => a.map((op) => new OpCommand(op))), { maxCommands: 80, size: 'max' });
  await fc.assert(
    fc.asyncProperty(sequence, async (cmds) => {
      const ledger = await open();
      try {
        await fc.asyncModelRun(() => ({ model: newModel(ledger.shared), real: { ledger } }), cmds);
      } finally {
        await ledger.close();
      }
    }),
    { numRuns },
  );
}

const root = mkdtempSync(join(tmpdir(), 'cronsafe-ledger-model-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let runs = 0;

// Plain: every write its own transaction. Write-behind: as `cronsafe run` opens it, claims
// and successes through the start journal (ledger/sqlite/write-behind.ts); the same model.
it.each([false, true])('the SQLite ledger (writeBehind: %s) behaves like the model under random, often stale, operations', async (writeBehind) => {
  await behavesLikeTheModel(() => openSqliteLedger(join(root, `run-${++runs}.db`), { writeBehind }), 150);
  // CPU- and fsync-bound (150 random histories): about 30 s a case at load 25 on 2 cores, so
  // the default 60 s left CI's loaded runs too little room.
}, 240_000);

// The same model on PostgreSQL, a schema per sequence (a real server: test/helpers/postgres.ts).
// Fewer sequences: each one migrates a new schema, and every step is a few round trips.
describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL', () => {
  const pg = usePostgresDatabase('model', 60_000);

  it('the PostgreSQL ledger behaves like the model under random, often stale, operations', async () => {
    await behavesLikeTheModel(() => openPostgresLedger({ url: pg.url, schema: `m_${++runs}` }), 60);
  }, 240_000);
});
