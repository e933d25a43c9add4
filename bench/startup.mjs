// Start-up wall time of the real CLI (package.json's bin, as `cronsafe` runs it): `--version`,
// `validate`, `schedule --json` and a `run` that finds the lock held (it records the skip in the SQLite ledger and exits 0),
// each the median of BENCH_STARTUP_RUNS (default 5) runs, next to `node -e 0`. Node gets the
// bin's shebang flags, as `cronsafe ...` would. BENCH_BASELINE_CLI=path/to/other/dist/cli.js
// adds the same cases for another build (a before/after in one run). Used by bench/run.mjs;
// alone: `npm run build && node bench/startup.mjs` (prints one BENCH_RESULT=<json> line too).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { NOOP_MODULE, ROOT, envInt, median, which, CLI } from './lib.mjs';
import { binNodeFlags, run } from './rss.mjs';

/** Hold `lockPath` with flock(2) in a child until the returned function is called. */
async function holdLock(lockPath) {
  const script = `const fs=require('node:fs');const {flockSync}=require(${JSON.stringify(path.join(ROOT, 'node_modules', 'fs-ext'))});` +
    `const fd=fs.openSync(${JSON.stringify(lockPath)},'a+');flockSync(fd,'exnb');process.stdout.write('HELD\\n');setInterval(()=>{},1e9);`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`lock holder exited ${code}`)));
    child.stdout.setEncoding('utf8').on('data', (d) => d.includes('HELD') && resolve());
  });
  return () => child.kill('SIGKILL');
}

/**
 * What `cronsafe` runs for the build whose dist/cli.js is `cli`: its package.json's bin
 * (dist/cli.cjs since the bin is CommonJS; dist/cli.js before), or `cli` itself.
 */
function binOf(cli) {
  const pkg = path.join(path.dirname(cli), '..', 'package.json');
  if (path.basename(cli) !== 'cli.js' || !existsSync(pkg)) return cli;
  const bin = JSON.parse(readFileSync(pkg, 'utf8')).bin?.cronsafe;
  return typeof bin === 'string' && existsSync(path.join(path.dirname(pkg), bin)) ? path.join(path.dirname(pkg), bin) : cli;
}

/**
 * Median wall (ms) of each start-up case. Every run is checked for its exit code (and the
 * run case for the `skipped-locked` outcome), so a broken build cannot look fast.
 */
export async function measureStartup({ runs = envInt('BENCH_STARTUP_RUNS', 5), log = () => {}, cli = CLI, baseline = process.env.BENCH_BASELINE_CLI } = {}) {
  const root = mkdtempSync(path.join(os.tmpdir(), 'cronsafe-bench-startup-'));
  // CPU seconds (user + sys) beside the wall time: on a busy machine the wall time mostly
  // measures the wait for a core, the CPU time what the start-up itself costs.
  const gnuTime = which('/usr/bin/time');
  const flags = binNodeFlags();
  const releases = [];
  try {
    /**
     * A workspace per CLI (two builds may not share a ledger: a newer one migrates it), with
     * a ledger from a first run (so `schedule` reads it too) and its run lock held.
     */
    const workspace = async (name, file) => {
      const dir = path.join(root, name);
      mkdirSync(path.join(dir, 'src'), { recursive: true });
      mkdirSync(path.join(dir, 'state'));
      const config = path.join(dir, 'cronsafe.yaml');
      writeFileSync(
        config,
        [
          'name: startup',
          'source:',
          `  directory: ${JSON.stringify(path.join(dir, 'src'))}`,
          'handler:',
          `  module: ${JSON.stringify(NOOP_MODULE)}`,
          'state:',
          `  sqlite: ${JSON.stringify(path.join(dir, 'state', 'cronsafe.db'))}`,
          'schedule:',
          '  cron: "*/5 * * * *"',
          '  timeZone: Europe/London',
          '',
        ].join('\n'),
      );
      const first = spawnSync(process.execPath, [...flags, file, 'run', '-c', config], { encoding: 'utf8' });
      if (first.status !== 0) throw new Error(`startup: first run of ${file} exited ${first.status}\n${first.stderr}`);
      releases.push(await holdLock(path.join(dir, 'state', 'startup.lock')));
      return config;
    };
    const node = [process.execPath, ...flags];
    const cliCases = async (label, cliFile) => {
      const file = binOf(cliFile);
      const config = await workspace(label ? 'baseline' : 'cli', file);
      return [
        { name: `${label}cronsafe --version`, argv: [...node, file, '--version'] },
        // As an installed bin runs: the file itself, through its first line (/bin/sh execs node with the flags).
        ...(label ? [] : [{ name: `cronsafe --version (the bin itself: ${path.relative(ROOT, file)} run as a program)`, argv: [file, '--version'] }]),
        // `node dist/cli.js`, which requires the bin (an ES module: Node's ES module loader first).
        ...(label || file === cliFile ? [] : [{ name: 'node dist/cli.js --version (plain)', argv: [process.execPath, cliFile, '--version'] }]),
        { name: `${label}cronsafe validate`, argv: [...node, file, 'validate', '-c', config] },
        { name: `${label}cronsafe schedule --json`, argv: [...node, file, 'schedule', '--json', '-c', config] },
        { name: `${label}cronsafe run (lock held: skip)`, argv: [...node, file, 'run', '-c', config], expect: '"skipped-locked"' },
      ];
    };
    const cases = [{ name: 'node -e 0', argv: [...node, '-e', '0'] }, ...(await cliCases('', cli)), ...(baseline ? await cliCases('baseline: ', baseline) : [])];
    for (const c of cases) Object.assign(c, { walls: [], cpus: [] });
    try {
      // Round-robin, not case after case: the machine's load drifts, and every case should
      // see the same drift.
      for (let i = 0; i < runs; i++) {
        for (const c of cases) {
          const t0 = performance.now();
          const r = await run(gnuTime ? [gnuTime, '-f', 'BENCH_CPU_S=%U %S', ...c.argv] : c.argv, 30_000);
          c.walls.push(performance.now() - t0);
          const cpu = /BENCH_CPU_S=([\d.]+) ([\d.]+)/.exec(r.stderr);
          if (cpu) c.cpus.push((Number(cpu[1]) + Number(cpu[2])) * 1000);
          if (r.code !== 0) throw new Error(`startup: ${c.name} exited ${r.code ?? r.signal}\n${r.stderr.slice(-2000)}`);
          if (c.expect && !r.stdout.includes(c.expect)) throw new Error(`startup: ${c.name}: no ${c.expect} in its output\n${r.stdout.slice(-2000)}`);
        }
      }
    } finally {
      for (const release of releases.splice(0)) release();
    }
    const results = cases.map((c) => ({ name: c.name, medianMs: median(c.walls), cpuMs: c.cpus.length ? median(c.cpus) : null, walls: c.walls }));
    for (const x of results) log(`startup: ${x.name}: median ${x.medianMs.toFixed(0)} ms wall${x.cpuMs === null ? '' : `, ${x.cpuMs.toFixed(0)} ms CPU`} of ${runs}`);
    return { runs, cli, nodeFlags: flags, results };
  } finally {
    for (const release of releases) release(); // a workspace failed before the rounds
    rmSync(root, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const r = await measureStartup({ log: (m) => process.stderr.write(`[bench:startup] ${m}\n`) });
  for (const x of r.results) {
    const cpu = x.cpuMs === null ? '' : `  CPU ${(x.cpuMs / 1000).toFixed(3)} s`;
    process.stdout.write(`${x.name.padEnd(42)} ${(x.medianMs / 1000).toFixed(3)} s${cpu}  (${x.walls.map((w) => w.toFixed(0)).join(' ')} ms)\n`);
  }
  process.stdout.write(`BENCH_RESULT=${JSON.stringify(r)}\n`);
}
