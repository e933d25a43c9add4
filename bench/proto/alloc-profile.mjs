// Profiling aid: allocation sites of one synthetic pass (objects collected by GC included),
// by function, as shares. `BENCH_ITEMS=50000 node bench/proto/alloc-profile.mjs`
import { Session } from 'node:inspector/promises';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../dist/config/load.js';
import { openSqliteLedger } from '../../dist/ledger/sqlite/index.js';
import { createLogger } from '../../dist/log.js';
import { runPass } from '../../dist/runner/pass.js';
import { envInt, itemId, writeConfig } from '../lib.mjs';

const N = envInt('BENCH_ITEMS', 50_000);
const root = mkdtempSync(path.join(os.tmpdir(), 'cronsafe-alloc-'));
const session = new Session();
session.connect();
try {
  mkdirSync(path.join(root, 'src'), { recursive: true });
  const config = loadConfig(writeConfig(root, { source: path.join(root, 'src') }));
  const ledger = await openSqliteLedger(config.state.sqlite, { writeBehind: true });
  const never = new AbortController().signal;
  async function* synthetic(n) { for (let i = 0; i < n; i++) yield { id: itemId(i) }; }
  await session.post('HeapProfiler.startSampling', { samplingInterval: 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  await runPass({ config, ledger, handler: { run: async () => {} }, log: createLogger({ level: 'silent', format: 'json' }), runId: 'p1', owner: `p:${process.pid}:p1`, stop: never, force: never, source: synthetic(N) });
  const { profile } = await session.post('HeapProfiler.stopSampling');
  await ledger.close();
  const by = new Map();
  let total = 0;
  const walk = (n) => {
    const cf = n.callFrame;
    const key = `${cf.functionName || '(anon)'} ${cf.url.replace(/.*\/(dist|node_modules|bench)\//, '$1/')}:${cf.lineNumber + 1}`;
    if (n.selfSize) { by.set(key, (by.get(key) ?? 0) + n.selfSize); total += n.selfSize; }
    for (const c of n.children ?? []) walk(c);
  };
  walk(profile.head);
  console.log(`sampled ${(total / 1e6).toFixed(1)} MB = ${((total / N) / 1024).toFixed(1)} KiB per item`);
  for (const [k, v] of [...by].sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log(`${((v / total) * 100).toFixed(1).padStart(5)}% ${k}`);
} finally { session.disconnect(); rmSync(root, { recursive: true, force: true }); }
