// Micro-bench of the PostgreSQL ledger's complete() (dist/, so build first): N items
// discovered and claimed by one owner in batches of 256 on a fresh, never-analyzed schema
// (as in a first pass), each batch completed in batches of B; the complete() calls are
// timed. Used to measure finish.ts changes (issue 11).
//   node bench/proto/complete-micro.mjs URL SCHEMA [N] [B]
import { openPostgresLedger } from '../../dist/ledger/postgres/index.js';

const [url, schema, nArg = '20000', bArg = '128'] = process.argv.slice(2);
const N = Number(nArg);
const B = Number(bArg);
const ledger = await openPostgresLedger({ url, schema });
const owner = 'micro-owner';
const id = (i) => `d${String(Math.floor(i / 1000)).padStart(4, '0')}/f${String(i % 1000).padStart(4, '0')}`;
// As the runner does: claims arrive in discovery batches of 256 and are completed in
// batches of B while the next ones are claimed, so an owner holds a few hundred at most.
const claims = [];
let applied = 0;
let completeMs = 0;
const t0 = performance.now();
for (let i = 0; i < N; i += 256) {
  const batch = Array.from({ length: Math.min(256, N - i) }, (_, j) => ({ id: id(i + j) }));
  const got = await ledger.discoverAndClaim(batch, { owner, runId: 'r', now: Date.now(), leaseMs: 600_000 });
  claims.push(...got);
  const c0 = performance.now();
  for (let k = 0; k < got.length; k += B) {
    const out = await ledger.complete(got.slice(k, k + B), Date.now());
    applied += out.filter((o) => o.result === 'applied').length;
  }
  completeMs += performance.now() - c0;
}
const ms = performance.now() - t0;
// A repeat is fenced, and says why.
const again = await ledger.complete(claims.slice(0, 2), Date.now());
const totals = await ledger.totals();
await ledger.close();
if (applied !== N) throw new Error(`applied ${applied} of ${N}`);
process.stdout.write(
  `BENCH_RESULT=${JSON.stringify({ N, B, ms, completeMs, completesPerSec: (N * 1000) / completeMs, repeat: again, itemsDone: totals.itemsDone })}\n`,
);
