// `node bench/seen-writes.mjs` (after `npm run build`): what discovery writes to a SQLite
// ledger when every file it finds is done already (docs/benchmarks.md, "Discovery of done
// items"). BENCH_SEEN_ITEMS ids (default 200,000) are discovered, claimed and completed once
// (pass 1), then discovered again by passes that find nothing to do: an hour later (pass 2),
// and two days later (pass 3: the daily refresh of the done rows' seen mark). In process,
// through the ledger API in batches of 1,024 (DISCOVER_BATCH_MAX), as a pass would.
// For each pass: its time, the bytes the process wrote (/proc/self/io wchar: WAL frames and
// checkpoints), and the WAL's size after it (truncated before each pass).
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { ROOT, envInt, fmtInt, itemId, table } from './lib.mjs';

const ITEMS = envInt('BENCH_SEEN_ITEMS', 200_000);
const BATCH = 1024;
const HOUR = 3600 * 1000;
const T0 = Date.UTC(2026, 0, 1);
const { openSqliteLedger } = await import(path.join(ROOT, 'dist', 'ledger/sqlite/index.js'));

const wchar = () => Number(/^wchar: (\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'))[1]);
const walBytes = (file) => {
  try {
    return statSync(`${file}-wal`).size;
  } catch {
    return 0;
  }
};
const mib = (b) => `${(b / 1048576).toFixed(1)} MiB`;

const dir = mkdtempSync(path.join(os.tmpdir(), 'cronsafe-seen-'));
const file = path.join(dir, 'state.sqlite');
const ids = Array.from({ length: ITEMS }, (_, i) => itemId(i));
const ledger = await openSqliteLedger(file);
const rows = [];

async function pass(label, runId, now, complete) {
  // The WAL emptied before the pass, so its size after is what the pass appended.
  const side = new Database(file);
  side.pragma('wal_checkpoint(TRUNCATE)');
  side.close();
  const w0 = wchar();
  const t0 = performance.now();
  let found = 0;
  for (let i = 0; i < ids.length; i += BATCH) {
    const batch = ids.slice(i, i + BATCH).map((id) => ({ id }));
    const claimable = await ledger.discover(batch, { runId, now });
    found += claimable.length;
    if (complete && claimable.length > 0) {
      const claims = await ledger.claim(claimable, { owner: 'bench', runId, now, leaseMs: 60_000 });
      await ledger.complete(claims, now);
    }
  }
  const ms = performance.now() - t0;
  rows.push([label, fmtInt(found), `${(ms / 1000).toFixed(2)} s`, mib(wchar() - w0), mib(walBytes(file))]);
}

await pass('1: all new, processed', 'p1', T0, true);
await pass('2: all done, an hour later', 'p2', T0 + HOUR, false);
await pass('3: all done, two days later', 'p3', T0 + 48 * HOUR, false);
await pass('4: all done, two days and an hour later', 'p4', T0 + 49 * HOUR, false);
await ledger.close();
rmSync(dir, { recursive: true, force: true });
console.log(`${fmtInt(ITEMS)} items, node ${process.version}, ${os.cpus().length} cores, load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
console.log(table(['pass', 'claimable', 'time', 'bytes written', 'WAL after'], rows));
