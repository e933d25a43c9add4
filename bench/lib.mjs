// Helpers shared by bench/run.mjs and bench/throughput.mjs.
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url));
export const ROOT = path.resolve(BENCH_DIR, '..');
export const NOOP_MODULE = path.join(BENCH_DIR, 'fixtures', 'noop-handler.mjs');
/** The CLI under test: BENCH_CLI (e.g. another checkout's build, for a before/after), else this one's. */
export const CLI = process.env.BENCH_CLI ? path.resolve(process.env.BENCH_CLI) : path.join(ROOT, 'dist', 'cli.js');

/** Files per subdirectory of a generated backlog (a flat 1M-entry directory is unrealistic). */
export const PER_DIR = 1000;

/**
 * The seeds' reference runners (../shared/seed-runners next to the project, or the
 * machine's shared folder); null when neither exists. Run from there, never copied in.
 */
export function seedRunnersDir() {
  const candidates = [process.env.BENCH_SEED_RUNNERS, path.resolve(ROOT, '..', 'shared', 'seed-runners'), '/work/shared/seed-runners'];
  return candidates.find((d) => d && existsSync(path.join(d, 'seed000_batch_runner.py'))) ?? null;
}

/** Create `n` empty files `item-0000000.scc` ... directly in `dir` (seed 000 globs `*.scc`, not recursively). */
export function makeFlatTree(dir, n) {
  const t0 = performance.now();
  mkdirSync(dir, { recursive: true });
  for (let i = 0; i < n; i++) closeSync(openSync(path.join(dir, `item-${String(i).padStart(7, '0')}.scc`), 'w'));
  return performance.now() - t0;
}

/** Positive integer from the environment, or the default. */
export function envInt(name, dflt) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return dflt;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name}: expected a positive integer, got ${JSON.stringify(raw)}`);
  return n;
}

/** The id of the i-th generated item: `d0000/f0000`, the same shape for files and synthetic ids. */
export function itemId(i) {
  const d = Math.floor(i / PER_DIR);
  return `d${String(d).padStart(4, '0')}/f${String(i % PER_DIR).padStart(4, '0')}`;
}

/** Create `n` empty files under `dir` in subdirectories of PER_DIR; returns the elapsed ms. */
export function makeTree(dir, n) {
  const t0 = performance.now();
  mkdirSync(dir, { recursive: true });
  let current = '';
  for (let i = 0; i < n; i++) {
    const id = itemId(i);
    const sub = id.slice(0, id.indexOf('/'));
    if (sub !== current) {
      mkdirSync(path.join(dir, sub), { recursive: true });
      current = sub;
    }
    closeSync(openSync(path.join(dir, id), 'w'));
  }
  return performance.now() - t0;
}

/**
 * Write a cronsafe.yaml into `root` (state and lock under root/state, outside the source)
 * and return its path. Everything not given here takes the loader's real defaults.
 */
export function writeConfig(root, { source, concurrency = 8, queueSize = 256, level = 'silent', command, name = 'cronsafe.yaml', state = 'state' }) {
  const file = path.join(root, name);
  writeFileSync(
    file,
    [
      'name: bench',
      'source:',
      `  directory: ${JSON.stringify(source)}`,
      'handler:',
      command ? `  command: ${JSON.stringify(command)}` : `  module: ${JSON.stringify(NOOP_MODULE)}`,
      'state:',
      `  sqlite: ${JSON.stringify(path.join(root, state, 'cronsafe.db'))}`,
      `concurrency: ${concurrency}`,
      // null: the loader's default (4 x concurrency), as a user who does not set it gets.
      ...(queueSize === null ? [] : [`queueSize: ${queueSize}`]),
      'log:',
      `  level: ${level}`,
      '',
    ].join('\n'),
  );
  return file;
}

/** Median of a non-empty list of numbers. */
export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** GNU time's `%M` (peak RSS of the waited-for child, KiB) from a stderr, or null. */
export const timeMaxRss = (stderr) => {
  const m = /BENCH_TIME_MAXRSS_KB=(\d+)/.exec(stderr);
  return m ? Number(m[1]) : null;
};

export function environment() {
  let cpu = 'unknown';
  try {
    const info = readFileSync('/proc/cpuinfo', 'utf8');
    cpu = /^model name\s*:\s*(.+)$/m.exec(info)?.[1]?.trim() ?? cpu;
  } catch {
    cpu = os.cpus()[0]?.model ?? cpu;
  }
  return {
    date: new Date().toISOString(),
    node: process.version,
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
    cpu,
    cores: os.availableParallelism(),
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    // Other work on the machine skews the numbers; recorded so a reader can tell.
    loadavg: loadavg(),
  };
}

export const loadavg = () => os.loadavg().map((l) => Math.round(l * 100) / 100);

/** First executable found among `candidates`, or null. */
export function which(...candidates) {
  for (const c of candidates) if (existsSync(c)) return c;
  return null;
}

export const fmtInt = (n) => (n === null || n === undefined ? '-' : Math.round(n).toLocaleString('en-US'));
export const fmtSec = (ms) => `${(ms / 1000).toFixed(2)} s`;
export const fmtMiB = (kib) => (kib === null || kib === undefined ? '-' : `${(kib / 1024).toFixed(1)} MiB`);
export const fmtRatio = (x) => (Number.isFinite(x) ? `${x.toFixed(2)}x` : '-');

/** A plain-text table (also valid Markdown). */
export function table(headers, rows) {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) => `| ${cells.map((c, i) => String(c).padEnd(widths[i])).join(' | ')} |`;
  return [line(headers), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}
