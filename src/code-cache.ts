/**
 * What cli.ts's `import('./program.js')` loads in the bundle (scripts/bundle.mjs puts this
 * module in that import's place). Node 20 keeps no compiled code between runs of an ES
 * module, and compiling the program's chunks is a large part of every start-up; `npm run
 * build` also makes the program as one CommonJS script plus V8's code cache for it (taken
 * after running `--version`, `validate`, `schedule` and a lock-skipped `run`), which this
 * compiles with that cache: 30-60 ms less per start (docs/benchmarks.md, start-up).
 *
 * Falls back to the ES module chunks, silently, wherever the cache cannot apply: no cache for
 * this Node version, architecture and way of starting (a build made by another Node), or
 * tsc's per-file output (no script next to it). If V8 rejects a cache anyway (other V8
 * flags on the command line), the script is compiled without it: slower, same behaviour.
 * Under `--enable-source-maps` too: Node maps stack traces back to src/ for modules it
 * loads itself, not for a vm.Script.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import vm from 'node:vm';
import type * as Program from './program.js';

export type ProgramModule = typeof Program;

/**
 * The script and its cache, in the directory of the chunk holding this module. V8 takes a
 * cache only from the same V8, CPU and flags, so there is one per Node version, architecture
 * and way of starting: `bin` with the shebang's flags on the command line (`cronsafe`, the
 * image), `plain` for `node dist/cli.js`, whose flags cli.ts sets at run time.
 */
export function codeCacheFiles(dir: string, start: 'bin' | 'plain' = startedAs()): { script: string; cache: string } {
  return { script: path.join(dir, 'cronsafe.cjs'), cache: path.join(dir, `cronsafe-${process.version}-${process.arch}-${start}.cache`) };
}

/** The bin's flags are on node's command line (src/cli.ts tells them apart by the same flag). */
function startedAs(): 'bin' | 'plain' {
  return process.execArgv.includes('--heap-growing-percent=10') ? 'bin' : 'plain';
}

/**
 * Compiles and runs the CommonJS script as Node's loader would; the build asks `script` for
 * its cache. A script's own `import()` needs an experimental vm option on Node 20 (and
 * warns on stderr), so the build has the script's two (a module handler, the Kubernetes
 * client chunk) call `__cronsafeImport`, given here: Node's own import(), relative to the
 * script.
 */
export function runScript(file: string, cachedData?: Buffer): { program: ProgramModule; script: vm.Script } {
  // On one line with the source's first, as Node's own wrapper: line numbers stay right.
  // Read as latin1: the build makes the script ASCII only (scripts/bundle.mjs checks it), for
  // which latin1 is the same string as UTF-8, made without decoding (~2 ms less per start).
  const source = `(function (exports, require, module, __filename, __dirname, __cronsafeImport) { ${readFileSync(file, 'latin1')}\n})`;
  const script = new vm.Script(source, { filename: file, cachedData });
  const base = pathToFileURL(file);
  const importer = (specifier: string): Promise<unknown> => import(new URL(specifier, base).href);
  const module = { exports: {} as ProgramModule };
  const wrapper = script.runInThisContext() as (...args: unknown[]) => void;
  wrapper.call(module.exports, module.exports, createRequire(file), module, file, path.dirname(file), importer);
  return { program: module.exports, script };
}

async function load(): Promise<ProgramModule> {
  const { script, cache } = codeCacheFiles(path.dirname(fileURLToPath(import.meta.url)));
  if (!process.sourceMapsEnabled && existsSync(cache) && existsSync(script)) {
    try {
      return runScript(script, readFileSync(cache)).program;
    } catch (err) {
      // Unreadable (a permission, an I/O error): the chunks hold the same program. An error
      // of the program's own would come back from them too.
      if (!(err instanceof Error && 'syscall' in err)) throw err;
    }
  }
  return import('./program.js');
}

let loading: Promise<ProgramModule> | undefined;
let loaded: ProgramModule | undefined;
const program = async (): Promise<ProgramModule> => (loaded ??= await (loading ??= load()));

// What cli.ts takes from the program (src/program.ts), from the program this loads.
export const ready: ProgramModule['ready'] = async () => {
  await program();
};
export const main: ProgramModule['main'] = async (...args) => (await program()).main(...args);
export const settleStdout: ProgramModule['settleStdout'] = async (...args) => (await program()).settleStdout(...args);
export const logsWritten: ProgramModule['logsWritten'] = async () => (await program()).logsWritten();
/** Synchronous (cli.ts calls it as the process exits): the program's once ready() has loaded it. */
export const closeHungUpTerminals: ProgramModule['closeHungUpTerminals'] = () => loaded?.closeHungUpTerminals();
