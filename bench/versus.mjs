// This build's `cronsafe run` against another build's (BENCH_BASELINE_CLI: the dist/cli.js of
// another checkout, e.g. the commit before a change), over the same 100,000 empty files,
// interleaved round by round so both see the same drift of a shared machine's load.
// Issue 9 asked that claiming at the handler slot cost no throughput: this is how that is
// checked (docs/benchmarks.md). Each run: a fresh ledger, module no-op handler, concurrency
// 8, the bin's node flags. Reports the median and best wall and CPU of each, and the ratios.
//
//   git worktree add /tmp/pre9 8d8f7ec && (cd /tmp/pre9 && ln -s "$PWD/node_modules" . && npm run build)
//   BENCH_BASELINE_CLI=/tmp/pre9/dist/cli.js node bench/versus.mjs
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CLI, envInt, makeFlatTree, median, which, writeConfig } from './lib.mjs';
import { binNodeFlags, run } from './rss.mjs';

const gnuTime = which('/usr/bin/time');

/** One `cronsafe run` of `cli` over `dir` with a fresh ledger: its pass, wall and CPU. */
async function once(cli, root, dir, n, name) {
  const rmState = () => rmSync(path.join(root, name), { recursive: true, force: true });
  rmState();
  mkdirSync(path.join(root, name));
  const config = writeConfig(path.join(root, name), { source: dir, queueSize: null, level: 'info' });
  const argv = [process.execPath, ...binNodeFlags(), cli, 'run', '-c', config];
  const t0 = performance.now();
  const r = await run(gnuTime ? [gnuTime, '-f', 'BENCH_CPU_S=%U %S', ...argv] : argv, 120_000 + n * 5);
  const wallMs = performance.now() - t0;
  if (r.code !== 0) throw new Error(`${cli} run exited ${r.code ?? r.signal}\n${r.stderr.slice(-2000)}`);
  const finished = r.stdout.split('\n').filter((l) => l.includes('"durationMs"')).map((l) => JSON.parse(l)).pop();
  if (!finished || finished.outcome !== 'completed') throw new Error(`${cli}: no completed run in its output\n${r.stdout.slice(-2000)}`);
  const cpu = /BENCH_CPU_S=([\d.]+) ([\d.]+)/.exec(r.stderr);
  rmState();
  return { wallMs, passMs: finished.durationMs, cpuMs: cpu ? (Number(cpu[1]) + Number(cpu[2])) * 1000 : null };
}

export async function measureVersus({ baseline, items = envInt('BENCH_VS_ITEMS', 100_000), rounds = envInt('BENCH_VS_ROUNDS', 5), log = () => {} }) {
  const root = mkdtempSync(path.join(os.tmpdir(), 'cronsafe-bench-vs-'));
  try {
    const dir = path.join(root, 'queue');
    log(`versus: creating ${items} empty files ...`);
    makeFlatTree(dir, items);
    const sides = { current: { cli: CLI, runs: [] }, baseline: { cli: path.resolve(baseline), runs: [] } };
    for (let i = 0; i < rounds; i++) {
      // Alternate which goes first: the page cache and the load favour neither.
      const order = i % 2 === 0 ? ['current', 'baseline'] : ['baseline', 'current'];
      for (const side of order) {
        const r = await once(sides[side].cli, root, dir, items, side);
        sides[side].runs.push(r);
        log(`versus: round ${i + 1} ${side}: pass ${r.passMs} ms, CPU ${r.cpuMs ?? '-'} ms`);
      }
    }
    const sum = (runs) => {
      const pass = runs.map((r) => r.passMs);
      const cpu = runs.map((r) => r.cpuMs).filter((x) => x !== null);
      return {
        medianPassMs: median(pass),
        bestPassMs: Math.min(...pass),
        medianItemsPerSec: (items * 1000) / median(pass),
        medianCpuMs: cpu.length ? median(cpu) : null,
        bestCpuMs: cpu.length ? Math.min(...cpu) : null,
        runs,
      };
    };
    const current = sum(sides.current.runs);
    const base = sum(sides.baseline.runs);
    return {
      items,
      rounds,
      baselineCli: sides.baseline.cli,
      current,
      baseline: base,
      passRatio: base.medianPassMs / current.medianPassMs,
      cpuRatio: current.medianCpuMs && base.medianCpuMs ? base.medianCpuMs / current.medianCpuMs : null,
    };
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url.endsWith(path.basename(process.argv[1]))) {
  const baseline = process.env.BENCH_BASELINE_CLI;
  if (!baseline) throw new Error('set BENCH_BASELINE_CLI to the dist/cli.js of the build to compare with');
  const r = await measureVersus({ baseline, log: (m) => process.stderr.write(`[bench:versus] ${m}\n`) });
  const line = (name, s) =>
    `${name.padEnd(9)} pass median ${s.medianPassMs} ms (${Math.round(s.medianItemsPerSec)} items/s), best ${s.bestPassMs} ms; CPU median ${s.medianCpuMs ?? '-'} ms, best ${s.bestCpuMs ?? '-'} ms`;
  process.stdout.write(`${line('current', r.current)}\n${line('baseline', r.baseline)}\n`);
  process.stdout.write(`current / baseline: ${r.passRatio.toFixed(2)}x by pass time, ${r.cpuRatio?.toFixed(2) ?? '-'}x by CPU\n`);
  process.stdout.write(`BENCH_RESULT=${JSON.stringify(r)}\n`);
}
