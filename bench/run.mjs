// `npm run bench`: no-op throughput (in-process, one core) and peak RSS of the CLI for a
// small and a large backlog. Prints a table and writes bench/results.json.
// Env: BENCH_ITEMS (default 100000), BENCH_SMALL (default 1000), BENCH_BIG (default 1000000),
// BENCH_MID (extra RSS sizes, comma-separated; default none).
// See docs/benchmarks.md.
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { BENCH_DIR, envInt, loadavg, environment, fmtInt, fmtMiB, fmtSec, table, which } from './lib.mjs';
import { measureRss, run } from './rss.mjs';

const ITEMS = envInt('BENCH_ITEMS', 100_000);
const SMALL = envInt('BENCH_SMALL', 1_000);
const BIG = envInt('BENCH_BIG', 1_000_000);
// Optional extra backlog sizes for the RSS curve, e.g. BENCH_MID=20000,100000 (default: none).
const MID = (process.env.BENCH_MID ?? '').split(',').filter(Boolean).map((v) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`BENCH_MID: expected positive integers separated by commas, got ${JSON.stringify(v)}`);
  return n;
});
const TARGET_RATE = 30_000;
const TARGET_RSS_RATIO = 1.3;

const log = (msg) => process.stderr.write(`[bench] ${msg}\n`);
const taskset = which('/usr/bin/taskset', '/bin/taskset');
const gnuTime = which('/usr/bin/time');

const env = environment();
log(`node ${env.node}, ${env.cpu}, ${env.cores} cores, ${env.date}`);

// 1. In-process throughput, pinned to core 0 (the child reports the cores it may use).
log(`throughput: ${fmtInt(ITEMS)} items, ${taskset ? 'pinned with taskset -c 0' : 'NOT pinned (no taskset)'} ...`);
const tpArgv = [process.execPath, path.join(BENCH_DIR, 'throughput.mjs')];
const tpRun = await run(taskset ? [taskset, '-c', '0', ...tpArgv] : tpArgv, 60_000 + ITEMS * 5);
const tpLine = tpRun.stdout.split('\n').find((l) => l.startsWith('BENCH_RESULT='));
if (tpRun.code !== 0 || !tpLine) {
  process.stderr.write(tpRun.stdout + tpRun.stderr);
  throw new Error(`throughput child failed (exit ${tpRun.code ?? tpRun.signal})`);
}
const tp = JSON.parse(tpLine.slice('BENCH_RESULT='.length));
tp.pinned = !!taskset && tp.cores === 1;
log(`throughput: done (child saw ${tp.cores} core(s))`);

// 2. Peak RSS of the real CLI, small vs big backlog (also pinned, to leave a core free).
const rssOpts = { taskset, gnuTime, log };
const small = await measureRss(SMALL, rssOpts);
const mid = [];
for (const n of MID) mid.push(await measureRss(n, rssOpts));
const big = await measureRss(BIG, rssOpts);
const ratio = big.maxRssKiB / small.maxRssKiB;
const loadAfter = loadavg();

const rows = [
  ['(a) runPass, synthetic source, 1st pass', fmtInt(ITEMS), fmtSec(tp.synthetic.ms), fmtInt(tp.synthetic.itemsPerSec), 'ledger + runner only'],
  ['(b) runPass, directory scan, 1st pass', fmtInt(ITEMS), fmtSec(tp.directory.ms), fmtInt(tp.directory.itemsPerSec), `default scanner; files made in ${fmtSec(tp.createFilesMs)}`],
  ['(c) 2nd pass, all done, synthetic', fmtInt(ITEMS), fmtSec(tp.syntheticRepeat.ms), fmtInt(tp.syntheticRepeat.itemsPerSec), 'skip cost'],
  ['(c) 2nd pass, all done, directory', fmtInt(ITEMS), fmtSec(tp.directoryRepeat.ms), fmtInt(tp.directoryRepeat.itemsPerSec), 'skip cost incl. scan'],
  ['scan only (scanDirectory, no ledger)', fmtInt(ITEMS), fmtSec(tp.scanOnly.ms), fmtInt(tp.scanOnly.itemsPerSec), 'reference'],
  ...[small, ...mid, big].map((r) => [
    `CLI run, module no-op, ${fmtInt(r.items)} files`,
    fmtInt(r.items),
    fmtSec(r.runDurationMs),
    fmtInt(r.itemsPerSec),
    `peak RSS ${fmtMiB(r.maxRssKiB)}${r.timeMaxRssKiB ? ` (time: ${fmtMiB(r.timeMaxRssKiB)})` : ''}, V8 heap ${r.memPeaksKiB ? fmtMiB(r.memPeaksKiB.heapTotal) : '-'}; files made in ${fmtSec(r.createFilesMs)}`,
  ]),
];

const best = Math.min(tp.synthetic.itemsPerSec, tp.directory.itemsPerSec);
const verdict = (ok) => (ok ? 'OK' : 'MISSED');
const out = [
  '',
  `cronsafe bench  ${env.date}`,
  `node ${env.node} | ${env.platform} | ${env.cpu} | ${env.cores} cores | ${env.memoryGiB} GiB`,
  `load average (1/5/15 min) at start ${env.loadavg.join(' ')}, at end ${loadAfter.join(' ')}`,
  `in-process part: ${tp.pinned ? 'pinned to one core (taskset -c 0)' : 'NOT pinned'}; concurrency ${tp.config.concurrency}, queueSize ${tp.config.queueSize}, log ${tp.config.logLevel}`,
  '',
  table(['measurement', 'items', 'time', 'items/s', 'notes'], rows),
  '',
  `no-op throughput, first pass: min(a, b) = ${fmtInt(best)} items/s (target >= ${fmtInt(TARGET_RATE)}): ${verdict(best >= TARGET_RATE)}`,
  `peak RSS ${fmtInt(BIG)} / ${fmtInt(SMALL)} items = ${fmtMiB(big.maxRssKiB)} / ${fmtMiB(small.maxRssKiB)} = ${ratio.toFixed(2)} (target < ${TARGET_RSS_RATIO}): ${verdict(ratio < TARGET_RSS_RATIO)}`,
  '',
];
process.stdout.write(`${out.join('\n')}\n`);

const results = { environment: { ...env, loadavgAfter: loadAfter }, throughput: tp, rss: { small, mid, big, ratio }, targets: { rate: TARGET_RATE, rssRatio: TARGET_RSS_RATIO } };
writeFileSync(path.join(BENCH_DIR, 'results.json'), `${JSON.stringify(results, null, 2)}\n`);
log(`wrote ${path.join(BENCH_DIR, 'results.json')}`);

// 3. PostgreSQL: 1, 2 and 4 processes on one ledger, beside SQLite (bench/postgres.mjs starts
// its own server; skipped when PostgreSQL is not installed). Its own table and results file.
const pgRoot = '/usr/lib/postgresql';
if (existsSync(pgRoot) && readdirSync(pgRoot).some((v) => existsSync(path.join(pgRoot, v, 'bin', 'initdb')))) {
  const pg = await run([process.execPath, path.join(BENCH_DIR, 'postgres.mjs')], 1_800_000);
  process.stderr.write(pg.stderr);
  process.stdout.write(pg.stdout);
  if (pg.code !== 0) throw new Error(`bench/postgres.mjs failed (exit ${pg.code ?? pg.signal})`);
} else {
  log('postgres: skipped (no PostgreSQL under /usr/lib/postgresql; .ci/setup-postgres.sh installs it)');
}
