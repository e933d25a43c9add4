// Second step of `npm run build` (after tsc): bundle the CLI into dist/cli.js plus lazily
// loaded chunks in dist/chunks/, so that starting `cronsafe` reads a few files instead of
// ~400 (zod alone is 100 modules, yaml 74), which halves its start-up time
// (docs/benchmarks.md, start-up). Every `await import()` in src/ stays a separate chunk,
// loaded only when the command or config uses it.
//
// External (loaded from node_modules at run time, as before): the native modules, and the
// large optional libraries that are imported lazily anyway (pg, prom-client, pino-pretty).
// The Kubernetes client is bundled, into a chunk loaded only when a Kubernetes feature is
// on: its own dependency range pulls undici 8, which needs Node 22, and package.json's
// `overrides` (undici 7) apply to this repository only, never to a user's `npm install`.
// Bundled here, it carries the undici this repository resolves, and is a devDependency.
// (ws's optional native helpers stay external: ws loads them only if they are installed.) tsc's per-file output stays in dist/ for the benchmarks that
// import single modules; the bin, the image and the process tests run dist/cli.js.
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const external = ['better-sqlite3', 'fs-ext', 'pg', 'prom-client', 'pino-pretty', 'bufferutil', 'utf-8-validate'];

const { version } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));

/**
 * Built-ins that bundled packages require at load time but use rarely or never, replaced
 * for those packages by stand-ins that load the real module on first use. Each costs
 * 10-15 ms of every start-up (docs/benchmarks.md): commander's node:child_process (for
 * executable subcommands, which cronsafe never declares; it pulls in net, dgram and the
 * stream stack), node:assert in sonic-boom and thread-stream (pino's destinations; an
 * argument check, called only when something is wrong or on a path cronsafe does not take),
 * and node:worker_threads in pino and thread-stream (~7 ms: transports, which cronsafe does
 * not use).
 * Keyed by package, then by the built-in's name as written; the value is the stand-in, which
 * offers only what that package calls (commander: spawn; sonic-boom, thread-stream: assert()
 * itself; thread-stream: new Worker; pino: isMainThread): when
 * upgrading one of them, check that it still calls nothing else of the module.
 */
const LAZY_BUILTINS = {
  commander: { child_process: "module.exports = { spawn: (...args) => require('node:child_process').spawn(...args) };" },
  'sonic-boom': { assert: "module.exports = (...args) => require('node:assert')(...args);" },
  'thread-stream': {
    assert: "module.exports = (...args) => require('node:assert')(...args);",
    // pino's transports only (a worker per transport); cronsafe writes to its own streams.
    worker_threads: "module.exports = { Worker: class Worker { constructor(...args) { return new (require('node:worker_threads').Worker)(...args); } } };",
  },
  // pino reads isMainThread only for an asynchronous destination (to flush it at exit);
  // cronsafe's are synchronous, and the bundle never runs in a worker thread (nothing in
  // src/ starts one), so it is the main thread by construction.
  pino: { worker_threads: 'module.exports = { isMainThread: true };' },
};

const lazyBuiltins = {
  name: 'lazy-builtins',
  setup(b) {
    b.onResolve({ filter: /^(node:)?(child_process|assert|worker_threads)$/ }, (args) => {
      const pkg = /[\\/]node_modules[\\/]([^\\/]+)[\\/]/.exec(args.importer)?.[1];
      const name = args.path.replace(/^node:/, '');
      return pkg && LAZY_BUILTINS[pkg]?.[name] ? { path: `${pkg}/${name}`, namespace: 'lazy-builtin' } : undefined;
    });
    b.onLoad({ filter: /.*/, namespace: 'lazy-builtin' }, (args) => {
      const [pkg, name] = args.path.split('/');
      return { contents: LAZY_BUILTINS[pkg][name], loader: 'js' };
    });
  },
};

rmSync(path.join(root, 'dist', 'chunks'), { recursive: true, force: true });
await build({
  absWorkingDir: root,
  entryPoints: ['src/cli.ts'],
  outdir: 'dist',
  chunkNames: 'chunks/[name]-[hash]',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  external,
  plugins: [lazyBuiltins],
  // `cronsafe --version` (src/program.ts).
  define: { CRONSAFE_VERSION: JSON.stringify(version) },
  // Bundled CommonJS packages (commander, pino) call require() for Node's built-ins; an ES
  // module has none, so each chunk gets one (the entry chunk's shebang line stays first).
  banner: { js: "import { createRequire as __cronsafeCreateRequire } from 'node:module'; const require = __cronsafeCreateRequire(import.meta.url);" },
  // Without comments and indentation V8 parses the chunks in about half the time (the config
  // chunk, yaml + zod: 22 -> 11 ms, measured). Names are kept, so stack traces still read;
  // `node --enable-source-maps` maps them back to src/.
  minifyWhitespace: true,
  sourcemap: true,
  logLevel: 'warning',
});
