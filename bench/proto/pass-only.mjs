// Profiling aid: one synthetic first pass of runPass (no directory, no file creation), so a
// `--cpu-prof` of this script is the ledger + runner only. `BENCH_ITEMS=100000 node --cpu-prof bench/proto/pass-only.mjs`
// (BENCH_ORDER=spread: ids in scattered order, as a directory's hash order gives them)
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../dist/config/load.js';
import { openSqliteLedger } from '../../dist/ledger/sqlite/index.js';
import { createLogger } from '../../dist/log.js';
import { runPass } from '../../dist/runner/pass.js';
import { envInt, itemId, writeConfig } from '../lib.mjs';

const N = envInt('BENCH_ITEMS', 100_000);
const root = mkdtempSync(path.join(os.tmpdir(), 'cronsafe-pass-only-'));
try {
  mkdirSync(path.join(root, 'src'), { recursive: true });
  const config = loadConfig(writeConfig(root, { source: path.join(root, 'src') }));
  const ledger = await openSqliteLedger(config.state.sqlite, { writeBehind: true });
  const never = new AbortController().signal;
  // BENCH_ORDER=spread: ids in a scattered order (a directory's hash order), not sorted.
  const spread = process.env.BENCH_ORDER === 'spread';
  async function* synthetic(n) { for (let i = 0; i < n; i++) yield { id: itemId(spread ? (i * 7919 + 13) % n : i) }; }
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const r = await runPass({ config, ledger, handler: { run: async () => {} }, log: createLogger({ level: 'silent', format: 'json' }), runId: 'p1', owner: `p:${process.pid}:p1`, stop: never, force: never, source: synthetic(N) });
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  const cpuMs = (c.user + c.system) / 1000;
  await ledger.close();
  process.stdout.write(`${r.outcome} ${r.counts.succeeded} in ${ms.toFixed(0)} ms = ${Math.round(N * 1000 / ms)} items/s; CPU ${cpuMs.toFixed(0)} ms = ${Math.round(N * 1000 / cpuMs)} items/CPU-s\n`);
} finally { rmSync(root, { recursive: true, force: true }); }
