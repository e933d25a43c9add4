// `node bench/retention.mjs` (after `npm run build`): what a pass costs when the SQLite
// ledger holds many done items whose files are gone (BENCH_RETENTION_ITEMS, default
// 1,000,000) and 1,000 new files arrive, before and after retention forgets them
// (docs/benchmarks.md, "Retention"). In process (runPass from dist/), a no-op handler, the
// default retention; the clock is injected so that "31 days later" takes no time.
//   day 0, 5 passes : 1,000 new files each; each complete scan's walk marks the next
//                     200,000 done items missing (the walk is bounded per pass)
//   day 1           : 1,000 new files; the walk finds its slice marked already (steady cost)
//   day 31          : 1,000 new files; the marked items are forgotten, the file shrinks
//   day 31, later   : 1,000 new files on the pruned ledger
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, envInt, environment, fmtInt, fmtMiB, fmtSec, itemId, makeTree, table } from './lib.mjs';

const ITEMS = envInt('BENCH_RETENTION_ITEMS', 1_000_000);
const NEW = envInt('BENCH_RETENTION_NEW', 1_000);
const DAY = 24 * 3600 * 1000;
const T0 = Date.UTC(2026, 0, 1);
const log = (msg) => process.stderr.write(`[bench] ${msg}\n`);
const dist = (p) => import(path.join(ROOT, 'dist', p));
const { openSqliteLedger } = await dist('ledger/sqlite/index.js');
const { loadConfig } = await dist('config/load.js');
const { runPass } = await dist('runner/pass.js');
const { pino } = await import('pino');

const PRUNE_VERBS = new Set(['pruneRuns', 'pruneEvents', 'markMissing', 'forgetMissing', 'reclaimSpace']);

/** The ledger, with the time spent in retention verbs added up in `spent.ms`. */
function timed(ledger, spent) {
  return new Proxy(ledger, {
    get(target, prop) {
      const v = Reflect.get(target, prop);
      if (typeof v !== 'function') return v;
      if (!PRUNE_VERBS.has(prop)) return v.bind(target);
      return async (...args) => {
        const t = performance.now();
        try {
          return await v.apply(target, args);
        } finally {
          spent.ms += performance.now() - t;
        }
      };
    },
  });
}

/** `n` items done at `at`, ids outside the source tree (their files are gone). */
async function seed(ledger, n, at) {
  for (let start = 0; start < n; start += 1000) {
    const batch = Array.from({ length: Math.min(1000, n - start) }, (_, i) => ({ id: `gone/${itemId(start + i)}` }));
    const ids = await ledger.discover(batch, { runId: 'seed', now: at });
    const claims = await ledger.claim(ids, { owner: 'seed', runId: 'seed', now: at, leaseMs: 60_000 });
    await ledger.complete(claims, at);
  }
}

const fileSize = (db) => statSync(db).size + (statSync(`${db}-wal`, { throwIfNoEntry: false })?.size ?? 0);

const root = mkdtempSync(path.join(os.tmpdir(), 'cronsafe-bench-retention-'));
const rows = [];
try {
  const db = path.join(root, 'state', 'bench.db');
  const config = path.join(root, 'cronsafe.yaml');
  writeFileSync(config, `name: bench\nsource: {directory: ${JSON.stringify(path.join(root, 'src'))}}\nhandler: {command: ["true"]}\nstate: {sqlite: ${JSON.stringify(db)}}\n`);
  const env = environment();
  log(`node ${env.node}, ${env.cpu}, ${env.cores} cores, load ${env.loadavg.join(' ')}`);
  let ledger = await openSqliteLedger(db);
  log(`seeding ${fmtInt(ITEMS)} done items ...`);
  const s0 = performance.now();
  await seed(ledger, ITEMS, T0 - DAY);
  await ledger.close();
  log(`seeded in ${fmtSec(performance.now() - s0)}, ${fmtMiB(fileSize(db) / 1024)}`);

  const handler = { run: async () => undefined };
  const never = new AbortController().signal;
  // A pass walks at most 200,000 items (MARK_STEPS x MARK_WALK): the walk covers the
  // ledger over ceil(items / 200,000) passes, then goes round again.
  const walkPasses = Math.ceil((ITEMS + 8 * NEW) / 200_000);
  const passes = [
    ...Array.from({ length: walkPasses }, (_, i) => [`day 0 #${i + 1}: marks the next slice missing`, T0 + i * 300_000, `w${i}`]),
    ['day 1: the walk finds them marked', T0 + DAY, 'm'],
    ['day 31: forgets them, the file shrinks', T0 + 31 * DAY, 'f'],
    ['day 31: on the pruned ledger', T0 + 31 * DAY + 300_000, 'p'],
  ];
  for (const [name, at, batch] of passes) {
    makeTree(path.join(root, 'src', batch), NEW);
    ledger = await openSqliteLedger(db);
    const before = (await ledger.counts()).done;
    const spent = { ms: 0 };
    const t = performance.now();
    const r = await runPass({
      config: loadConfig(config),
      ledger: timed(ledger, spent),
      handler,
      log: pino({ level: 'silent' }),
      runId: `pass-${batch}`,
      owner: 'bench',
      stop: never,
      force: never,
      now: () => at,
    });
    const wall = performance.now() - t;
    await ledger.close();
    if (r.outcome !== 'completed' || r.counts.succeeded !== NEW) throw new Error(`pass ${name}: ${r.outcome}, ${JSON.stringify(r.counts)}`);
    const p = r.pruned ?? {};
    log(`pass ${name}: ${fmtSec(wall)} (retention ${fmtSec(spent.ms)}), pruned ${JSON.stringify(p)}, file ${fmtMiB(fileSize(db) / 1024)}`);
    rows.push([name, fmtInt(before), fmtSec(wall - spent.ms), fmtSec(spent.ms), fmtInt(p.markedMissing ?? 0), fmtInt(p.forgotten ?? 0), fmtMiB(fileSize(db) / 1024)]);
  }
} finally {
  rmSync(root, { recursive: true, force: true });
}
process.stdout.write(`${table(['pass', 'done items before', 'pass without retention', 'retention', 'marked missing', 'forgotten', 'ledger file after'], rows)}\n`);
