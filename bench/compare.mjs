// No-op throughput through the real CLI, side by side with the seeds' reference runners
// (docs/benchmarks.md, "CLI against the seeds"). All on the same machine in one run:
// - `cronsafe run` (bin flags, module no-op handler, concurrency 8, every other key at its
//   default, log level info), spawn to exit: start-up included;
// - seed 000's asyncio runner (WORK_S=0) over the same flat directory of `.scc` files;
// - seed 002's ledger worker over its own SQLite ledger of `items` ids (it has no files),
//   timed from worker start to exit (seeding the ledger is not timed).
// The seeds run from the seed-runners folder (lib.mjs seedRunnersDir); skipped without it.
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeFlatTree, seedRunnersDir, timeMaxRss, which, writeConfig, CLI } from './lib.mjs';
import { binNodeFlags, run } from './rss.mjs';

const gnuTime = which('/usr/bin/time');
const withTime = (argv) => (gnuTime ? [gnuTime, '-f', 'BENCH_TIME_MAXRSS_KB=%M', ...argv] : argv);

async function timed(argv, opts, timeoutMs) {
  const t0 = performance.now();
  const r = await run(withTime(argv), timeoutMs, opts);
  return { ...r, wallMs: performance.now() - t0, maxRssKiB: timeMaxRss(r.stderr) };
}

/** `cronsafe run` over `dir` (a fresh ledger under root), spawn to exit. */
export async function cliRun(root, dir, n, { command, name = 'cli', flags = binNodeFlags(), timeoutMs = 60_000 + n * 5 } = {}) {
  mkdirSync(path.join(root, name), { recursive: true });
  const configFile = writeConfig(path.join(root, name), { source: dir, queueSize: null, level: 'info', command });
  const r = await timed([process.execPath, ...flags, CLI, 'run', '-c', configFile], {}, timeoutMs);
  if (r.code !== 0) throw new Error(`cronsafe run exited ${r.code ?? r.signal}\n${r.stderr.slice(-2000)}`);
  const finished = r.stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l))
    .find((l) => l.msg === 'run finished');
  if (finished?.items?.done !== n) throw new Error(`cronsafe run: expected ${n} done items, got ${JSON.stringify(finished?.items)}`);
  return { items: n, wallMs: r.wallMs, itemsPerSec: (n * 1000) / r.wallMs, maxRssKiB: r.maxRssKiB, passMs: finished.durationMs };
}

export async function measureCompare({ items, seed002Items, log }) {
  const seeds = seedRunnersDir();
  const root = mkdtempSync(path.join(os.tmpdir(), 'cronsafe-bench-cmp-'));
  try {
    const queue = path.join(root, 'queue');
    log(`compare: creating ${items} empty .scc files in one directory ...`);
    const createFilesMs = makeFlatTree(queue, items);
    log(`compare: created in ${(createFilesMs / 1000).toFixed(1)} s; cronsafe run ...`);
    const out = { items, seed002Items, createFilesMs, seedRunners: seeds };
    out.cronsafe = await cliRun(root, queue, items);
    log(`compare: cronsafe ${Math.round(out.cronsafe.itemsPerSec)} items/s`);
    if (!seeds) {
      log('compare: seed runners not found (BENCH_SEED_RUNNERS, ../shared/seed-runners): seeds skipped');
      return out;
    }
    const python = which('/usr/bin/python3', '/usr/local/bin/python3') ?? 'python3';

    const done = path.join(root, 'seed000-done');
    const s0 = await timed([python, path.join(seeds, 'seed000_batch_runner.py'), queue, done], { env: { ...process.env, WORK_S: '0', LOCK_PATH: path.join(root, 'seed000.lock') } }, 60_000 + items * 5);
    if (s0.code !== 0) throw new Error(`seed 000 exited ${s0.code ?? s0.signal}\n${s0.stderr.slice(-2000)}`);
    const markers = readdirSync(done).length;
    if (markers !== items) throw new Error(`seed 000: expected ${items} .done markers, got ${markers}`);
    out.seed000 = { items, wallMs: s0.wallMs, itemsPerSec: (items * 1000) / s0.wallMs, maxRssKiB: s0.maxRssKiB };
    log(`compare: seed 000 ${Math.round(out.seed000.itemsPerSec)} items/s`);

    // Seed 002 as its README says: copies of its four files in a scratch dir with an out/ dir.
    const s2dir = path.join(root, 'seed002');
    mkdirSync(path.join(s2dir, 'out'), { recursive: true });
    for (const f of ['ledger.py', 'seed.py', 'worker.py', 'verify.py']) copyFileSync(path.join(seeds, 'seed002', f), path.join(s2dir, f));
    const seeded = await run([python, 'seed.py', String(seed002Items)], 120_000, { cwd: s2dir });
    if (seeded.code !== 0) throw new Error(`seed 002 seed.py exited ${seeded.code}\n${seeded.stderr}`);
    const s2 = await timed([python, 'worker.py'], { cwd: s2dir }, 60_000 + seed002Items * 50);
    if (s2.code !== 0) throw new Error(`seed 002 worker.py exited ${s2.code ?? s2.signal}\n${s2.stderr.slice(-2000)}`);
    const verified = await run([python, 'verify.py'], 120_000, { cwd: s2dir });
    if (verified.code !== 0) throw new Error(`seed 002 verify.py failed\n${verified.stdout.slice(-2000)}`);
    out.seed002 = { items: seed002Items, wallMs: s2.wallMs, itemsPerSec: (seed002Items * 1000) / s2.wallMs, maxRssKiB: s2.maxRssKiB };
    log(`compare: seed 002 ${Math.round(out.seed002.itemsPerSec)} items/s`);
    out.ratioSeed000 = out.cronsafe.itemsPerSec / out.seed000.itemsPerSec;
    out.ratioSeed002 = out.cronsafe.itemsPerSec / out.seed002.itemsPerSec;
    return out;
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
