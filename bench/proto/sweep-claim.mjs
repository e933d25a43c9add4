// Profiling aid: the end-of-scan sweep (claimDue) over N pending rows of one wait (a requeue
// behind the scan gives them one available_at), as the ledger runs it; then the sweep's
// query plan and the time of its SELECT ordered by id (before) and by rowid (now).
// node bench/proto/sweep-claim.mjs [N=50000]   (after npm run build)
import Database from 'better-sqlite3';
import { rmSync } from 'node:fs';
import { openSqliteLedger } from '../../dist/ledger/sqlite/index.js';
const n = Number(process.argv[2] ?? 50_000);
const f = '/tmp/sweep-claim.db';
for (const s of ['', '-wal', '-shm', '-starts']) rmSync(f + s, { force: true });
const ledger = await openSqliteLedger(f, {});
const now = Date.now();
const items = Array.from({ length: n }, (_, i) => ({ id: `item-${String((i * 7919) % n).padStart(7, '0')}`, size: 1, mtimeMs: 1 }));
for (let i = 0; i < n; i += 1000) await ledger.discover(items.slice(i, i + 1000), { runId: 'r1', now });
let t = performance.now();
let claimed = 0;
for (let i = 0; i < 50; i++) claimed += (await ledger.claimDue({ owner: 'o', runId: 'r1', now: now + 1, leaseMs: 90_000, limit: 8 })).length;
console.log(`claimDue x50 (limit 8) over ${n} rows of one wait: ${(performance.now() - t).toFixed(1)} ms, ${claimed} claimed`);
await ledger.close();
const db = new Database(f, { readonly: true });
for (const order of ['available_at, id', 'available_at, rowid']) {
  const sql = `SELECT id FROM items WHERE state = 'pending' AND seen_run = 'r1' AND available_at <= ${now + 10} ORDER BY ${order} LIMIT 8`;
  const st = db.prepare(sql);
  t = performance.now();
  for (let i = 0; i < 50; i++) st.all();
  const plan = db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all().map((r) => r.detail).join(' | ');
  console.log(`ORDER BY ${order}: ${(performance.now() - t).toFixed(1)} ms x50; ${plan}`);
}
db.close();
for (const s of ['', '-wal', '-shm', '-starts']) rmSync(f + s, { force: true });
