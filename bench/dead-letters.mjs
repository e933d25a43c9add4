// `node bench/dead-letters.mjs` (after `npm run build`): peak RSS and time of the real CLI's
// `dead-letter list --json`, `dead-letter list` and `status --json` over ledgers with
// growing numbers of dead items. The output must stay flat: the list is streamed from the
// ledger page by page and written with backpressure (docs/benchmarks.md).
// Env: BENCH_DEAD (sizes, comma-separated; default 1000,100000,200000).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BENCH_DIR, ROOT, environment, fmtInt, fmtMiB, fmtSec, table } from './lib.mjs';
import { binNodeFlags } from './rss.mjs';

const SIZES = (process.env.BENCH_DEAD ?? '1000,100000,200000').split(',').map(Number);
const log = (msg) => process.stderr.write(`[bench] ${msg}\n`);
const { openSqliteLedger } = await import(path.join(ROOT, 'dist', 'ledger', 'sqlite', 'index.js'));

/** `n` dead items, 128 per deadAt (one result batch of the runner), ~120-byte last errors. */
async function seed(db, n) {
  const ledger = await openSqliteLedger(db);
  const retry = { maxAttempts: 1, backoffMs: 0, backoffMaxMs: 0 };
  try {
    for (let start = 0, b = 0; start < n; start += 128, b++) {
      const now = Date.UTC(2026, 0, 1) + b * 1000;
      const batch = Array.from({ length: Math.min(128, n - start) }, (_, i) => ({ id: `d${String((start + i) % 1000).padStart(4, '0')}/item-${start + i}.scc` }));
      const ids = await ledger.discover(batch, { runId: 'seed', now });
      const claims = await ledger.claim(ids, { owner: 'seed', runId: 'seed', now, leaseMs: 60_000 });
      await ledger.fail(claims.map((claim) => ({ claim, error: `exit code 1: ${claim.id}: cue 17 overlaps cue 16 (00:01:02,345 --> 00:01:01,999)` })), { now, retry });
    }
  } finally {
    await ledger.close();
  }
}

/** Run the CLI under bench/maxrss.mjs; its stdout is read and counted (not kept). */
function measure(args) {
  return new Promise((resolve, reject) => {
    const argv = [...binNodeFlags(), path.join(BENCH_DIR, 'maxrss.mjs'), path.join(ROOT, 'dist', 'cli.js'), ...args];
    const t0 = performance.now();
    const child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let bytes = 0;
    let tail = '';
    let stderr = '';
    child.stdout.on('data', (c) => {
      bytes += c.length;
      tail = (tail + c.toString('latin1')).slice(-16);
    });
    child.stderr.setEncoding('utf8').on('data', (c) => (stderr += c));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`${args.join(' ')} exited ${code}\n${stderr.slice(-2000)}`));
      const rss = /BENCH_MAXRSS_KB=(\d+)/.exec(stderr);
      const peaks = /BENCH_MEM_PEAKS_KB=(\{.*\})/.exec(stderr);
      resolve({ ms: performance.now() - t0, bytes, tail, maxRssKiB: rss ? Number(rss[1]) : null, peaks: peaks ? JSON.parse(peaks[1]) : null });
    });
  });
}

const env = environment();
log(`node ${env.node}, ${env.cpu}, ${env.cores} cores, load ${env.loadavg.join(' ')}`);
const rows = [];
const rss = new Map(); // command -> [[n, KiB]]
for (const n of SIZES) {
  const root = mkdtempSync(path.join(os.tmpdir(), 'cronsafe-bench-dead-'));
  try {
    const config = path.join(root, 'cronsafe.yaml');
    writeFileSync(config, `name: bench\nsource: {directory: ${JSON.stringify(root)}}\nhandler: {command: ["true"]}\nstate: {sqlite: ${JSON.stringify(path.join(root, 'state', 'bench.db'))}}\n`);
    log(`${fmtInt(n)} dead items: seeding ...`);
    await seed(path.join(root, 'state', 'bench.db'), n);
    for (const args of [['dead-letter', 'list', '--json'], ['dead-letter', 'list'], ['status', '--json']]) {
      const r = await measure([...args, '-c', config]);
      if (args.includes('list') && args.includes('--json') && !r.tail.endsWith('\n]\n')) throw new Error('the JSON array is not closed');
      log(`${fmtInt(n)} ${args.join(' ')}: ${fmtMiB(r.maxRssKiB)} peak RSS, ${fmtSec(r.ms)}, ${fmtInt(r.bytes)} bytes; peaks KiB ${JSON.stringify(r.peaks)}`);
      rows.push([fmtInt(n), args.join(' '), fmtMiB(r.maxRssKiB), fmtSec(r.ms), fmtInt(r.bytes)]);
      const key = args.join(' ');
      rss.set(key, [...(rss.get(key) ?? []), [n, r.maxRssKiB]]);
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
process.stdout.write(`${table(['dead items', 'command', 'peak RSS', 'wall', 'output bytes'], rows)}\n`);
// Flat memory (issue 12): peak RSS must not grow with the number of dead items. The first
// size pays for start-up only (V8 sizes its heap to the work once there is some), so the
// verdict is on the last step (e.g. 100,000 -> 200,000 dead items: at most 5% more); the
// ratio to the smallest is shown beside it.
const GROWTH = 1.05;
const verdicts = [];
for (const [key, points] of rss) {
  if (points.length < 3 || points.some((p) => !p[1])) continue;
  const [lo, mid, hi] = [points[0], points[points.length - 2], points[points.length - 1]];
  const step = hi[1] / mid[1];
  verdicts.push(
    `${key}: peak RSS ${fmtInt(hi[0])} / ${fmtInt(mid[0])} dead items = ${step.toFixed(2)}x (target <= ${GROWTH}x): ${step <= GROWTH ? 'OK' : 'MISSED'}; ` +
      `/ ${fmtInt(lo[0])} = ${(hi[1] / lo[1]).toFixed(2)}x`,
  );
}
process.stdout.write(`\n${verdicts.join('\n')}\n`);
