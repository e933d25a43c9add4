// PROTOTYPE (issue 11, not product code): one pod of the claim-at-the-slot model on the real
// cronsafe schema (migration 001), in raw `pg`, to measure what the design in
// /work/notes/pg-design.md can reach before the runner is rewritten.
//
//   discovery: batches of 256 generated ids; one transaction inserts new ids as pending,
//              marks known pending ones as seen by the PASS (seen_run = run group) and
//              returns the batch's ids claimable now -> bounded channel of candidate ids;
//   dispatch:  when k of `concurrency` slots are free, claim up to k candidates in ONE
//              statement (attempt counted); no-op handler; results batched (128 / 20 ms);
//   complete:  fenced by (id, owner, attempt), multi-row, with the counter bump;
//   sweep:     after the scan, claim k = free slots among the pass's pending due items,
//              until none is left and nothing is in flight.
//
//   node bench/proto/claim-at-slot.mjs URL SCHEMA GROUP N '{"claimCommit":"off",...}'
// Options (JSON): concurrency (8), queueSize (32), claimCommit ('on' | 'off': synchronous_commit
// of the claim session | 'local': BEGIN; SET LOCAL synchronous_commit = off; claim; COMMIT), claimTx (wrap each claim in BEGIN/COMMIT), claimConns (claims in
// flight at once, each on its own connection), completeOne (complete + counters as one
// statement instead of BEGIN/UPDATE/INSERT/COMMIT), window (candidates offered per claim:
// 'k' or 'all' of the channel), sweepOrder ('available_at, id' | 'available_at'), candidates
// (false: discovery feeds no candidates, every item goes through the sweep), analyze (ANALYZE
// items once the scan is done: a first pass otherwise plans on a never-analyzed table),
// analyzeAfter (ANALYZE once this pod has inserted this many rows; 0 = never),
// sweepIndex (an index matching the sweep's ORDER BY: (seen_run, available_at, id)), pkGuard
// (complete with `i.id = ANY($ids)`, so the plan looks rows up by primary key whatever the
// statistics say), maxUnwritten (no claim while this many finished results wait to be written:
// back-pressure from the ledger's write rate; 0 = none), named (prepared statements, planned
// once and then generically; false: unnamed, planned for each call's values), customPlans
// (plan_cache_mode = force_custom_plan on every session: prepared, but planned for each
// call's values; a generic plan made while the table looked small scans every pending row),
// claimMax (at most this many slots per claim, so several claims alternate; 0 = all free).
// Prints BENCH_RESULT=<json>.
import pg from 'pg';

const [url, schema, group, nArg, optsArg = '{}'] = process.argv.slice(2);
const N = Number(nArg);
const o = { concurrency: 8, queueSize: 32, claimCommit: 'off', claimTx: false, claimConns: 1, completeOne: true, window: 'k', sweepOrder: 'available_at, id', candidates: true, analyze: false, analyzeAfter: 0, sweepIndex: false, pkGuard: true, maxUnwritten: 256, named: true, customPlans: true, claimMax: 0, ...JSON.parse(optsArg) };
const S = `"${schema}"`;
const owner = `proto:${process.pid}:${Math.random().toString(36).slice(2, 8)}`;
const LEASE_MS = 90_000;
const id = (i) => `d${String(Math.floor(i / 1000)).padStart(4, '0')}/f${String(i % 1000).padStart(4, '0')}`;

const connect = async (opts = '') => {
  const all = [opts, o.customPlans ? '-c plan_cache_mode=force_custom_plan' : ''].filter(Boolean).join(' ');
  const c = new pg.Client({ connectionString: url, options: all || undefined });
  await c.connect();
  return c;
};
const discoverConn = await connect();
const claimConns = await Promise.all(Array.from({ length: o.claimConns }, () => connect(o.claimCommit === 'off' ? '-c synchronous_commit=off' : '')));
const resultConn = await connect();
if (o.sweepIndex) await resultConn.query(`CREATE INDEX IF NOT EXISTS items_pending_sweep ON ${S}.items (seen_run, available_at, id) WHERE state = 'pending'`);

let rtt = 0; // round trips issued by this pod
const q = async (c, text, values, name) => {
  rtt++;
  return (await c.query({ text, values, name: o.named ? name : undefined })).rows;
};

// ---- discovery -------------------------------------------------------------------------
let inserted = 0;
let analyzed = false;
async function discover(ids) {
  const now = Date.now();
  await q(discoverConn, 'BEGIN');
  const created = await q(
    discoverConn,
    `INSERT INTO ${S}.items (id, seen_run, available_at, first_seen_at, updated_at)
SELECT d.id, $2, $3, $3, $3 FROM unnest($1::text[]) AS d(id) ORDER BY d.id COLLATE "C"
ON CONFLICT (id) DO NOTHING RETURNING id`,
    [ids, group, now],
    'p-insert',
  );
  let claimable = created.map((r) => r.id);
  inserted += created.length;
  if (created.length < ids.length) {
    const made = new Set(claimable);
    const known = ids.filter((x) => !made.has(x));
    await q(
      discoverConn,
      `WITH t AS (SELECT id FROM ${S}.items WHERE id = ANY($1::text[]) AND state = 'pending' AND seen_run IS DISTINCT FROM $2 ORDER BY id FOR UPDATE SKIP LOCKED)
UPDATE ${S}.items AS i SET seen_run = $2 FROM t WHERE i.id = t.id`,
      [known, group],
      'p-touch',
    );
    const rows = await q(discoverConn, `SELECT id FROM ${S}.items WHERE id = ANY($1::text[]) AND state = 'pending' AND available_at <= $2`, [known, now], 'p-claimable');
    claimable = claimable.concat(rows.map((r) => r.id));
  }
  await q(discoverConn, 'COMMIT');
  if (o.analyzeAfter > 0 && !analyzed && inserted >= o.analyzeAfter) {
    analyzed = true;
    await q(discoverConn, `ANALYZE ${S}.items`);
  }
  return claimable;
}

// ---- claims ----------------------------------------------------------------------------
const CLAIM_SET = `SET state = 'claimed', owner = $2, attempts = i.attempts + 1, lease_until = $4, claimed_size = i.size, claimed_mtime_ms = i.mtime_ms, updated_at = $3`;
const byIdsSql = `WITH c AS (SELECT it.id FROM ${S}.items AS it WHERE it.id = ANY($1::text[]) AND it.state = 'pending' AND it.available_at <= $3
  ORDER BY it.id LIMIT $5 FOR UPDATE OF it SKIP LOCKED)
UPDATE ${S}.items AS i ${CLAIM_SET} FROM c WHERE i.id = c.id RETURNING i.id, i.attempts`;
const sweepSql = `WITH c AS (SELECT id FROM ${S}.items WHERE state = 'pending' AND seen_run = $1 AND available_at <= $3
  ORDER BY ${o.sweepOrder} LIMIT $5 FOR UPDATE SKIP LOCKED)
UPDATE ${S}.items AS i ${CLAIM_SET} FROM c WHERE i.id = c.id RETURNING i.id, i.attempts`;

async function claimOn(c, sql, first, k, name) {
  const now = Date.now();
  const tx = o.claimTx || o.claimCommit === 'local';
  if (tx) await q(c, 'BEGIN');
  if (o.claimCommit === 'local') await q(c, 'SET LOCAL synchronous_commit = off');
  const rows = await q(c, sql, [first, owner, now, now + LEASE_MS, k], name);
  if (tx) await q(c, 'COMMIT');
  return rows;
}

// ---- results ---------------------------------------------------------------------------
let pendingResults = [];
let flushTimer;
let flushing = Promise.resolve();
let completed = 0;
let fenced = 0;
function addResult(r) {
  pendingResults.push(r);
  if (pendingResults.length >= 128) flush();
  else flushTimer ??= setTimeout(flush, 20);
}
function flush() {
  clearTimeout(flushTimer);
  flushTimer = undefined;
  const batch = pendingResults;
  pendingResults = [];
  if (batch.length === 0) return flushing;
  flushing = flushing.then(() => writeResults(batch));
  return flushing;
}
async function writeResults(batch) {
  const now = Date.now();
  const ids = batch.map((r) => r.id);
  const owners = batch.map(() => owner);
  const attempts = batch.map((r) => r.attempts);
  const update = `UPDATE ${S}.items AS i SET state = 'done', owner = NULL, lease_until = NULL, done_at = $4, done_by = c.owner, updated_at = $4
FROM unnest($1::text[], $2::text[], $3::integer[]) AS c(id, owner, attempt)
WHERE ${o.pkGuard ? 'i.id = ANY($1::text[]) AND ' : ''}i.id = c.id AND i.state = 'claimed' AND i.owner = c.owner AND i.attempts = c.attempt RETURNING i.id`;
  let applied;
  if (o.completeOne) {
    const rows = await q(
      resultConn,
      `WITH done AS (${update}),
bump AS (INSERT INTO ${S}.counters AS k (name, value)
  SELECT 'items_done', count(*) FROM done HAVING count(*) > 0
  ON CONFLICT (name) DO UPDATE SET value = k.value + EXCLUDED.value)
SELECT id FROM done`,
      [ids, owners, attempts, now],
      'p-complete1',
    );
    applied = rows.length;
  } else {
    await q(resultConn, 'BEGIN');
    const rows = await q(resultConn, update, [ids, owners, attempts, now], 'p-complete');
    await q(
      resultConn,
      `INSERT INTO ${S}.counters AS k (name, value) SELECT * FROM unnest($1::text[], $2::bigint[]) ON CONFLICT (name) DO UPDATE SET value = k.value + EXCLUDED.value`,
      [['items_done'], [rows.length]],
      'p-bump',
    );
    await q(resultConn, 'COMMIT');
    applied = rows.length;
  }
  completed += applied;
  fenced += batch.length - applied;
  for (const r of batch) held.delete(r.id);
  wake();
}

// ---- the pass --------------------------------------------------------------------------
const channel = []; // candidate ids (bounded by queueSize)
let scanDone = false;
let wakeProducer;
let dispatchWaiters = [];
const held = new Map();
let running = 0;
let reserved = 0;
let claims = 0;
let emptyClaims = 0;
const wake = () => {
  const w = dispatchWaiters;
  dispatchWaiters = [];
  for (const f of w) f();
};
const idle = () => new Promise((r) => dispatchWaiters.push(r));

async function produce() {
  for (let i = 0; i < N; i += 256) {
    const ids = Array.from({ length: Math.min(256, N - i) }, (_, j) => id(i + j));
    const cands = await discover(ids);
    if (!o.candidates) continue; // everything through the sweep (as a pod that joins after the scan)
    for (const c of cands) {
      while (channel.length >= o.queueSize) await new Promise((r) => (wakeProducer = r));
      channel.push(c);
      wake();
    }
  }
  if (o.analyze) await q(discoverConn, `ANALYZE ${S}.items`);
  scanDone = true;
  wake();
}

function start(rows) {
  for (const r of rows) {
    held.set(r.id, r);
    running++;
    // The no-op handler: the item is done as soon as it starts.
    Promise.resolve().then(() => {
      running--;
      addResult(r);
      wake();
    });
  }
}

async function claimLoop(c) {
  for (;;) {
    const idleSlots = o.concurrency - running - reserved;
    const free = o.claimMax > 0 ? Math.min(idleSlots, o.claimMax) : idleSlots;
    const unwritten = held.size - running;
    if (free <= 0 || (o.maxUnwritten > 0 && unwritten >= o.maxUnwritten)) {
      await idle();
      continue;
    }
    let rows;
    if (channel.length > 0) {
      // 'all': every candidate this loop may look at (shared out when several loops claim).
      const take = Math.min(channel.length, o.window === 'all' ? Math.max(free, Math.ceil(channel.length / o.claimConns)) : free);
      const cands = channel.splice(0, take);
      wakeProducer?.();
      reserved += free;
      claims++;
      rows = await claimOn(c, byIdsSql, cands, free, 'p-claim-ids').finally(() => (reserved -= free));
      // Offered more than k: the claim looked at candidates in id order and stopped after k, so
      // those past the last one claimed were not considered and go back to the front; the
      // others were not claimable (another pod has them) and are dropped.
      if (o.window === 'all' && rows.length === free) {
        const last = rows.reduce((m, r) => (r.id > m ? r.id : m), '');
        channel.unshift(...cands.filter((x) => x > last).slice(0, Math.max(0, o.queueSize - channel.length)));
      }
    } else if (scanDone) {
      reserved += free;
      claims++;
      rows = await claimOn(c, sweepSql, group, free, 'p-sweep').finally(() => (reserved -= free));
      if (rows.length === 0) {
        emptyClaims++;
        // Nothing claimable in the pass: done once nothing of ours is in flight or unwritten.
        if (running === 0 && reserved === 0) {
          await flush();
          if (held.size === 0) {
            wake(); // a sibling claim loop may be waiting for a slot that will never free
            return;
          }
        }
        await new Promise((r) => setTimeout(r, 5));
      }
    } else {
      await idle();
      continue;
    }
    if (rows.length === 0 && channel.length === 0 && !scanDone) emptyClaims++;
    start(rows);
  }
}

const t0 = performance.now();
const cpu0 = process.cpuUsage();
const producer = produce();
await Promise.all([producer, ...claimConns.map((c) => claimLoop(c))]);
await flush();
const ms = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
await Promise.all([discoverConn, resultConn, ...claimConns].map((c) => c.end()));
process.stdout.write(
  `BENCH_RESULT=${JSON.stringify({ owner, completed, fenced, ms, itemsPerSec: (completed * 1000) / ms, claims, emptyClaims, roundTrips: rtt, cpuMs: (cpu.user + cpu.system) / 1000, opts: o })}\n`,
);
