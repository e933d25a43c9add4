/**
 * A real PostgreSQL server for tests, started from Debian's binaries into a temp
 * directory on a free port (loopback only, socket in the same directory) and stopped
 * by pg_ctl, then by pid. initdb refuses to run as root, so as root the data directory
 * belongs to the `postgres` user and the binaries run through `su postgres`.
 *
 *   const pg = await startPostgres();      // beforeAll
 *   const url = await pg.createDatabase('t1');
 *   await pg.stop();                       // afterAll
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { freePort } from './prom.js';

/** The newest installed PostgreSQL's bin directory (never a hard-coded version), or undefined. */
export const PG_BIN: string | undefined = (() => {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(path.join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : path.join(root, versions[0], 'bin');
})();

const isRoot = process.getuid?.() === 0;
const postgresUser = (): { uid: number; gid: number } | undefined => {
  const line = readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('postgres:'));
  const [, , uid, gid] = line?.split(':') ?? [];
  return uid === undefined ? undefined : { uid: Number(uid), gid: Number(gid) };
};

/** Why PostgreSQL tests cannot run here, or undefined when they can (describe.skipIf). */
export const PG_SKIP_REASON: string | undefined =
  PG_BIN === undefined
    ? 'PostgreSQL binaries not found under /usr/lib/postgresql (run .ci/setup-postgres.sh)'
    : isRoot && postgresUser() === undefined
      ? 'running as root and there is no postgres user to run initdb as'
      : undefined;
if (PG_SKIP_REASON) console.warn(`[postgres tests skipped] ${PG_SKIP_REASON}`);

export interface PgServer {
  port: number;
  dir: string;
  /** A URL for database `db` as the superuser `postgres` (trust auth on loopback). */
  url(db?: string): string;
  /** CREATE DATABASE and return its URL. */
  createDatabase(name: string): Promise<string>;
  /** Run SQL as the superuser on `db` (default `postgres`). */
  admin<R extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, values?: unknown[], db?: string): Promise<R[]>;
  /** `pg_ctl restart -m fast`: every session is cut, the server is back when it resolves. */
  restart(): Promise<void>;
  /**
   * `pg_ctl restart -m immediate`: a crash and its recovery. WAL still in the server's
   * buffers is gone, so asynchronous commits of the last moments are forgotten.
   */
  crash(): Promise<void>;
  /** Stop without restarting (`-m fast`); start() brings it back on the same port. */
  halt(): Promise<void>;
  start(): Promise<void>;
  /** Stop (fast, then the postmaster's pid with SIGKILL) and remove the directory. Idempotent. */
  stop(): Promise<void>;
}

/** Run a PostgreSQL binary, as `postgres` when we are root. Throws with its output on failure. */
function pgRun(bin: string, args: string[], timeoutMs = 30_000): string {
  const exe = path.join(PG_BIN ?? '', bin);
  const quoted = [exe, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(' ');
  const [cmd, argv] = isRoot ? ['su', ['postgres', '-s', '/bin/sh', '-c', quoted]] : ['/bin/sh', ['-c', quoted]];
  const r = spawnSync(cmd, argv, { encoding: 'utf8', timeout: timeoutMs });
  if (r.status !== 0) throw new Error(`${bin} ${args.join(' ')} failed (${r.status ?? r.signal}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/** A fresh cluster in `data`. --no-sync (and fsync=off): a test server does not need to survive a power cut. */
function initdb(data: string): void {
  pgRun('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
}

/**
 * The data directory of a cluster just made by initdb, made once per test run (the suite's
 * ~80 servers each ran initdb before: about a second of CPU each, several seconds of wall on
 * a loaded machine) and only ever copied, never started. It lives in the run's temporary
 * directory (tmp-root.ts), which is removed at the end of the run; outside one (no such
 * directory: a run without the global setup), undefined, and each server runs its own initdb.
 * Workers that need it at the same time each make one; the first rename wins and the others
 * are removed, so a reader sees a whole template or none.
 */
let template: string | undefined;
function clusterTemplate(): string | undefined {
  if (template !== undefined) return template;
  const root = tmpdir();
  if (!path.basename(root).startsWith('cronsafe-tests-')) return undefined;
  const final = path.join(root, `cronsafe-pg-template-${path.basename(path.dirname(PG_BIN ?? ''))}`);
  if (!existsSync(path.join(final, 'PG_VERSION'))) {
    const own = mkdtempSync(path.join(root, 'cronsafe-pg-template-new-'));
    const pgUser = postgresUser();
    if (isRoot && pgUser) chownSync(own, pgUser.uid, pgUser.gid);
    initdb(path.join(own, 'data'));
    try {
      renameSync(path.join(own, 'data'), final);
    } catch (e) {
      // Another worker's came first (a non-empty directory is not replaced): use that one.
      if (!existsSync(path.join(final, 'PG_VERSION'))) throw e;
    }
    rmSync(own, { recursive: true, force: true });
  }
  template = final;
  return template;
}

export async function startPostgres(opts: { settings?: Record<string, string> } = {}): Promise<PgServer> {
  if (PG_SKIP_REASON) throw new Error(PG_SKIP_REASON);
  const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-pg-'));
  const pgUser = postgresUser();
  if (isRoot && pgUser) chownSync(dir, pgUser.uid, pgUser.gid);
  const data = path.join(dir, 'data');
  const template = clusterTemplate();
  if (template === undefined) initdb(data);
  // A copy of the run's fresh cluster: each server still has its own (tests crash, restart
  // and fill theirs), without an initdb of its own (cp -a keeps the postgres owner and modes).
  else execFileSync('cp', ['-a', '--', template, data]);
  const port = await freePort();
  const settings = { listen_addresses: '127.0.0.1', fsync: 'off', full_page_writes: 'off', max_connections: '200', ...opts.settings };
  const o = [`-p ${port}`, `-k ${dir}`, ...Object.entries(settings).map(([k, v]) => `-c ${k}=${v}`)].join(' ');
  const ctl = (...args: string[]) => pgRun('pg_ctl', ['-D', data, '-l', path.join(dir, 'log'), ...args]);
  const start = async (): Promise<void> => void ctl('-o', o, '-w', '-t', '30', 'start');
  await start();

  const url = (db = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${db}`;
  const admin: PgServer['admin'] = async (sql, values, db) => {
    const c = new pg.Client({ connectionString: url(db) });
    await c.connect();
    try {
      return (await c.query(sql, values)).rows;
    } finally {
      await c.end();
    }
  };
  let stopped = false;
  return {
    port,
    dir,
    url,
    admin,
    async createDatabase(name) {
      await admin(`CREATE DATABASE "${name}"`);
      return url(name);
    },
    async restart() {
      ctl('-o', o, '-m', 'fast', '-w', '-t', '30', 'restart');
    },
    async crash() {
      ctl('-o', o, '-m', 'immediate', '-w', '-t', '60', 'restart');
    },
    async halt() {
      ctl('-m', 'fast', '-w', '-t', '30', 'stop');
    },
    start,
    async stop() {
      if (stopped) return;
      stopped = true;
      try {
        ctl('-m', 'fast', '-w', '-t', '10', 'stop');
      } catch {
        const pidFile = path.join(data, 'postmaster.pid');
        const pid = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').split('\n')[0]) : NaN;
        if (Number.isInteger(pid) && pid > 0) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            /* already gone */
          }
        }
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Run `psql -c` against a server (for debugging a failing test by hand). */
export function psql(server: PgServer, sql: string, db = 'postgres'): string {
  return execFileSync(path.join(PG_BIN ?? '', 'psql'), ['-h', '127.0.0.1', '-p', String(server.port), '-U', 'postgres', '-d', db, '-Atc', sql], {
    encoding: 'utf8',
  });
}

/**
 * A server for the tests of one describe block, with one database made in it: started in
 * beforeAll, stopped in afterAll. Read `server` and `url` inside the tests.
 */
export function usePostgresDatabase(name: string, timeoutMs?: number): { readonly server: PgServer; readonly url: string } {
  let server: PgServer | undefined;
  let url = '';
  beforeAll(async () => {
    server = await startPostgres();
    url = await server.createDatabase(name);
  }, timeoutMs);
  afterAll(async () => {
    await server?.stop();
  });
  return {
    get server() {
      if (!server) throw new Error('usePostgresDatabase: the server is not started yet (read it inside a test)');
      return server;
    },
    get url() {
      return url;
    },
  };
}

/**
 * A job on PostgreSQL (`url`) in workspace `dir` whose one item's handler touches `started`
 * and then runs until the test writes `go`. The drain's grace is long (300 s), so that a
 * stopped pass is ended by the ledger's retries (30 s), not by the drain's last resort.
 * `extra`: more config lines (a schedule). `then`: shell run after `go` (the handler's
 * ending: `exit 1`); `drain`: another drain line. Returns the two files.
 */
export function writeGatedJob(
  ws: { dir: string; configPath: string; source: string; out: string; state: string },
  url: string,
  extra: string[] = [],
  { then, drain = 'drain: {gracePeriodSeconds: 300, marginSeconds: 5}' }: { then?: string; drain?: string } = {},
): { started: string; go: string } {
  const started = path.join(ws.dir, 'started');
  const go = path.join(ws.dir, 'go');
  writeFileSync(
    ws.configPath,
    [
      'name: test-job',
      `source: {directory: ${ws.source}}`,
      `output: {directory: ${ws.out}}`,
      `state: {postgres: "${url}"}`,
      `lock: {path: ${path.join(ws.state, 'cronsafe.lock')}}`,
      `handler: {command: ["/bin/sh", "-c", "touch '${started}'; while [ ! -e '${go}' ]; do sleep 0.05; done${then ? `; ${then}` : ''}"]}`,
      drain,
      ...extra,
    ].join('\n'),
  );
  return { started, go };
}

/**
 * A ledger as the cronsafe before migration 007 left it (schema 6): 007's check of
 * items.state as it was before, and its row gone from schema_migrations. The next start
 * migrates it, taking an ACCESS EXCLUSIVE lock on items.
 */
export async function asSchema6(server: PgServer, db: string, schema: string): Promise<void> {
  await server.admin(
    `ALTER TABLE ${schema}.items DROP CONSTRAINT items_state_check, ADD CONSTRAINT items_state_check CHECK (state IN ('pending', 'claimed', 'done', 'dead'));
     DELETE FROM ${schema}.schema_migrations WHERE version = 7`,
    [],
    db,
  );
}

/**
 * A report left open in a transaction on `<schema>.items` (`BEGIN; SELECT ...` in psql, then
 * idle): it holds ACCESS SHARE on items until the test ends it. Its session's pid too.
 */
export async function openReport(server: PgServer, db: string, schema: string): Promise<{ reader: pg.Client; pid: number }> {
  const reader = new pg.Client({ connectionString: server.url(db), application_name: 'report-psql' });
  await reader.connect();
  await reader.query('BEGIN');
  await reader.query(`SELECT * FROM ${schema}.items LIMIT 1`);
  const [{ pid } = { pid: 0 }] = (await reader.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows;
  return { reader, pid };
}
