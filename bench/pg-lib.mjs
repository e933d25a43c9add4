// Helpers shared by the PostgreSQL benchmarks (bench/postgres.mjs, bench/pg-graphile.mjs):
// a throwaway server, a cronsafe config on it, and P `cronsafe run` processes of one run group.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { CLI, NOOP_MODULE, ROOT } from './lib.mjs';
import { binNodeFlags, run } from './rss.mjs';

export { CLI };

/** True when Debian's PostgreSQL binaries are installed (.ci/setup-postgres.sh). */
export function havePostgres() {
  const root = '/usr/lib/postgresql';
  return existsSync(root) && readdirSync(root).some((v) => existsSync(path.join(root, v, 'bin', 'initdb')));
}

export const freePort = () =>
  new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

const START_SCRIPT = path.join(ROOT, '.ci', 'start-postgres.sh');

/**
 * Start a throwaway server with .ci/start-postgres.sh (loopback, trust auth, fsync off
 * unless `settings` says otherwise, e.g. ['fsync=on']). Returns its URL, version, data
 * directory and a stop() that stops it by pid and removes the directory.
 */
export async function startServer(settings = []) {
  // Its own temp dir: the server runs as `postgres` when we are root and must reach it.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cronsafe-bench-pgdata-'));
  const port = await freePort();
  let url;
  try {
    url = execFileSync('bash', [START_SCRIPT, 'start', dir, String(port), ...settings], { encoding: 'utf8' }).trim();
  } catch (err) {
    spawnSync('bash', [START_SCRIPT, 'stop', dir], { stdio: 'ignore' });
    throw err;
  }
  const psql = (sql, db = 'postgres') => execFileSync('psql', [url.replace(/\/postgres$/, `/${db}`), '-Atc', sql], { encoding: 'utf8' }).trim();
  return {
    url,
    port,
    dir,
    psql,
    version: psql('SHOW server_version'),
    /** URL of database `db`, created first. */
    database(db) {
      psql(`CREATE DATABASE "${db}"`);
      return url.replace(/\/postgres$/, `/${db}`);
    },
    stop: () => spawnSync('bash', [START_SCRIPT, 'stop', dir], { stdio: 'ignore' }),
  };
}

/**
 * A cronsafe.yaml in `root` for the PostgreSQL (or SQLite) ledger `state`; `extra` are
 * further top-level YAML lines (e.g. ['concurrency: 8', 'queueSize: 256']).
 */
export function writePgConfig(root, src, state, { handler = NOOP_MODULE, extra = ['concurrency: 8', 'queueSize: 256'] } = {}) {
  const file = path.join(root, `cronsafe-${state.schema ?? 'sqlite'}.yaml`);
  const lines = ['name: bench', 'source:', `  directory: ${JSON.stringify(src)}`, 'handler:', `  module: ${JSON.stringify(handler)}`, 'state:'];
  for (const [k, v] of Object.entries(state)) lines.push(`  ${k}: ${JSON.stringify(v)}`);
  lines.push(...extra, 'log:', '  level: info', '');
  writeFileSync(file, lines.join('\n'));
  return file;
}

/**
 * P `cronsafe run` processes of one run group over `items` files. wall: first spawn to
 * last exit (process start-up included); pass: first `run started` to last `run finished`.
 * Checks that every process exited 0 and that the ledger says every item is done.
 */
export async function measureCronsafe(configFile, processes, group, items) {
  const argv = [process.execPath, ...binNodeFlags(), CLI, 'run', '-c', configFile];
  const env = { ...process.env, CRONSAFE_RUN_GROUP: group };
  const t0 = performance.now();
  const runs = await Promise.all(Array.from({ length: processes }, () => run(argv, 600_000, { env })));
  const wallMs = performance.now() - t0;
  const logs = runs.map((r, i) => {
    if (r.code !== 0) throw new Error(`process ${i} exited ${r.code ?? r.signal}\n${r.stderr.slice(-2000)}`);
    return r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
  });
  const finished = logs.map((lines) => lines.find((l) => l.msg === 'run finished'));
  const at = (msg, pick) => pick(...logs.map((lines) => Date.parse(lines.find((l) => l.msg === msg)?.time)));
  const passMs = at('run finished', Math.max) - at('run started', Math.min);
  const done = finished.reduce((n, f) => n + (f?.counts?.succeeded ?? 0), 0);
  if (done !== items) throw new Error(`expected ${items} items done across ${processes} process(es), got ${done}`);
  // Each process's `items` is a snapshot at its own end; ask the ledger once all are gone.
  const status = JSON.parse(execFileSync(process.execPath, [CLI, 'status', '-c', configFile, '--json'], { encoding: 'utf8' }));
  if (status.items.done !== items) throw new Error(`ledger says ${JSON.stringify(status.items)}`);
  return {
    processes,
    wallMs,
    items,
    itemsPerSec: (items * 1000) / wallMs,
    passMs,
    passItemsPerSec: (items * 1000) / passMs,
    perProcess: finished.map((f) => f.counts.succeeded),
    // What each process saw pending when it exited (a pass shared to its end leaves ~0).
    pendingAtExit: finished.map((f) => f.items?.pending ?? null),
  };
}

const TICK = 100; // USER_HZ: /proc/<pid>/stat times are in clock ticks

/** CPU seconds used by the server: the postmaster, its live children, and its reaped children. */
export function serverCpuSec(server) {
  const postmasterPid = Number(readFileSync(path.join(server.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
  const stat = (pid) => {
    try {
      const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      // fields after the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
      return { ppid: Number(f[1]), u: Number(f[11]), s: Number(f[12]), cu: Number(f[13]), cs: Number(f[14]) };
    } catch {
      return null;
    }
  };
  const pm = stat(postmasterPid);
  let ticks = pm.u + pm.s + pm.cu + pm.cs;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const st = stat(d);
    if (st && st.ppid === postmasterPid) ticks += st.u + st.s;
  }
  return ticks / TICK;
}
