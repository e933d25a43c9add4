import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CLI = path.join(ROOT, 'dist/cli.js');
export const FIXTURES = path.join(ROOT, 'test/fixtures');

export interface Workspace {
  dir: string;
  source: string;
  out: string;
  state: string;
  configPath: string;
  db: string;
}

/** A fresh directory per test: source/, out/, state/, cronsafe.yaml. */
export function workspace(config: Record<string, unknown>, files: Record<string, string | Buffer> = {}): Workspace {
  const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-proc-'));
  const ws: Workspace = {
    dir,
    source: path.join(dir, 'source'),
    out: path.join(dir, 'out'),
    state: path.join(dir, 'state'),
    configPath: path.join(dir, 'cronsafe.yaml'),
    db: path.join(dir, 'state', 'cronsafe.db'),
  };
  mkdirSync(ws.source, { recursive: true });
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(ws.source, name)), { recursive: true });
    writeFileSync(path.join(ws.source, name), content);
  }
  const full = {
    name: 'test-job',
    source: { directory: ws.source },
    output: { directory: ws.out },
    state: { sqlite: ws.db },
    lock: { path: path.join(ws.state, 'cronsafe.lock') },
    log: { level: 'debug' },
    ...config,
  };
  writeFileSync(ws.configPath, YAML.stringify(full));
  return ws;
}

/** Merge `patch` into the workspace's config file (top-level keys replace); for paths known only once it exists. */
export function configure(ws: Workspace, patch: Record<string, unknown>): void {
  const current = YAML.parse(readFileSync(ws.configPath, 'utf8')) as Record<string, unknown>;
  writeFileSync(ws.configPath, YAML.stringify({ ...current, ...patch }));
}

export interface LogLine {
  level: string;
  msg: string;
  [k: string]: unknown;
}

export interface Running {
  child: ChildProcess;
  lines: LogLine[];
  stderr: () => string;
  stdout: () => string;
  /** Resolves with the first log line matching, or rejects after timeoutMs. */
  waitFor(pred: (l: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Spawn the built CLI with a hard timeout: a hung child is SIGKILLed, never left behind. */
/** Options of a CLI spawn. `uid`/`gid`: run it as another user (only as root: permission tests). */
export interface SpawnOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  timeoutMs?: number;
  uid?: number;
  gid?: number;
}

export function spawnCli(args: string[], opts: SpawnOptions = {}): Running {
  return spawnCliRaw(process.execPath, [CLI, ...args], opts);
}

/** Spawn any command that runs the CLI (e.g. under faketime), parsing its JSON log lines. */
export function spawnCliRaw(command: string, args: string[], opts: SpawnOptions = {}): Running {
  const child = spawn(command, args, {
    cwd: opts.cwd ?? ROOT,
    env: { ...process.env, NO_COLOR: '1', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(opts.uid !== undefined ? { uid: opts.uid } : {}),
    ...(opts.gid !== undefined ? { gid: opts.gid } : {}),
  });
  const lines: LogLine[] = [];
  const waiters: Array<{ pred: (l: LogLine) => boolean; resolve: (l: LogLine) => void }> = [];
  let buf = '';
  let err = '';
  let raw = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    raw += chunk;
    buf += chunk;
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const text = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      let line: LogLine;
      try {
        line = JSON.parse(text) as LogLine;
      } catch {
        line = { level: 'raw', msg: text };
      }
      lines.push(line);
      for (const w of [...waiters]) {
        if (w.pred(line)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    }
  });
  child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
  const hard = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    // 'exit' can come before the last of the child's output has been read: resolve once its
    // stdout and stderr have closed too ('close'), or 2 s after the exit when a grandchild
    // (a helper the run spawned and a SIGKILL orphaned) still holds them open.
    child.on('exit', (code, signal) => {
      clearTimeout(hard);
      const late = setTimeout(() => resolve({ code, signal }), 2_000);
      child.once('close', () => {
        clearTimeout(late);
        resolve({ code, signal });
      });
    });
  });
  return {
    child,
    lines,
    stderr: () => err,
    stdout: () => raw,
    exited,
    waitFor(pred, timeoutMs = 20_000) {
      const found = lines.find(pred);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`timed out waiting for a log line; got:\n${lines.map((l) => l.msg).join('\n')}\nstderr: ${err}`)), timeoutMs);
        const w = { pred, resolve: (l: LogLine) => (clearTimeout(t), resolve(l)) };
        waiters.push(w);
        void exited.then(() => {
          if (waiters.includes(w)) {
            clearTimeout(t);
            reject(new Error(`process exited before the awaited log line; got:\n${lines.map((l) => l.msg).join('\n')}\nstderr: ${err}`));
          }
        });
      });
    },
  };
}

/** Run the CLI to completion. */
export async function runCli(args: string[], opts: SpawnOptions = {}) {
  const r = spawnCli(args, opts);
  const { code, signal } = await r.exited;
  return { code, signal, lines: r.lines, stderr: r.stderr(), stdout: r.stdout() };
}

export const finished = (r: { lines: LogLine[] }) => r.lines.find((l) => l.msg === 'run finished');

/** `cronsafe status --json` parsed. */
/** A config file `text` in a new temp directory that has an empty `source/` beside it; its path. */
export function configFile(text: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-cfg-'));
  mkdirSync(path.join(dir, 'source'));
  const file = path.join(dir, 'cronsafe.yaml');
  writeFileSync(file, text);
  return file;
}

export async function statusJson(configPath: string): Promise<{ items: Record<string, number>; [k: string]: unknown }> {
  const r = await runCli(['status', '-c', configPath, '--json']);
  if (r.code !== 0) throw new Error(`status failed (${r.code}): ${r.stderr}`);
  return JSON.parse(r.stdout) as { items: Record<string, number> };
}

/**
 * The CLI with its stdout on a pipe whose reader is gone: the read end closed at once, and the
 * CLI needs far longer than that to start and write (every write is EPIPE).
 */
export async function intoClosedPipe(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const cli = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  cli.stdout.destroy();
  let stderr = '';
  cli.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const hard = setTimeout(() => cli.kill('SIGKILL'), 120_000);
  const code = await new Promise<number | null>((resolve) => cli.on('exit', (c) => resolve(c)));
  clearTimeout(hard);
  return { code, stderr };
}

/** The daemon's line when the growth trigger starts a pass. */
export const GROWTH_PASS = 'daemon: the source has grown since the last completed pass; starting a pass';

/** The `run finished` line of the first pass the growth trigger starts from now on. */
export function growthPassFinished(daemon: Running, timeoutMs = 30_000): Promise<LogLine> {
  let grew = false;
  return daemon.waitFor((l) => {
    if (l.msg === GROWTH_PASS) grew = true;
    return grew && l.msg === 'run finished';
  }, timeoutMs);
}
