/** Real Prometheus parts for tests: exposition parsing, free ports, Pushgateway/Prometheus on loopback. */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parse the Prometheus text format (enough of it for our own and the Pushgateway's output). */
export function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) throw new Error(`unparseable exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[3] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[4]) });
  }
  return out;
}

/** Samples named `name` whose labels include `labels`. */
export function find(samples: Sample[], name: string, labels: Record<string, string> = {}): Sample[] {
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

/** The value of the one sample named `name` with these labels; fails when there is not exactly one. */
export function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = find(samples, name, labels);
  if (found.length !== 1) throw new Error(`expected one ${name}${JSON.stringify(labels)}, found ${found.length}`);
  return found[0]!.value;
}

/** A port nobody listens on right now (bind 0, read, release). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

/** Absolute path of an executable on PATH (or /usr/bin, /usr/local/bin), or undefined. */
export function binary(name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/bin', '/usr/local/bin'];
  return dirs.map((d) => path.join(d, name)).find((p) => existsSync(p));
}

export const PROMTOOL = binary('promtool');
export const PROMETHEUS = binary('prometheus');
export const PUSHGATEWAY = binary('prometheus-pushgateway') ?? binary('pushgateway');

/** Run promtool to completion. */
export function promtool(...args: string[]): { code: number | null; out: string } {
  // `test rules` takes ~8 s on a quiet 2-core machine and passed 30 s under a load of 19: cut
  // off, it returned no code and half its output, which read as the rules' failure.
  const r = spawnSync(PROMTOOL!, args, { encoding: 'utf8', timeout: PROMTOOL_TIMEOUT_MS });
  if (r.status === null) throw new Error(`promtool ${args.join(' ')} did not finish (${r.signal ?? r.error?.message}, limit ${PROMTOOL_TIMEOUT_MS / 1000} s): ${r.stdout}${r.stderr}`);
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

/** How long one promtool may take; tests that run it give themselves a multiple of this. */
export const PROMTOOL_TIMEOUT_MS = 150_000;

export interface Server {
  url: string;
  child: ChildProcess;
  log: () => string;
  /** SIGTERM by pid, SIGKILL after 5 s; resolves once it exited. */
  stop(): Promise<void>;
}

/**
 * Spawn a server, then poll `readyPath` until it answers 200 (or fail after timeoutMs, killing
 * it). `headers` go with each poll (an Authorization for a server behind basic auth).
 */
export async function startServer(bin: string, args: string[], port: number, readyPath: string, timeoutMs = 20_000, headers: Record<string, string> = {}): Promise<Server> {
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (log += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (log += c));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let gone = false;
  void exited.then(() => (gone = true));
  const server: Server = {
    url: `http://127.0.0.1:${port}`,
    child,
    log: () => log,
    async stop() {
      if (gone || child.pid === undefined) return;
      process.kill(child.pid, 'SIGTERM');
      const t = setTimeout(() => !gone && child.pid !== undefined && process.kill(child.pid, 'SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
    },
  };
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (gone) throw new Error(`${path.basename(bin)} exited before it was ready:\n${log}`);
    const ok = await fetch(server.url + readyPath, { headers }).then((r) => r.ok, () => false);
    if (ok) return server;
    if (Date.now() > deadline) {
      await server.stop();
      throw new Error(`${path.basename(bin)} not ready after ${timeoutMs} ms:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * A real Pushgateway on a free loopback port, in memory only: Debian's build persists to
 * /var/lib/prometheus/pushgateway.data by default, which would load every earlier test's
 * groups at start and share them between tests running at once.
 */
export async function startPushgateway(): Promise<Server> {
  const port = await freePort();
  return startServer(PUSHGATEWAY!, [`--web.listen-address=127.0.0.1:${port}`, '--persistence.file='], port, '/-/ready');
}

/** Scrape a URL's /metrics (a Pushgateway or our own endpoint) and parse it. */
export async function scrape(base: string): Promise<Sample[]> {
  const r = await fetch(`${base}/metrics`);
  if (!r.ok) throw new Error(`GET ${base}/metrics: ${r.status}`);
  return parseMetrics(await r.text());
}
