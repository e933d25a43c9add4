// Profiling aid: pending -> done for 100k rows, JSON batch (START_AND_COMPLETE_SQL) vs one prepared UPDATE per row.
import Database from 'better-sqlite3';
import { rmSync } from 'node:fs';
import { DISCOVER_SQL } from '../../dist/ledger/sqlite/claim.js';
import { START_AND_COMPLETE_SQL } from '../../dist/ledger/sqlite/finish.js';
import { migrate } from '../../dist/ledger/sqlite/migrate.js';
const variant = process.argv[2] ?? 'json';
const f = `/tmp/micro-u-${variant}.db`; for (const s of ['', '-wal', '-shm']) rmSync(f + s, { force: true });
const db = new Database(f);
db.pragma('journal_mode = WAL'); db.pragma('synchronous = NORMAL'); db.pragma('temp_store = MEMORY'); db.pragma('cache_size = -4096'); db.pragma('wal_autocheckpoint = 10000');
migrate(db);
const N = 100000; const ids = Array.from({ length: N }, (_, i) => `item-${String((i * 7919) % N).padStart(7, '0')}.scc`);
const disc = db.prepare(DISCOVER_SQL);
const dtx = db.transaction((b) => disc.run({ batch: b, runId: 'run-abcdefgh-1234', now: 1 }));
for (let i = 0; i < N; i += 256) dtx.immediate(JSON.stringify(ids.slice(i, i + 256).map((id) => [id, 0, 1])));
const sc = db.prepare(START_AND_COMPLETE_SQL).pluck();
const one = db.prepare(`UPDATE items SET state = 'done', owner = NULL, lease_until = NULL, attempts = @attempt,
  claimed_size = size, claimed_mtime_ms = mtime_ms, done_at = @now, updated_at = @now
WHERE id = @id AND state = 'pending' AND attempts = @attempt - 1 AND updated_at <= @at`);
const tx = db.transaction((slice) => {
  if (variant === 'json') return sc.all({ records: JSON.stringify(slice.map((id) => [id, 1, 1])), now: 2 }).length;
  let n = 0; for (const id of slice) n += one.run({ id, attempt: 1, at: 1, now: 2 }).changes; return n;
});
const t = performance.now(); let n = 0;
for (let i = 0; i < N; i += 1024) n += tx.immediate(ids.slice(i, i + 1024));
console.log(variant, n, 'us/item', ((performance.now() - t) * 1000 / N).toFixed(2));
