/**
 * What start-up loads (docs/benchmarks.md, start-up): each of node:child_process,
 * node:crypto and node:assert costs 10-15 ms to load, and the commands a CronJob or a
 * script runs most often need none of them: `--version`, `validate`, `schedule --json`, and
 * a `run` that finds the lock held. Their loading is looked at, not timed.
 */
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, FIXTURES, ROOT, finished, spawnCliRaw, workspace, type Workspace } from '../helpers/cli.js';

const PRELOAD = path.join(FIXTURES, 'process/list-builtins.cjs');
const HEAVY = ['child_process', 'crypto', 'assert'];

async function builtinsOf(ws: Workspace, args: string[]): Promise<{ loaded: string[]; out: string; code: number | null }> {
  const file = path.join(ws.dir, `builtins-${args[0]}.txt`);
  const r = spawnCliRaw(process.execPath, ['-r', PRELOAD, CLI, ...args], { env: { BUILTINS_OUT: file } });
  const { code } = await r.exited;
  expect(code, r.stderr()).toBe(0);
  return { loaded: readFileSync(file, 'utf8').split('\n').filter(Boolean), out: r.stdout(), code };
}

describe('start-up loads only what the command needs', () => {
  let ws: Workspace;
  let release = () => {};

  beforeAll(async () => {
    ws = workspace({ handler: { command: ['true'] }, schedule: { cron: '*/5 * * * *', timeZone: 'Europe/London' } }, { 'a.scc': 'a' });
    mkdirSync(ws.state, { recursive: true });
  });
  afterAll(() => release());

  it('a run with a command handler loads node:child_process (the probe sees it)', async () => {
    const { loaded, out } = await builtinsOf(ws, ['run', '-c', ws.configPath]);
    expect(out).toContain('"outcome":"completed"');
    expect(loaded).toContain('child_process');
  });

  it('--version, validate and schedule --json load none of child_process, crypto, assert', async () => {
    for (const args of [['--version'], ['validate', '-c', ws.configPath], ['schedule', '--json', '-c', ws.configPath]]) {
      const { loaded } = await builtinsOf(ws, args);
      expect({ args, heavy: loaded.filter((m) => HEAVY.includes(m)) }).toEqual({ args, heavy: [] });
    }
  });

  it('validate with a module handler (it imports the module, as a run would) loads none of them either', async () => {
    // The config the bench measures: handler.module, no output directory.
    const mod = workspace({ handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') }, output: undefined, schedule: { cron: '*/5 * * * *', timeZone: 'Europe/London' } });
    const { loaded, out } = await builtinsOf(mod, ['validate', '-c', mod.configPath]);
    expect(out).toContain(': OK');
    expect(loaded.filter((m) => HEAVY.includes(m))).toEqual([]);
  });

  /** Another process holds the run lock (flock), as a run in progress would. */
  let held = false;
  async function holdRunLock(): Promise<void> {
    if (held) return;
    held = true;
    const holder = spawn(
      process.execPath,
      [
        '-e',
        `const fs=require('node:fs');const {flockSync}=require(${JSON.stringify(path.join(ROOT, 'node_modules', 'fs-ext'))});` +
          `flockSync(fs.openSync(${JSON.stringify(path.join(ws.state, 'cronsafe.lock'))},'a+'),'exnb');process.stdout.write('HELD\\n');setInterval(()=>{},1e9);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    release = () => holder.kill('SIGKILL');
    await new Promise<void>((resolve, reject) => {
      holder.on('exit', (code) => reject(new Error(`lock holder exited ${code}`)));
      holder.stdout.setEncoding('utf8').on('data', (d: string) => d.includes('HELD') && resolve());
    });
  }

  it('a run that finds the lock held loads none of them either', async () => {
    await holdRunLock();
    const file = path.join(ws.dir, 'builtins-skip.txt');
    const r = spawnCliRaw(process.execPath, ['-r', PRELOAD, CLI, 'run', '-c', ws.configPath], { env: { BUILTINS_OUT: file } });
    expect((await r.exited).code, r.stderr()).toBe(0);
    expect(finished(r)?.outcome).toBe('skipped-locked');
    const loaded = readFileSync(file, 'utf8').split('\n').filter(Boolean);
    expect(loaded.filter((m) => HEAVY.includes(m))).toEqual([]);
  });

  it('a run that finds the lock held makes no stdio stream: no node:net, node:tty or stream stack loaded', async () => {
    // Making process.stderr or process.stdout (or loading node:tty for isatty, node:net for
    // the log's socket) loads node:net and the stream stack, ~7 ms of CPU (docs/benchmarks.md,
    // start-up); the skip writes its log to fd 1 through its own writer and says nothing on
    // stderr. Before: cli.ts listened on process.stderr at once, read-yaml.ts imported
    // node:tty, log-sink.ts node:net. The probe is the main script here, not a preload; the
    // log goes to a file (a Node parent's stdout pipe is a socket, which the log's writer
    // makes non-blocking through node:net), stderr to a socket the run never writes to.
    await holdRunLock();
    const bin = path.join(ROOT, (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { bin: { cronsafe: string } }).bin.cronsafe);
    const file = path.join(ws.dir, 'builtins-skip-streams.txt');
    const logFile = path.join(ws.dir, 'skip-streams.log');
    const out = openSync(logFile, 'w');
    // With the bin's node flags, as `cronsafe` starts (plain `node` sets one through node:v8, which loads the stream stack).
    const flags = (/exec node(.*) "\$0"/.exec(readFileSync(bin, 'utf8'))?.[1] ?? '').trim().split(/\s+/).filter(Boolean);
    expect(flags).toContain('--heap-growing-percent=10');
    const child = spawn(process.execPath, [...flags, PRELOAD, bin, 'run', '-c', ws.configPath], { cwd: ROOT, env: { ...process.env, BUILTINS_OUT: file }, stdio: ['ignore', out, 'pipe'] });
    closeSync(out);
    let stderr = '';
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
    expect(code, stderr).toBe(0);
    expect(stderr).toBe('');
    expect(readFileSync(logFile, 'utf8')).toContain('"outcome":"skipped-locked"');
    const loaded = readFileSync(file, 'utf8').split('\n').filter(Boolean);
    expect(loaded, 'the probe lists what it loads').toContain('fs');
    expect(loaded.filter((m) => ['net', 'tty', 'stream'].includes(m))).toEqual([]);
  });

  it("the bin (package.json's, run as a program: its shebang) starts these commands without Node's ES module loader", async () => {
    // An ES module main costs ~10 ms of every start-up in Node's ES module loader
    // (docs/benchmarks.md, start-up); the bin is CommonJS, and the program runs from the code
    // cache's CommonJS script, so none of these loads an ES module. Before: dist/cli.js, an ES
    // module (package.json's type), was the bin.
    const bin = path.join(ROOT, (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { bin: { cronsafe: string } }).bin.cronsafe);
    await holdRunLock();
    for (const args of [['--version'], ['validate', '-c', ws.configPath], ['schedule', '--json', '-c', ws.configPath], ['run', '-c', ws.configPath]]) {
      const file = path.join(ws.dir, `internal-${args[0]}.txt`);
      // Through NODE_OPTIONS: the bin's first lines exec node themselves.
      const r = spawnCliRaw(bin, args, { env: { BUILTINS_OUT: file, BUILTINS_INTERNAL: '1', NODE_OPTIONS: `--require=${PRELOAD}` } });
      expect((await r.exited).code, r.stderr()).toBe(0);
      if (args[0] === 'run') expect(finished(r)?.outcome).toBe('skipped-locked');
      const loaded = readFileSync(file, 'utf8').split('\n').filter(Boolean);
      expect(loaded, 'the probe lists internal modules').toContain('internal/modules/cjs/loader');
      expect({ args, esm: loaded.filter((m) => m === 'internal/modules/esm/module_job') }).toEqual({ args, esm: [] });
    }
  });
});
