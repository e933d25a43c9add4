// Profiling aid: `dead-letter retry --all` over N dead rows, as the ledger runs it (pages of
// RETRY_DEAD_PAGE, each its own transaction), and the longest time a writer of another
// process waits for the write lock meanwhile (a probe taking BEGIN IMMEDIATE every 20 ms).
// node bench/proto/retry-dead.mjs [N=200000]   (after npm run build)
import Database from 'better-sqlite3';
import { fork } from 'node:child_process';
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
const f = '/tmp/retry-dead.db';
if (process.argv[2] === 'probe') {
  const db = new Database(f, { timeout: 60_000 });
  let worst = 0;
  process.on('message', () => { process.send(worst); process.exit(0); });
  setInterval(() => {
    const t = performance.now();
    db.exec('BEGIN IMMEDIATE');
    db.exec('COMMIT');
    worst = Math.max(worst, performance.now() - t);
  }, 20);
  process.send('ready');
} else {
  const { openSqliteLedger } = await import('../../dist/ledger/sqlite/index.js');
  const n = Number(process.argv[2] ?? 200_000);
  for (const s of ['', '-wal', '-shm', '-starts']) rmSync(f + s, { force: true });
  const db = new Database(f);
  (await openSqliteLedger(f, {})).close();
  const ins = db.prepare(`INSERT INTO items (id, state, attempts, available_at, first_seen_at, updated_at, dead_at, last_error) VALUES (?, 'dead', 3, 0, 0, 0, ?, 'boom')`);
  db.transaction(() => { for (let i = 0; i < n; i++) ins.run(`item-${i}`, i); })();
  db.close();
  const probe = fork(fileURLToPath(import.meta.url), ['probe']);
  await new Promise((r) => probe.once('message', r));
  const ledger = await openSqliteLedger(f, {});
  const t = performance.now();
  const moved = await ledger.retryDead('all', Date.now());
  const ms = performance.now() - t;
  await ledger.close();
  probe.send('report');
  const worst = await new Promise((r) => probe.once('message', r));
  console.log(`retryDead('all') moved ${moved} of ${n} in ${ms.toFixed(0)} ms; another process's writer waited at most ${Number(worst).toFixed(0)} ms`);
  for (const s of ['', '-wal', '-shm', '-starts']) rmSync(f + s, { force: true });
}
