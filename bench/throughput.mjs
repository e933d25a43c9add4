// In-process no-op throughput of runPass over a real SQLite ledger (see docs/benchmarks.md).
// Run by bench/run.mjs, pinned to one core with taskset when available; prints one
// `BENCH_RESULT=<json>` line. Standalone: `BENCH_ITEMS=5000 node bench/throughput.mjs`.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../dist/config/load.js';
import { openSqliteLedger } from '../dist/ledger/sqlite/index.js';
import { createLogger } from '../dist/log.js';
import { runPass } from '../dist/runner/pass.js';
import { scanDirectory } from '../dist/runner/scan.js';
import { envInt, itemId, makeTree, writeConfig } from './lib.mjs';

const N = envInt('BENCH_ITEMS', 100_000);
const handler = { run: async () => {} };
const log = createLogger({ level: 'silent', format: 'json' });
let passNo = 0;

/** One pass in a fresh ledger connection (as a new CronJob run would open it). */
async function timedPass(config, source) {
  // As `cronsafe run` opens it: the run's connection writes claims behind (write-behind.ts).
  const ledger = await openSqliteLedger(config.state.sqlite, { writeBehind: true });
  const runId = `bench-${++passNo}`;
  const never = new AbortController().signal;
  try {
    const t0 = performance.now();
    const result = await runPass({
      config,
      ledger,
      handler,
      log,
      runId,
      owner: `bench:${process.pid}:${runId}`,
      stop: never,
      force: never,
      ...(source ? { source } : {}),
    });
    const ms = performance.now() - t0;
    if (result.error) throw result.error;
    return { ms, itemsPerSec: (N * 1000) / ms, outcome: result.outcome, counts: result.counts };
  } finally {
    await ledger.close();
  }
}

async function* synthetic(n) {
  for (let i = 0; i < n; i++) yield { id: itemId(i) };
}

function check(name, r, expectSucceeded) {
  if (r.outcome !== 'completed' || r.counts.scanned !== N || r.counts.succeeded !== expectSucceeded) {
    throw new Error(`${name}: unexpected result ${JSON.stringify({ outcome: r.outcome, counts: r.counts })}`);
  }
}

const root = mkdtempSync(path.join(os.tmpdir(), 'cronsafe-bench-tp-'));
try {
  // Under `taskset -c 0` this is 1: the proof that the numbers are one core's.
  const out = { items: N, cores: os.availableParallelism() };

  // (a) synthetic source: the ledger + runner cost only.
  const aRoot = path.join(root, 'a');
  mkdirSync(path.join(aRoot, 'src'), { recursive: true });
  const aConfig = loadConfig(writeConfig(aRoot, { source: path.join(aRoot, 'src') }));
  out.config = { concurrency: aConfig.concurrency, queueSize: aConfig.queueSize, logLevel: aConfig.log.level };
  out.synthetic = await timedPass(aConfig, synthetic(N));
  check('synthetic', out.synthetic, N);
  out.syntheticRepeat = await timedPass(aConfig, synthetic(N));
  check('synthetic repeat', out.syntheticRepeat, 0);

  // (b) a real directory of N empty files, scanned by the default scanner.
  const bRoot = path.join(root, 'b');
  const bSrc = path.join(bRoot, 'src');
  out.createFilesMs = makeTree(bSrc, N);
  const bConfig = loadConfig(writeConfig(bRoot, { source: bSrc }));
  // The scanner alone (no ledger), for reference: how much of (b) is directory walking.
  {
    const t0 = performance.now();
    let n = 0;
    for await (const _ of scanDirectory({ directory: bSrc, include: bConfig.source.include, exclude: [] })) n++;
    const ms = performance.now() - t0;
    if (n !== N) throw new Error(`scan found ${n} files, expected ${N}`);
    out.scanOnly = { ms, itemsPerSec: (N * 1000) / ms };
  }
  out.directory = await timedPass(bConfig);
  check('directory', out.directory, N);
  // (c) the same N items again, all done: how cheap skipping is.
  out.directoryRepeat = await timedPass(bConfig);
  check('directory repeat', out.directoryRepeat, 0);

  process.stdout.write(`BENCH_RESULT=${JSON.stringify(out)}\n`);
} finally {
  const t0 = performance.now();
  rmSync(root, { recursive: true, force: true });
  process.stderr.write(`throughput: removed temp files in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
}
