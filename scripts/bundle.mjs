// Second step of `npm run build` (after tsc): bundle the CLI into dist/cli.cjs plus lazily
// loaded chunks in dist/chunks/, so that starting `cronsafe` reads a few files instead of
// ~400 (zod alone is 100 modules, yaml 74), which halves its start-up time
// (docs/benchmarks.md, start-up). Every `await import()` in src/ stays a separate chunk,
// loaded only when the command or config uses it.
//
// The entry is CommonJS (dist/cli.cjs, package.json's bin): Node starts a CommonJS main
// without its ES module loader, ~10 ms of every start-up; the program itself runs from the
// code cache's CommonJS script (src/code-cache.ts), so `--version`, `validate`, `schedule`
// and a lock-skipped `run` never load that loader. dist/cli.js, what `node dist/cli.js` and
// the process tests run, is a two-line ES module that requires dist/cli.cjs: the same code.
//
// External (loaded from node_modules at run time, as before): the native modules, and the
// large optional libraries that are imported lazily anyway (pg, prom-client, pino-pretty).
// The Kubernetes client is bundled, into a chunk loaded only when a Kubernetes feature is
// on: its own dependency range pulls undici 8, which needs Node 22, and package.json's
// `overrides` (undici 7) apply to this repository only, never to a user's `npm install`.
// Bundled here, it carries the undici this repository resolves, and is a devDependency.
// (ws's optional native helpers stay external: ws loads them only if they are installed.) tsc's per-file output stays in dist/ for the benchmarks that
// import single modules; the bin and the image run dist/cli.cjs.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const external = ['better-sqlite3', 'fs-ext', 'pg', 'prom-client', 'pino-pretty', 'bufferutil', 'utf-8-validate'];
const chunks = path.join(root, 'dist', 'chunks');

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

/**
 * The code cache (src/code-cache.ts): cli.ts's `import('./program.js')` loads
 * src/code-cache.ts instead, which compiles the program from one CommonJS script with V8's
 * cache, made here, or else imports the ES module chunks as before. The Kubernetes client
 * is an entry of its own (chunks/kubernetes-client.js), so that the script, which leaves it
 * out, can import it by name.
 */
let programRedirected = false;
const codeCacheLoader = {
  name: 'code-cache-loader',
  setup(b) {
    b.onResolve({ filter: /^\.\/program\.js$/ }, (args) => {
      if (args.importer !== path.join(root, 'src', 'cli.ts')) return undefined;
      programRedirected = true;
      return { path: path.join(root, 'src', 'code-cache.ts') };
    });
  },
};
/**
 * The CommonJS entry's two imports of ES module chunks, by the chunks' fixed names: the
 * program's chunks when there is no code cache (src/code-cache.ts's fallback), and the log
 * sink on a fatal error (src/cli.ts). Relative to dist/cli.cjs, which imports them.
 */
const ENTRY_CHUNKS = { 'code-cache.ts': { './program.js': './chunks/program.js' }, 'cli.ts': { './log-sink.js': './chunks/log-sink.js' } };
const entryChunks = {
  name: 'entry-chunks',
  setup(b) {
    b.onResolve({ filter: /^\.\/(program|log-sink)\.js$/ }, (args) => {
      if (path.dirname(args.importer) !== path.join(root, 'src')) return undefined;
      const to = ENTRY_CHUNKS[path.basename(args.importer)]?.[args.path];
      return to ? { path: to, external: true } : undefined;
    });
  },
};
/**
 * In the CommonJS entry, a built-in that src/ imports with `await import()` (cli.ts's
 * node:v8) is required: esbuild leaves an external's import() as it is, and that import()
 * alone would start Node's ES module loader.
 */
const builtinsRequired = {
  name: 'builtins-required',
  setup(b) {
    b.onResolve({ filter: /^node:/ }, (args) => (args.kind === 'dynamic-import' ? { path: args.path, namespace: 'builtin-required' } : undefined));
    b.onLoad({ filter: /.*/, namespace: 'builtin-required' }, (args) => ({ contents: `module.exports = require(${JSON.stringify(args.path)});`, loader: 'js' }));
  },
};
const kubernetesClientChunk = {
  name: 'kubernetes-client-chunk',
  setup(b) {
    b.onResolve({ filter: /^@kubernetes\/client-node$/ }, () => ({ path: './kubernetes-client.js', external: true }));
  },
};

/**
 * Runs the CommonJS program as the commands that must start fast do (`--version`,
 * `validate`, a lock-skipped `run`, `schedule --json`, on a config in a temporary
 * directory), so that the functions they call are compiled, and writes V8's cache of it.
 * Run in a child with the bin's flags: V8 rejects a cache made under other flags.
 */
async function writeCodeCache(start) {
  if (start === 'plain') {
    // As cli.ts does for `node dist/cli.js`, before it loads the program.
    const { setFlagsFromString } = await import('node:v8');
    for (const [, flag] of readFileSync(path.join(root, 'src', 'cli.ts'), 'utf8').matchAll(/setFlagsFromString\('([^']+)'\)/g)) setFlagsFromString(flag);
  }
  const { codeCacheFiles, runScript } = await import(pathToFileURL(path.join(root, 'dist', 'code-cache.js')).href);
  const files = codeCacheFiles(chunks, start);
  const { program, script } = runScript(files.script);
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'cronsafe-code-cache-'));
  try {
    for (const dir of ['items', 'state']) mkdirSync(path.join(tmp, dir));
    writeFileSync(path.join(tmp, 'handler.mjs'), 'export default async function handle() {}\n');
    const config = path.join(tmp, 'cronsafe.yaml');
    const lock = path.join(tmp, 'state', 'warm.lock');
    const yaml = { name: 'warm', source: { directory: path.join(tmp, 'items') }, handler: { module: path.join(tmp, 'handler.mjs') }, state: { sqlite: path.join(tmp, 'state', 'warm.db') }, lock: { path: lock }, schedule: { cron: '*/5 * * * *', timeZone: 'Europe/London' } };
    writeFileSync(config, JSON.stringify(yaml)); // JSON is YAML
    // Held here, so that the run takes the lock-skip path (flock: another open file conflicts).
    createRequire(import.meta.url)('fs-ext').flockSync(openSync(lock, 'a+'), 'exnb');
    const signals = { stop: new AbortController().signal, force: new AbortController().signal, commandStarts: () => {} };
    for (const argv of [['--version'], ['run', '-c', config], ['validate', '-c', config], ['schedule', '--json', '-c', config]]) {
      const code = await program.main(['node', 'cronsafe', ...argv], signals);
      if (code !== 0) throw new Error(`code cache: cronsafe ${argv.join(' ')} exited ${code}`);
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  writeFileSync(files.cache, script.createCachedData());
}

/**
 * The chunks carry the code of the packages bundled into them (the Kubernetes client and its
 * dependencies among them: devDependencies, so neither the npm package's dependencies nor the
 * image's node_modules bring their files), and MIT, ISC and Apache-2.0 each ask that a copy
 * carry the package's licence and notices. One file beside the chunks has them all: the npm
 * package and the image (which copies dist/) ship it with the code.
 */
const LICENSES_FILE = 'THIRD-PARTY-LICENSES.txt';
function writeLicenses(metafiles) {
  const dirs = new Set();
  for (const meta of metafiles) {
    for (const input of Object.keys(meta.inputs)) {
      // The innermost node_modules: a package's own nested copy of a dependency is its own.
      const m = /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(input.replaceAll('\\', '/'));
      if (m) dirs.add(path.resolve(root, m[1]));
    }
  }
  const sections = [...dirs].map((dir) => {
    const meta = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'));
    const license = typeof meta.license === 'string' ? meta.license : (meta.license?.type ?? 'see the package');
    const files = readdirSync(dir).filter((f) => /^(licen[cs]e|copying|notice)([.-]|$)/i.test(f)).sort();
    const texts = files.map((f) => readFileSync(path.join(dir, f), 'utf8').trim());
    const body = texts.length > 0 ? texts.join('\n\n') : `(the package has no licence file; its package.json says: ${license})`;
    return { key: `${meta.name}@${meta.version}`, text: `${meta.name}@${meta.version} (${license})\n${'-'.repeat(72)}\n${body}\n` };
  });
  sections.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const head = `Third-party packages bundled into cronsafe ${version}'s dist/chunks, each with its licence.\n`;
  writeFileSync(path.join(chunks, LICENSES_FILE), [head, ...sections.map((s) => s.text)].join(`\n${'='.repeat(72)}\n`));
}

if (process.argv[2] === '--code-cache') {
  await writeCodeCache(process.argv[3]);
  process.exit(0); // the warm-up's ledger and logger may keep handles open
}

const { build } = await import('esbuild');
rmSync(chunks, { recursive: true, force: true });
const split = await build({
  absWorkingDir: root,
  // The program and the log sink by fixed names, for the CommonJS entry (entryChunks above).
  entryPoints: [
    { in: 'src/program.ts', out: 'chunks/program' },
    { in: 'src/log-sink.ts', out: 'chunks/log-sink' },
    { in: '@kubernetes/client-node', out: 'chunks/kubernetes-client' },
  ],
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
  // module has none, so each chunk gets one.
  banner: { js: "import { createRequire as __cronsafeCreateRequire } from 'node:module'; const require = __cronsafeCreateRequire(import.meta.url);" },
  // Without comments and indentation V8 parses the chunks in about half the time (the config
  // chunk, yaml + zod: 22 -> 11 ms, measured). Names are kept, so stack traces still read;
  // `node --enable-source-maps` maps them back to src/.
  minifyWhitespace: true,
  sourcemap: true,
  metafile: true,
  logLevel: 'warning',
});

// The entry, CommonJS: src/cli.ts, with its `import('./program.js')` pointed at
// src/code-cache.ts (bundled in), whose own fallback import and cli.ts's log sink import the
// ES module chunks above by name. import.meta.url, which code-cache.ts reads to find the
// script and caches beside it, is a file's in dist/chunks/, where they are.
await build({
  absWorkingDir: root,
  entryPoints: ['src/cli.ts'],
  outfile: path.join(root, 'dist', 'cli.cjs'),
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  external,
  plugins: [codeCacheLoader, entryChunks, builtinsRequired],
  define: { 'import.meta.url': '__cronsafeChunksFileUrl' },
  // "use strict" first, before the banner's statement, or it is no directive: the ES module
  // source ran in strict mode and must here too.
  banner: { js: "\"use strict\"; const __cronsafeChunksFileUrl = require('node:url').pathToFileURL(require('node:path').join(__dirname, 'chunks', 'cli.cjs')).href;" },
  minifyWhitespace: true,
  sourcemap: true,
  logLevel: 'warning',
});
// Else the cache would go unused without a word (cli.ts imports the program another way).
if (!programRedirected) throw new Error("bundle: src/cli.ts no longer imports './program.js': point codeCacheLoader at how it loads the program");
{
  // Nothing but the two imports above may load an ES module: another one would bring back
  // Node's ES module loader at every start.
  const text = readFileSync(path.join(root, 'dist', 'cli.cjs'), 'utf8');
  // The third: code-cache.ts's importer, for the script's module handler and Kubernetes client.
  const calls = [...text.matchAll(/(?<![\w$.])import\(("[^"]*")?/g)].map((m) => m[1] ?? '(a variable)').sort();
  if (JSON.stringify(calls) !== JSON.stringify(['"./chunks/log-sink.js"', '"./chunks/program.js"', '(a variable)'])) {
    throw new Error(`bundle: dist/cli.cjs imports ${calls.join(', ')}: expected only the program's and the log sink's chunks (and code-cache.ts's importer)`);
  }
}

// The bin starts node with flags (src/cli.ts's `#!/usr/bin/env -S node ...`), but `env -S` is
// GNU's: BusyBox env (Alpine's /usr/bin/env) refuses it, so the installed bin would not run
// there. The built bin is a polyglot instead: /bin/sh runs line 2 (`:`, then exec node with the
// flags on this file: same pid, so signals reach cronsafe), and JavaScript reads it as a string
// and a comment. The source map moves down the line it adds.
// dist/cli.js, for `node dist/cli.js` (an ES module: package.json's type), requires the entry;
// it is a polyglot too, so that `./dist/cli.js` from a checkout runs as before.
{
  const file = path.join(root, 'dist', 'cli.cjs');
  const text = readFileSync(file, 'utf8');
  const m = /^#!\/usr\/bin\/env -S node((?: --?[\w=.-]+)*)\n/.exec(text);
  if (!m) throw new Error(`bundle: dist/cli.cjs does not start with src/cli.ts's #!/usr/bin/env -S node shebang: ${text.split('\n', 1)[0]}`);
  const polyglot = `#!/bin/sh\n":" //; exec node${m[1]} "$0" "$@"\n`;
  // Line 2's string and the banner's "use strict" make the directive prologue: strict mode.
  if (!text.slice(m[0].length).startsWith('"use strict";')) throw new Error('bundle: dist/cli.cjs does not start with the banner\'s "use strict"');
  writeFileSync(file, `${polyglot}${text.slice(m[0].length)}`);
  const mapFile = `${file}.map`;
  const map = JSON.parse(readFileSync(mapFile, 'utf8'));
  map.mappings = `;${map.mappings}`;
  writeFileSync(mapFile, JSON.stringify(map));
  writeFileSync(path.join(root, 'dist', 'cli.js'), `${polyglot}import { createRequire } from 'node:module';\ncreateRequire(import.meta.url)('./cli.cjs');\n`);
  rmSync(path.join(root, 'dist', 'cli.js.map'), { force: true }); // tsc's, of the file this replaced
}
// Executable, as npm makes a package's bin on install: `./dist/cli.js run` from a checkout
// runs through its shebang (with the bin's node flags) instead of failing with EACCES.
for (const f of ['cli.cjs', 'cli.js']) chmodSync(path.join(root, 'dist', f), 0o755);

// The same program as one CommonJS script for the code cache (src/code-cache.ts). Not split:
// a script is compiled whole, and the cache covers what the fast commands run.
const script = await build({
  absWorkingDir: root,
  entryPoints: ['src/program.ts'],
  outfile: path.join(chunks, 'cronsafe.cjs'),
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  external,
  plugins: [lazyBuiltins, kubernetesClientChunk],
  define: { CRONSAFE_VERSION: JSON.stringify(version), 'import.meta.url': '__cronsafeImportMetaUrl' },
  banner: { js: "const __cronsafeImportMetaUrl = require('node:url').pathToFileURL(__filename).href;" },
  minifyWhitespace: true,
  sourcemap: true,
  metafile: true,
  logLevel: 'warning',
});
writeLicenses([split.metafile, script.metafile]);
// The script's own import() calls go through the loader's __cronsafeImport (src/code-cache.ts
// says why): only those two are left as import() by esbuild (everything else is bundled).
// Another one would be a new import() in src/ that needs the same, so the build stops.
{
  const file = path.join(chunks, 'cronsafe.cjs');
  const text = readFileSync(file, 'utf8');
  const calls = text.match(/(?<![\w$.])import\(/g)?.length ?? 0;
  if (calls !== 2) throw new Error(`bundle: ${file} has ${calls} import() calls, expected 2 (a module handler, the Kubernetes client): route any new one through __cronsafeImport`);
  // src/code-cache.ts reads the script as latin1, the same string as UTF-8 for ASCII only
  // (esbuild's default charset writes other characters as escapes; a comment kept could hold one).
  const other = /\P{ASCII}/u.exec(text);
  if (other) throw new Error(`bundle: ${file} holds a character that is not ASCII (${JSON.stringify(text.slice(Math.max(0, other.index - 40), other.index + 40))}): src/code-cache.ts reads it as latin1`);
  writeFileSync(file, text.replace(/(?<![\w$.])import\(/g, '__cronsafeImport('));
}
const shebang = /^#!.*\bnode\b(.*)$/m.exec(readFileSync(path.join(root, 'src', 'cli.ts'), 'utf8'))?.[1].trim().split(/\s+/).filter(Boolean) ?? [];
for (const [start, flags] of [['bin', shebang], ['plain', []]]) {
  // Without the environment's own cronsafe or Kubernetes settings: the warm-up is local.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(CRONSAFE_|KUBERNETES_)/.test(k)));
  const warm = spawnSync(process.execPath, [...flags, fileURLToPath(import.meta.url), '--code-cache', start], { stdio: ['ignore', 'pipe', 'inherit'], env, encoding: 'utf8', maxBuffer: 16 << 20 });
  if (warm.status !== 0) throw new Error(`bundle: making the ${start} code cache failed (${warm.status ?? warm.signal})`);
  // A warm-up run that did not skip would cache the runner instead of the skip path.
  if (!warm.stdout.includes('"outcome":"skipped-locked"')) throw new Error(`bundle: the ${start} code cache's warm-up run did not find its lock held:\n${warm.stdout.slice(-2000)}`);
}
