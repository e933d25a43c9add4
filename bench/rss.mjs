// Peak RSS of the real CLI (`cronsafe run`) over a directory of n empty files with a
// no-op module handler, with the bin's node flags and with plain `node`. Used by bench/run.mjs.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BENCH_DIR, makeTree, writeConfig, CLI } from './lib.mjs';

/**
 * The node options the bin starts node with: dist/cli.js's `exec node ... "$0" "$@"` line
 * (a /bin/sh polyglot, scripts/bundle.mjs), or an older build's `#!/usr/bin/env -S node ...`.
 */
export function binNodeFlags() {
  const [first, second = ''] = readFileSync(CLI, 'utf8').split('\n', 2);
  const m = /^":" \/\/; exec node(.*) "\$0" "\$@"$/.exec(second) ?? /^#!\/usr\/bin\/env -S node(.*)$/.exec(first);
  if (!m) throw new Error(`bench: cannot read the bin's node flags from the first lines of ${CLI}`);
  return m[1].trim().split(/\s+/).filter(Boolean);
}

/** Node flags per variant: what the `cronsafe` bin (and the image) runs, and a plain `node dist/cli.js`. */
export const RSS_VARIANTS = { bin: () => binNodeFlags(), plain: () => [] };

/**
 * Peak RSS of `cronsafe run` over one directory of n files, once per variant in
 * RSS_VARIANTS (each with a fresh ledger, so each does the whole first pass). Two
 * independent readings (KiB): getrusage(RUSAGE_SELF).ru_maxrss printed by bench/maxrss.mjs
 * at exit, and GNU time's %M (the waited-for child's ru_maxrss) when /usr/bin/time exists.
 * They should agree to within a few hundred KiB.
 */
export async function measureRss(n, { taskset, gnuTime, log, variants = Object.keys(RSS_VARIANTS) }) {
  const root = mkdtempSync(path.join(os.tmpdir(), 'cronsafe-bench-rss-'));
  try {
    const src = path.join(root, 'src');
    log(`rss ${n}: creating ${n} empty files under ${src} ...`);
    const createFilesMs = makeTree(src, n);
    log(`rss ${n}: created in ${(createFilesMs / 1000).toFixed(1)} s`);
    const runs = {};
    for (const variant of variants) runs[variant] = await rssRun(root, src, n, variant, { taskset, gnuTime, log });
    const t1 = performance.now();
    rmSync(src, { recursive: true, force: true });
    const deleteFilesMs = performance.now() - t1;
    log(`rss ${n}: files removed in ${(deleteFilesMs / 1000).toFixed(1)} s`);
    return { items: n, createFilesMs, deleteFilesMs, runs };
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

async function rssRun(root, src, n, variant, { taskset, gnuTime, log }) {
  // level info: the real default; at info there is no per-item log line, only progress.
  const configFile = writeConfig(root, { source: src, level: 'info', name: `${variant}.yaml`, state: `state-${variant}` });
  const flags = RSS_VARIANTS[variant]();
  const cli = [process.execPath, ...flags, path.join(BENCH_DIR, 'maxrss.mjs'), CLI, 'run', '-c', configFile];
  let argv = cli;
  if (gnuTime) argv = [gnuTime, '-f', 'BENCH_TIME_MAXRSS_KB=%M', ...argv];
  if (taskset) argv = [taskset, '-c', '0', ...argv];
  log(`rss ${n}: node ${flags.join(' ') || '(no flags)'} dist/cli.js run ...`);

  const t0 = performance.now();
  const { code, signal, stdout, stderr } = await run(argv, 120_000 + n * 2);
  const wallMs = performance.now() - t0;
  if (code !== 0) throw new Error(`rss ${n} ${variant}: cronsafe run exited ${code ?? signal}\n${stderr.slice(-2000)}`);

  const maxRssKiB = num(/BENCH_MAXRSS_KB=(\d+)/.exec(stderr));
  const timeMaxRssKiB = num(/BENCH_TIME_MAXRSS_KB=(\d+)/.exec(stderr));
  const peaks = /BENCH_MEM_PEAKS_KB=(\{.*\})/.exec(stderr);
  const finished = stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l))
    .find((r) => r.msg === 'run finished');
  if (!finished || finished.items?.done !== n) {
    throw new Error(`rss ${n} ${variant}: expected ${n} done items, got ${JSON.stringify(finished?.items)}`);
  }
  log(`rss ${n} ${variant}: peak RSS ${(maxRssKiB / 1024).toFixed(1)} MiB`);
  return {
    variant,
    nodeFlags: flags,
    wallMs,
    runDurationMs: finished.durationMs,
    itemsPerSec: (n * 1000) / finished.durationMs,
    maxRssKiB,
    timeMaxRssKiB,
    memPeaksKiB: peaks ? JSON.parse(peaks[1]) : null,
    counts: finished.counts,
  };
}

const num = (m) => (m ? Number(m[1]) : null);

/** Spawn, collect output, kill the child (by its pid) after `timeoutMs`. `opts`: spawn's env, cwd. */
export function run(argv, timeoutMs, opts = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}
