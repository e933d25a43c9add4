// Helpers shared by bench/run.mjs and bench/throughput.mjs.
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url));
export const ROOT = path.resolve(BENCH_DIR, '..');
export const NOOP_MODULE = path.join(BENCH_DIR, 'fixtures', 'noop-handler.mjs');

/** Files per subdirectory of a generated backlog (a flat 1M-entry directory is unrealistic). */
export const PER_DIR = 1000;

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
export function writeConfig(root, { source, concurrency = 8, queueSize = 256, level = 'silent' }) {
  const file = path.join(root, 'cronsafe.yaml');
  writeFileSync(
    file,
    [
      'name: bench',
      'source:',
      `  directory: ${JSON.stringify(source)}`,
      'handler:',
      `  module: ${JSON.stringify(NOOP_MODULE)}`,
      'state:',
      `  sqlite: ${JSON.stringify(path.join(root, 'state', 'cronsafe.db'))}`,
      `concurrency: ${concurrency}`,
      `queueSize: ${queueSize}`,
      'log:',
      `  level: ${level}`,
      '',
    ].join('\n'),
  );
  return file;
}

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
export const fmtMiB = (kib) => `${(kib / 1024).toFixed(1)} MiB`;

/** A plain-text table (also valid Markdown). */
export function table(headers, rows) {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) => `| ${cells.map((c, i) => String(c).padEnd(widths[i])).join(' | ')} |`;
  return [line(headers), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}
