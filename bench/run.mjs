// `npm run bench`: every measurement of docs/benchmarks.md, side by side in one run, with
// the load average; prints one table per section and writes bench/results.json.
//
// Sections (all by default; pick some with arguments or BENCH_SECTIONS=a,b):
//   startup   start-up wall of --version, validate, schedule --json, a lock-skipped run, vs node -e 0
//   compare   no-op throughput of the CLI vs seed 000's runner and seed 002's ledger worker
//   versus    this CLI against another build's (BENCH_BASELINE_CLI=<other checkout>/dist/cli.js),
//             interleaved rounds over the same files (bench/versus.mjs); skipped when unset
//   command   handler.command ["true"] vs a bare Node loop spawning `true`
//   rss       peak RSS, small vs big backlog, with the bin's flags and with plain node
//   inprocess runPass in process, pinned to one core (the runner's ceiling)
//   deadletters  peak RSS of `dead-letter list` / `status` over 1,000 to 200,000 dead items (bench/dead-letters.mjs)
//   retention a pass with 1,000,000 done items whose files are gone and 1,000 new ones,
//             before and after retention forgets them (bench/retention.mjs)
//   postgres  1, 2, 4 processes on PostgreSQL (when installed; bench/postgres.mjs)
//   graphile  cronsafe on PostgreSQL (fsync on) beside graphile-worker and a bare pg floor
//             (when installed; bench/pg-graphile.mjs)
// BENCH_QUICK=1: smaller sizes, no postgres/graphile unless named: a few minutes. Sizes: see SIZES.
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { BENCH_DIR, envInt, environment, fmtInt, fmtMiB, fmtRatio, fmtSec, loadavg, table, which } from './lib.mjs';
import { measureCommand } from './command.mjs';
import { measureCompare } from './compare.mjs';
import { measureVersus } from './versus.mjs';
import { measureRss, run } from './rss.mjs';
import { measureStartup } from './startup.mjs';

const ALL = ['startup', 'compare', 'versus', 'command', 'rss', 'inprocess', 'deadletters', 'retention', 'postgres', 'graphile'];
const quick = process.env.BENCH_QUICK === '1';
const asked = [...process.argv.slice(2), ...(process.env.BENCH_SECTIONS ?? '').split(',')].filter(Boolean);
for (const s of asked) if (!ALL.includes(s)) throw new Error(`unknown bench section ${JSON.stringify(s)}: expected some of ${ALL.join(', ')}`);
const sections = asked.length > 0 ? asked : ALL.filter((s) => !(quick && (s === 'postgres' || s === 'graphile')));

const SIZES = {
  startupRuns: envInt('BENCH_STARTUP_RUNS', 5),
  compareItems: envInt('BENCH_CMP_ITEMS', quick ? 20_000 : 100_000),
  seed002Items: envInt('BENCH_SEED002_ITEMS', quick ? 2_000 : 20_000),
  commandItems: envInt('BENCH_CMD_ITEMS', quick ? 1_000 : 5_000),
  small: envInt('BENCH_SMALL', 1_000),
  big: envInt('BENCH_BIG', quick ? 100_000 : 1_000_000),
  inprocessItems: envInt('BENCH_ITEMS', quick ? 20_000 : 100_000),
};
const TARGETS = { startupMs: 200, startupOverNodeMs: 100, seed000: 3, seed002: 50, command: 0.8, rssRatio: 1.2, inprocess: 30_000 };

const log = (msg) => process.stderr.write(`[bench] ${msg}\n`);
const verdict = (ok) => (ok ? 'OK' : 'MISSED');
const taskset = which('/usr/bin/taskset', '/bin/taskset');
const gnuTime = which('/usr/bin/time');
const env = environment();
const results = { environment: env, quick, sizes: SIZES, targets: TARGETS, sections: {} };
const report = [
  '',
  `cronsafe bench  ${env.date}${quick ? '  (quick mode: smaller sizes)' : ''}`,
  `node ${env.node} | ${env.platform} | ${env.cpu} | ${env.cores} cores | ${env.memoryGiB} GiB`,
  `load average (1/5/15 min) at start ${env.loadavg.join(' ')}; shared machine: compare figures from one run only`,
];
const section = (name, lines) => {
  report.push('', `## ${name}  (load average at its end: ${loadavg().join(' ')})`, '', ...lines);
};
log(`node ${env.node}, ${env.cores} cores, sections: ${sections.join(', ')}`);

if (sections.includes('startup')) {
  const r = await measureStartup({ runs: SIZES.startupRuns, log });
  const node = r.results.find((x) => x.name === 'node -e 0').medianMs;
  const limit = Math.max(TARGETS.startupMs, node + TARGETS.startupOverNodeMs);
  const rows = r.results.map((x) => [x.name, fmtSec(x.medianMs), x.cpuMs === null ? '-' : fmtSec(x.cpuMs), x.name === 'node -e 0' ? '' : verdict(x.medianMs <= limit)]);
  results.sections.startup = { ...r, limitMs: limit };
  section(`start-up, median of ${r.runs} (node ${r.nodeFlags.join(' ')})`, [
    table(['command', 'wall', 'CPU (user+sys)', `<= ${fmtSec(limit)}`], rows),
    '',
    `target: each at most ${fmtSec(TARGETS.startupMs)} wall, or node's own start-up + ${fmtSec(TARGETS.startupOverNodeMs)} (= ${fmtSec(limit)} here)`,
  ]);
}

if (sections.includes('compare')) {
  const r = await measureCompare({ items: SIZES.compareItems, seed002Items: SIZES.seed002Items, log });
  results.sections.compare = r;
  const row = (name, x, note) => [name, fmtInt(x.items), fmtSec(x.wallMs), fmtInt(x.itemsPerSec), fmtMiB(x.maxRssKiB), note];
  const rows = [row('cronsafe run (module no-op, concurrency 8, start-up included)', r.cronsafe, `pass ${fmtSec(r.cronsafe.passMs)}`)];
  if (r.seed000) rows.push(row('seed 000 runner (asyncio, .done marker per item, no ledger)', r.seed000, ''));
  if (r.seed002) rows.push(row('seed 002 ledger worker (sqlite3, a transaction per transition)', r.seed002, 'worker.py only'));
  const lines = [table(['runner', 'items', 'wall', 'items/s', 'peak RSS', 'notes'], rows), ''];
  if (r.seed000) {
    lines.push(`cronsafe / seed 000 = ${fmtRatio(r.ratioSeed000)} (target >= ${TARGETS.seed000}x): ${verdict(r.ratioSeed000 >= TARGETS.seed000)}`);
    lines.push(`cronsafe / seed 002 = ${fmtRatio(r.ratioSeed002)} (target >= ${TARGETS.seed002}x): ${verdict(r.ratioSeed002 >= TARGETS.seed002)}`);
  } else {
    lines.push('seeds skipped: no seed-runners folder (set BENCH_SEED_RUNNERS)');
  }
  section(`no-op throughput: the CLI against the seeds (same ${fmtInt(r.items)} .scc files)`, lines);
}

if (sections.includes('versus') && process.env.BENCH_BASELINE_CLI) {
  const r = await measureVersus({ baseline: process.env.BENCH_BASELINE_CLI, log });
  results.sections.versus = r;
  const row = (name, x) => [name, fmtInt(r.items), fmtSec(x.medianPassMs), fmtInt(x.medianItemsPerSec), x.medianCpuMs === null ? '-' : fmtSec(x.medianCpuMs)];
  section(`this build against ${r.baselineCli}, ${r.rounds} interleaved rounds`, [
    table(['build', 'items', 'pass (median)', 'items/s', 'CPU (median)'], [row('this build', r.current), row('baseline', r.baseline)]),
    '',
    `this / baseline: ${fmtRatio(r.passRatio)} by pass time, ${r.cpuRatio === null ? '-' : fmtRatio(r.cpuRatio)} by CPU (> 1: this build is faster)`,
  ]);
}

if (sections.includes('command')) {
  const r = await measureCommand({ items: SIZES.commandItems, log });
  results.sections.command = r;
  section(`command handler: ["true"] x ${fmtInt(r.items)}, concurrency ${r.concurrency}`, [
    table(
      ['runner', 'items', 'wall', 'items/s'],
      [
        ['cronsafe run, handler.command ["true"]', fmtInt(r.items), fmtSec(r.cronsafe.wallMs), fmtInt(r.cronsafe.itemsPerSec)],
        ['bare Node loop spawning true (bench/fixtures/spawn-loop.mjs)', fmtInt(r.items), fmtSec(r.bare.wallMs), fmtInt(r.bare.itemsPerSec)],
        ['the same, own process group + stdout/stderr piped (spawn-loop.mjs --capture)', fmtInt(r.items), fmtSec(r.capture.wallMs), fmtInt(r.capture.itemsPerSec)],
      ],
    ),
    '',
    `cronsafe / bare loop = ${fmtRatio(r.ratio)} (target >= ${TARGETS.command}x): ${verdict(r.ratio >= TARGETS.command)}`,
    `cronsafe / bare loop with capture = ${fmtRatio(r.ratioCapture)} (what is left to cronsafe's own per-item work)`,
  ]);
}

if (sections.includes('rss')) {
  const opts = { taskset, gnuTime, log };
  const mid = (process.env.BENCH_MID ?? '').split(',').filter(Boolean).map(Number);
  const sizes = [SIZES.small, ...mid, SIZES.big];
  const measured = [];
  for (const n of sizes) measured.push(await measureRss(n, opts));
  const small = measured[0];
  const big = measured.at(-1);
  const rows = [];
  const lines = [];
  const ratios = {};
  for (const variant of Object.keys(small.runs)) {
    for (const m of measured) {
      const x = m.runs[variant];
      rows.push([
        `node ${x.nodeFlags.join(' ') || '(no flags)'} dist/cli.js run`,
        fmtInt(m.items),
        fmtSec(x.runDurationMs),
        fmtInt(x.itemsPerSec),
        `${fmtMiB(x.maxRssKiB)}${x.timeMaxRssKiB ? ` (time: ${fmtMiB(x.timeMaxRssKiB)})` : ''}`,
        x.memPeaksKiB ? fmtMiB(x.memPeaksKiB.heapTotal) : '-',
      ]);
    }
    ratios[variant] = big.runs[variant].maxRssKiB / small.runs[variant].maxRssKiB;
    lines.push(`${variant}: peak RSS ${fmtInt(big.items)} / ${fmtInt(small.items)} items = ${fmtRatio(ratios[variant])} (target <= ${TARGETS.rssRatio}x): ${verdict(ratios[variant] <= TARGETS.rssRatio)}`);
  }
  results.sections.rss = { measured, ratios };
  section(`peak RSS, module no-op${taskset ? ', pinned to core 0' : ''}`, [
    table(['command', 'items', 'pass', 'items/s', 'peak RSS', 'V8 heap'], rows),
    '',
    ...lines,
    `files made in ${measured.map((m) => `${fmtSec(m.createFilesMs)} (${fmtInt(m.items)})`).join(', ')}`,
  ]);
}

if (sections.includes('inprocess')) {
  log(`inprocess: ${fmtInt(SIZES.inprocessItems)} items, ${taskset ? 'pinned with taskset -c 0' : 'NOT pinned (no taskset)'} ...`);
  const argv = [process.execPath, path.join(BENCH_DIR, 'throughput.mjs')];
  const r = await run(taskset ? [taskset, '-c', '0', ...argv] : argv, 60_000 + SIZES.inprocessItems * 5, { env: { ...process.env, BENCH_ITEMS: String(SIZES.inprocessItems) } });
  const line = r.stdout.split('\n').find((l) => l.startsWith('BENCH_RESULT='));
  if (r.code !== 0 || !line) {
    process.stderr.write(r.stdout + r.stderr);
    throw new Error(`throughput child failed (exit ${r.code ?? r.signal})`);
  }
  const tp = JSON.parse(line.slice('BENCH_RESULT='.length));
  tp.pinned = !!taskset && tp.cores === 1;
  results.sections.inprocess = tp;
  const n = fmtInt(tp.items);
  const best = Math.min(tp.synthetic.itemsPerSec, tp.directory.itemsPerSec);
  section(`runPass in process (${tp.pinned ? 'one core' : 'NOT pinned'}; concurrency ${tp.config.concurrency}, queueSize ${tp.config.queueSize}, log ${tp.config.logLevel})`, [
    table(
      ['measurement', 'items', 'time', 'items/s', 'notes'],
      [
        ['(a) synthetic source, 1st pass', n, fmtSec(tp.synthetic.ms), fmtInt(tp.synthetic.itemsPerSec), 'ledger + runner only'],
        ['(b) directory scan, 1st pass', n, fmtSec(tp.directory.ms), fmtInt(tp.directory.itemsPerSec), `files made in ${fmtSec(tp.createFilesMs)}`],
        ['(c) 2nd pass, all done, synthetic', n, fmtSec(tp.syntheticRepeat.ms), fmtInt(tp.syntheticRepeat.itemsPerSec), 'skip cost'],
        ['(c) 2nd pass, all done, directory', n, fmtSec(tp.directoryRepeat.ms), fmtInt(tp.directoryRepeat.itemsPerSec), 'skip cost incl. scan'],
        ['scan only (scanDirectory, no ledger)', n, fmtSec(tp.scanOnly.ms), fmtInt(tp.scanOnly.itemsPerSec), 'reference'],
      ],
    ),
    '',
    `min(a, b) = ${fmtInt(best)} items/s (target >= ${fmtInt(TARGETS.inprocess)}): ${verdict(best >= TARGETS.inprocess)}`,
  ]);
}

results.environment.loadavgAfter = loadavg();
report.push('', `load average at end ${results.environment.loadavgAfter.join(' ')}`, '');
process.stdout.write(`${report.join('\n')}\n`);
writeFileSync(path.join(BENCH_DIR, 'results.json'), `${JSON.stringify(results, null, 2)}\n`);
log(`wrote ${path.join(BENCH_DIR, 'results.json')}`);

// Dead letters (issue 12): its own script and table; quick mode takes smaller ledgers.
if (sections.includes('deadletters')) {
  const dead = await run([process.execPath, path.join(BENCH_DIR, 'dead-letters.mjs')], 1_800_000, { env: {
    ...process.env,
    BENCH_DEAD: process.env.BENCH_DEAD ?? (quick ? '1000,10000,20000' : '1000,100000,200000'),
  } });
  process.stderr.write(dead.stderr);
  process.stdout.write(`\n## dead-letter list / status: peak RSS with many dead items\n\n${dead.stdout}`);
  if (dead.code !== 0) throw new Error(`bench/dead-letters.mjs failed (exit ${dead.code ?? dead.signal})`);
}

if (sections.includes('retention')) {
  const ret = await run([process.execPath, path.join(BENCH_DIR, 'retention.mjs')], 1_800_000, { env: {
    ...process.env,
    BENCH_RETENTION_ITEMS: process.env.BENCH_RETENTION_ITEMS ?? (quick ? '100000' : '1000000'),
  } });
  process.stderr.write(ret.stderr);
  process.stdout.write(`\n## retention: a pass over 1,000 new files beside many done items whose files are gone\n\n${ret.stdout}`);
  if (ret.code !== 0) throw new Error(`bench/retention.mjs failed (exit ${ret.code ?? ret.signal})`);
}

// PostgreSQL: each its own server, table and results file (bench/postgres.mjs, bench/pg-graphile.mjs).
const pgRoot = '/usr/lib/postgresql';
const havePg = existsSync(pgRoot) && readdirSync(pgRoot).some((v) => existsSync(path.join(pgRoot, v, 'bin', 'initdb')));
for (const [name, script] of [['postgres', 'postgres.mjs'], ['graphile', 'pg-graphile.mjs']]) {
  if (!sections.includes(name)) continue;
  if (!havePg) {
    log(`${name}: skipped (no PostgreSQL under /usr/lib/postgresql; .ci/setup-postgres.sh installs it)`);
    continue;
  }
  const pg = await run([process.execPath, path.join(BENCH_DIR, script)], 1_800_000);
  process.stderr.write(pg.stderr);
  process.stdout.write(pg.stdout);
  if (pg.code !== 0) throw new Error(`bench/${script} failed (exit ${pg.code ?? pg.signal})`);
}
