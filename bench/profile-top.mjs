// Summarise a V8 .cpuprofile (from `node --cpu-prof`): the top self-time entries with
// file:line, and self time grouped by file or by package. No dependencies. Frames in a
// file with a source map next to it (the esbuild bundle: dist/chunks/*.js.map) are shown
// at their source position (src/runner/pass.ts:123).
// Usage: node bench/profile-top.mjs FILE.cpuprofile [--top N] [--by function|file|package]
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
const file = args.find((a) => !a.startsWith('--') && !/^\d+$/.test(a));
if (!file) {
  process.stderr.write('usage: node bench/profile-top.mjs FILE.cpuprofile [--top N] [--by function|file|package]\n');
  process.exit(2);
}
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const top = Number(opt('top', 30));
const by = opt('by', 'function');

const profile = JSON.parse(readFileSync(file, 'utf8'));
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
// Self time per node: each sample hits one node; each interval is the time until the next sample.
const self = new Map();
const deltas = profile.timeDeltas;
for (let i = 0; i < profile.samples.length; i++) {
  const dt = deltas[i + 1] ?? 0;
  self.set(profile.samples[i], (self.get(profile.samples[i]) ?? 0) + dt);
}
const total = [...self.values()].reduce((a, b) => a + b, 0);

const maps = new Map();
function sourceMapFor(url) {
  if (!url.startsWith('file://')) return null;
  if (!maps.has(url)) {
    const file = `${fileURLToPath(url)}.map`;
    maps.set(url, existsSync(file) ? { map: new SourceMap(JSON.parse(readFileSync(file, 'utf8'))), dir: path.dirname(file) } : null);
  }
  return maps.get(url);
}
/** The frame's original file URL and 0-based line, through a source map when there is one. */
function original(cf) {
  const sm = sourceMapFor(cf.url);
  if (!sm || cf.lineNumber < 0) return { url: cf.url, line: cf.lineNumber };
  const e = sm.map.findEntry(cf.lineNumber, Math.max(0, cf.columnNumber));
  if (!e || !e.originalSource) return { url: cf.url, line: cf.lineNumber };
  return { url: `file://${path.resolve(sm.dir, e.originalSource.replace(/^file:\/\//, ''))}`, line: e.originalLine };
}

const short = (url) => url.replace(/^file:\/\//, '').replace(/^.*\/node_modules\//, 'node_modules/').replace(/^.*\/(dist|src|bench)\//, '$1/');
const pkg = (url) => {
  if (!url) return '(native / V8)';
  if (url.startsWith('node:')) return 'node: core';
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1];
  return /\/dist\//.test(url) ? 'cronsafe (dist)' : short(url);
};
const key = (n) => {
  const cf = n.callFrame;
  const o = original(cf);
  if (by === 'package') return pkg(o.url);
  if (by === 'file') return o.url ? short(o.url) : `(${cf.functionName || 'native'})`;
  const where = o.url ? `${short(o.url)}:${o.line + 1}` : '';
  return `${cf.functionName || '(anonymous)'} ${where}`.trim();
};
const sums = new Map();
for (const [id, t] of self) {
  const k = key(nodes.get(id));
  sums.set(k, (sums.get(k) ?? 0) + t);
}
const rows = [...sums.entries()].sort((a, b) => b[1] - a[1]).slice(0, top);
process.stdout.write(`total sampled ${(total / 1000).toFixed(0)} ms, by ${by}\n`);
for (const [k, t] of rows) process.stdout.write(`${((100 * t) / total).toFixed(1).padStart(5)}%  ${(t / 1000).toFixed(1).padStart(8)} ms  ${k}\n`);
