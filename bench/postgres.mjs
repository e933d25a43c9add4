// PostgreSQL no-op throughput: P `cronsafe run` processes (P = 1, 2, 4) sharing one pass
// over a directory of empty files, on a real PostgreSQL started here (.ci/start-postgres.sh,
// loopback, fsync off) and stopped by pid at the end; plus the same backlog on SQLite with
// one process, for comparison. Prints a table and writes bench/results-postgres.json.
// Env: BENCH_PG_ITEMS (default 20000). Called by bench/run.mjs when PostgreSQL is installed.
// See docs/benchmarks.md and docs/postgres.md.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { BENCH_DIR, NOOP_MODULE, ROOT, envInt, environment, fmtInt, fmtSec, loadavg, makeTree, table, CLI } from './lib.mjs';
import { binNodeFlags, run } from './rss.mjs';

const ITEMS = envInt('BENCH_PG_ITEMS', 20_000);
// The case parallelism is for: a handler that waits (I/O, a remote service), 20 ms per item.
const SLOW_ITEMS = envInt('BENCH_PG_SLOW_ITEMS', 4_000);
const SLOW_MS = 20;
const PROCESSES = [1, 2, 4];
const log = (msg) => process.stderr.write(`[bench:postgres] ${msg}\n`);

const pgRoot = '/usr/lib/postgresql';
if (!existsSync(pgRoot) || !readdirSync(pgRoot).some((v) => existsSync(path.join(pgRoot, v, 'bin', 'initdb')))) {
  log('skipped: no PostgreSQL under /usr/lib/postgresql (run .ci/setup-postgres.sh)');
  process.exit(0);
}

const freePort = () =>
  new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

function writeConfig(root, src, state, handler = NOOP_MODULE) {
  const file = path.join(root, `cronsafe-${Object.values(state)[1] ?? 'sqlite'}.yaml`);
  const lines = ['name: bench', 'source:', `  directory: ${JSON.stringify(src)}`, 'handler:', `  module: ${JSON.stringify(handler)}`, 'state:'];
  for (const [k, v] of Object.entries(state)) lines.push(`  ${k}: ${JSON.stringify(v)}`);
  lines.push('concurrency: 8', 'queueSize: 256', 'log:', '  level: info', '');
  writeFileSync(file, lines.join('\n'));
  return file;
}

/** P processes of one run group over `items` files; wall time from the first spawn to the last exit. */
async function measure(configFile, processes, group, items = ITEMS) {
  const argv = [process.execPath, ...binNodeFlags(), CLI, 'run', '-c', configFile];
  process.env.CRONSAFE_RUN_GROUP = group;
  const t0 = performance.now();
  const runs = await Promise.all(Array.from({ length: processes }, () => run(argv, 600_000)));
  const wallMs = performance.now() - t0;
  const logs = runs.map((r, i) => {
    if (r.code !== 0) throw new Error(`process ${i} exited ${r.code ?? r.signal}\n${r.stderr.slice(-2000)}`);
    return r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
  });
  const finished = logs.map((lines) => lines.find((l) => l.msg === 'run finished'));
  // The pass itself, without process start-up: first 'run started' to last 'run finished'.
  const at = (msg, pick) => pick(...logs.map((lines) => Date.parse(lines.find((l) => l.msg === msg)?.time)));
  const passMs = at('run finished', Math.max) - at('run started', Math.min);
  const done = finished.reduce((n, f) => n + (f?.counts?.succeeded ?? 0), 0);
  if (done !== items) throw new Error(`expected ${items} items done across ${processes} process(es), got ${done}`);
  // Each process's `items` is a snapshot at its own end; ask the ledger once all are gone.
  const status = JSON.parse(execFileSync(process.execPath, [CLI, 'status', '-c', configFile, '--json'], { encoding: 'utf8' }));
  if (status.items.done !== items) throw new Error(`ledger says ${JSON.stringify(status.items)}`);
  return {
    processes,
    wallMs,
    items,
    itemsPerSec: (items * 1000) / wallMs,
    passMs,
    passItemsPerSec: (items * 1000) / passMs,
    perProcess: finished.map((f) => f.counts.succeeded),
  };
}

const env = environment();
const root = mkdtempSync(path.join(os.tmpdir(), 'cronsafe-bench-pg-'));
// Its own temp dir: the server runs as `postgres` when we are root and must reach it.
const pgDir = mkdtempSync(path.join(os.tmpdir(), 'cronsafe-bench-pgdata-'));
const startScript = path.join(ROOT, '.ci', 'start-postgres.sh');
let url;
try {
  const port = await freePort();
  log(`starting PostgreSQL on 127.0.0.1:${port} ...`);
  url = execFileSync('bash', [startScript, 'start', pgDir, String(port)], { encoding: 'utf8' }).trim();
  const version = execFileSync('psql', [url, '-Atc', 'SHOW server_version'], { encoding: 'utf8' }).trim();
  const src = path.join(root, 'src');
  log(`creating ${fmtInt(ITEMS)} empty files ...`);
  makeTree(src, ITEMS);

  const results = [];
  const sqliteFile = writeConfig(root, src, { sqlite: path.join(root, 'state', 'cronsafe.db') });
  log('SQLite, 1 process ...');
  results.push({ store: 'SQLite', ...(await measure(sqliteFile, 1, 'sqlite')) });
  for (const p of PROCESSES) {
    // A fresh schema per measurement: every item is new, a first pass each time.
    const configFile = writeConfig(root, src, { postgres: url, schema: `bench_${p}` });
    log(`PostgreSQL, ${p} process(es) ...`);
    results.push({ store: 'PostgreSQL', ...(await measure(configFile, p, `bench-${p}`)) });
  }
  const slowSrc = path.join(root, 'slow-src');
  makeTree(slowSrc, SLOW_ITEMS);
  const slowHandler = path.join(root, 'sleep-handler.mjs');
  writeFileSync(slowHandler, `export default async function sleep() { await new Promise((r) => setTimeout(r, ${SLOW_MS})); }\n`);
  for (const p of PROCESSES) {
    const configFile = writeConfig(root, slowSrc, { postgres: url, schema: `bench_slow_${p}` }, slowHandler);
    log(`PostgreSQL, ${p} process(es), ${SLOW_MS} ms handler ...`);
    results.push({ store: `PostgreSQL, ${SLOW_MS} ms handler`, ...(await measure(configFile, p, `slow-${p}`, SLOW_ITEMS)) });
  }

  const rows = results.map((r) => [
    r.store,
    String(r.processes),
    fmtInt(r.items),
    fmtSec(r.wallMs),
    fmtInt(r.itemsPerSec),
    fmtSec(r.passMs),
    fmtInt(r.passItemsPerSec),
    r.perProcess.map(fmtInt).join(' / '),
  ]);
  const out = [
    '',
    `cronsafe PostgreSQL bench  ${env.date}`,
    `node ${env.node} | ${env.cpu} | ${env.cores} cores | PostgreSQL ${version} on the same machine (loopback, fsync off)`,
    `load average at start ${env.loadavg.join(' ')}, at end ${loadavg().join(' ')}; concurrency 8, queueSize 256 per process; no-op module handler unless noted`,
    '',
    table(['ledger', 'processes', 'items', 'wall (spawn to last exit)', 'items/s', 'pass (first start to last finish)', 'items/s', 'items per process'], rows),
    '',
  ];
  process.stdout.write(`${out.join('\n')}\n`);
  writeFileSync(path.join(BENCH_DIR, 'results-postgres.json'), `${JSON.stringify({ environment: env, postgres: version, results }, null, 2)}\n`);
  log(`wrote ${path.join(BENCH_DIR, 'results-postgres.json')}`);
} finally {
  spawnSync('bash', [startScript, 'stop', pgDir], { stdio: 'ignore' });
  rmSync(root, { recursive: true, force: true });
}
