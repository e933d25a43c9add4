// Run a Node script (argv[2]) as if it were the main module and, at exit, print this
// process's peak RSS (getrusage ru_maxrss, KiB) to stderr, plus the peaks of
// process.memoryUsage() fields sampled every 100 ms (where the memory is: V8 heap,
// external buffers, or native, e.g. SQLite and malloc). process.exit() still runs
// 'exit' listeners, so this works for a CLI that ends with process.exit(code).
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [script, ...rest] = process.argv.slice(2);
if (!script) {
  process.stderr.write('usage: node bench/maxrss.mjs SCRIPT [ARGS...]\n');
  process.exit(2);
}
const peak = { rss: 0, heapTotal: 0, heapUsed: 0, external: 0, arrayBuffers: 0 };
const sample = () => {
  const m = process.memoryUsage();
  for (const k of Object.keys(peak)) peak[k] = Math.max(peak[k], m[k]);
};
setInterval(sample, 100).unref();
process.on('exit', () => {
  sample();
  const kib = Object.fromEntries(Object.entries(peak).map(([k, v]) => [k, Math.round(v / 1024)]));
  process.stderr.write(`\nBENCH_MAXRSS_KB=${process.resourceUsage().maxRSS}\nBENCH_MEM_PEAKS_KB=${JSON.stringify(kib)}\n`);
});
const abs = path.resolve(script);
process.argv = [process.argv[0], abs, ...rest];
await import(pathToFileURL(abs).href);
