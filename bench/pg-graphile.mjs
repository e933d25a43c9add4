// cronsafe on PostgreSQL beside graphile-worker 0.17.3 and a bare `pg` floor, on ONE
// throwaway PostgreSQL with stock settings and fsync ON (commits cost a real flush), in one
// run: the same item count, a no-op task, concurrency 8.
//   - graphile-worker: one process, jobs enqueued with addJobs, stock worker settings;
//     run first and again last, because the shared machine's load moves during the run;
//   - cronsafe: P = 1, 2, 4 `cronsafe run` processes of one run group over a directory of
//     empty files (module no-op handler, concurrency 8, every other key at its default);
//   - floor: one connection claiming 50 rows with SKIP LOCKED and completing them with one
//     fenced UPDATE, no runner around it.
// Prints a table with the ratio cronsafe / graphile-worker and writes
// bench/results-pg-graphile.json. Env: BENCH_GRAPHILE_ITEMS (default 20000; BENCH_QUICK=1:
// 2000), BENCH_GRAPHILE_PROCESSES (default 1,2,4), BENCH_GRAPHILE_CONCURRENCY (default 8,
// both systems). See docs/benchmarks.md.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BENCH_DIR, envInt, environment, fmtInt, fmtSec, loadavg, makeTree, table } from './lib.mjs';
import { havePostgres, measureCronsafe, startServer, writePgConfig } from './pg-lib.mjs';
import { run } from './rss.mjs';

const QUICK = process.env.BENCH_QUICK === '1';
const ITEMS = envInt('BENCH_GRAPHILE_ITEMS', QUICK ? 2_000 : 20_000);
const PROCESSES = (process.env.BENCH_GRAPHILE_PROCESSES ?? '1,2,4').split(',').map((v) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`BENCH_GRAPHILE_PROCESSES: expected positive integers separated by commas, got ${JSON.stringify(v)}`);
  return n;
});
const CONCURRENCY = envInt('BENCH_GRAPHILE_CONCURRENCY', 8);
const FLOOR_BATCH = 50;
const log = (msg) => process.stderr.write(`[bench:pg-graphile] ${msg}\n`);

if (!havePostgres()) {
  log('skipped: no PostgreSQL under /usr/lib/postgresql (run .ci/setup-postgres.sh)');
  process.exit(0);
}

/** Run a bench/graphile child; its BENCH_RESULT line, plus the wall time from spawn to exit. */
async function child(script, args) {
  const t0 = performance.now();
  const r = await run([process.execPath, path.join(BENCH_DIR, 'graphile', script), ...args], 900_000);
  const wallMs = performance.now() - t0;
  const line = r.stdout.split('\n').find((l) => l.startsWith('BENCH_RESULT='));
  if (r.code !== 0 || !line) throw new Error(`${script} failed (exit ${r.code ?? r.signal})\n${r.stderr.slice(-3000)}`);
  return { wallMs, ...JSON.parse(line.slice('BENCH_RESULT='.length)) };
}

async function graphile(server, label) {
  log(`graphile-worker ${label}: ${fmtInt(ITEMS)} jobs, concurrency ${CONCURRENCY} ...`);
  const r = await child('graphile-worker.mjs', [server.database(`gw_${label}`), String(ITEMS), String(CONCURRENCY)]);
  return { system: `graphile-worker 0.17.3 (${label})`, processes: 1, items: ITEMS, wallMs: r.wallMs, passMs: r.processMs, detail: r };
}

const env = environment();
const root = mkdtempSync(path.join(os.tmpdir(), 'cronsafe-bench-cmp-'));
log('starting PostgreSQL (stock settings, fsync on) ...');
const server = await startServer(['fsync=on']);
try {
  const settings = Object.fromEntries(
    server
      .psql(`SELECT name || '=' || setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', 'wal_sync_method', 'shared_buffers')`)
      .split('\n')
      .map((l) => l.split('=')),
  );
  const src = path.join(root, 'src');
  log(`creating ${fmtInt(ITEMS)} empty files ...`);
  makeTree(src, ITEMS);

  const results = [];
  results.push(await graphile(server, 'first'));
  for (const p of PROCESSES) {
    const url = server.database(`cronsafe_${p}`);
    const configFile = writePgConfig(root, src, { postgres: url, schema: `cmp_${p}` }, { extra: [`concurrency: ${CONCURRENCY}`] });
    log(`cronsafe, ${p} process(es) ...`);
    const r = await measureCronsafe(configFile, p, `cmp-${p}`, ITEMS);
    results.push({ system: 'cronsafe', ...r });
  }
  log(`floor: one connection, claims of ${FLOOR_BATCH} ...`);
  const floor = await child('floor.mjs', [server.database('floor'), String(ITEMS), String(FLOOR_BATCH)]);
  results.push({ system: `floor: pg loop, SKIP LOCKED claims of ${FLOOR_BATCH}, fenced complete`, processes: 1, items: ITEMS, wallMs: floor.wallMs, passMs: floor.ms, detail: floor });
  results.push(await graphile(server, 'last'));

  const gw = results.filter((r) => r.system.startsWith('graphile-worker'));
  const gwRate = gw.reduce((s, r) => s + (r.items * 1000) / r.passMs, 0) / gw.length;
  const gwWallRate = gw.reduce((s, r) => s + (r.items * 1000) / r.wallMs, 0) / gw.length;
  const rows = results.map((r) => {
    const pass = (r.items * 1000) / r.passMs;
    const wall = (r.items * 1000) / r.wallMs;
    return [
      r.system,
      String(r.processes),
      fmtInt(r.items),
      fmtSec(r.wallMs),
      fmtInt(wall),
      fmtSec(r.passMs),
      fmtInt(pass),
      `${(pass / gwRate).toFixed(2)}x / ${(wall / gwWallRate).toFixed(2)}x`,
      r.perProcess ? r.perProcess.map(fmtInt).join(' / ') : '',
    ];
  });
  const out = [
    '',
    `cronsafe vs graphile-worker on PostgreSQL  ${env.date}${QUICK ? '  (QUICK)' : ''}`,
    `node ${env.node} | ${env.cpu} | ${env.cores} cores | PostgreSQL ${server.version}, same machine, loopback, ${Object.entries(settings).map(([k, v]) => `${k}=${v}`).join(' ')}`,
    `load average at start ${env.loadavg.join(' ')}, at end ${loadavg().join(' ')}; no-op task, concurrency ${CONCURRENCY}`,
    'wall: spawn to exit (start-up, migrations, enqueue/scan included); pass: cronsafe first `run started` to last `run finished`,',
    'graphile-worker run() to last job success (enqueue excluded), floor its loop; ratio = this row / mean of the graphile-worker rows (pass / wall)',
    '',
    table(['system', 'processes', 'items', 'wall', 'items/s', 'pass / processing', 'items/s', 'vs graphile (pass / wall)', 'items per process'], rows),
    '',
  ];
  process.stdout.write(`${out.join('\n')}\n`);
  writeFileSync(
    path.join(BENCH_DIR, 'results-pg-graphile.json'),
    `${JSON.stringify({ environment: { ...env, loadavgAfter: loadavg() }, postgres: server.version, settings, quick: QUICK, graphileMeanPerSec: gwRate, results }, null, 2)}\n`,
  );
  log(`wrote ${path.join(BENCH_DIR, 'results-pg-graphile.json')}`);
} finally {
  server.stop();
  rmSync(root, { recursive: true, force: true });
}
