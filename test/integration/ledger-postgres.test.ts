import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimBatchQuery } from '../../src/ledger/postgres/claim.js';
import { insertNewQuery, knownQuery, touchKnownQuery } from '../../src/ledger/postgres/discover.js';
import { execOn, PostgresExecutor, type Exec } from '../../src/ledger/postgres/connection.js';
import { migrate, migrationsTableQuery } from '../../src/ledger/postgres/migrate.js';
import { checkReadableSchema } from '../../src/ledger/postgres/read.js';
import { NoLedgerYet } from '../../src/ledger/no-ledger.js';
import type { Claim } from '../../src/ledger/types.js';
import { describeTarget, isTransient, scrub } from '../../src/ledger/postgres/errors.js';
import { claimColumns, completeQuery, failClaims, forgetQuery, releaseQuery } from '../../src/ledger/postgres/finish.js';
import { openPostgresLedger, type PostgresLedger } from '../../src/ledger/postgres/index.js';
import { runGroup, tryPostgresRunLock } from '../../src/ledger/postgres/run-lock.js';
import { MIGRATIONS } from '../../src/ledger/postgres/migrations/index.js';
import { ident, numberArray, textArray, type Query } from '../../src/ledger/postgres/query.js';
import { loadConfig } from '../../src/config/load.js';
import { ledgerContract } from '../contract/ledger-contract.js';
import { storeContract } from '../contract/store-contract.js';
import { workspace } from '../helpers/cli.js';
import { discoverAndClaim } from '../contract/ledger-fixtures.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';
import { freePort } from '../helpers/prom.js';

const T0 = 1_700_000_000_000;
const RETRY = { maxAttempts: 3, backoffMs: 1000, backoffMaxMs: 8000 };
const opts = (owner: string, over: Record<string, unknown> = {}) => ({ owner, runId: `run-${owner}`, now: T0, leaseMs: 60_000, ...over });

describe('PostgreSQL SQL builders (no database)', () => {
  it('bind every value; only the checked schema name is spliced into the text', () => {
    const q = claimBatchQuery('cronsafe', ["a'; DROP TABLE x; --"], { owner: 'o', now: 1, leaseUntil: 2 });
    expect(q.text).toMatch(/FOR UPDATE OF it SKIP LOCKED/);
    expect(q.text).not.toContain('DROP');
    expect(q.values).toEqual([["a'; DROP TABLE x; --"], 'o', 1, 2]);
    expect(completeQuery('s', { ids: ['x'], owners: ['evil'], attempts: [1] }, 5).text).not.toContain('evil');
    const batch = { ids: ['b', 'a'], sizes: [1, null], mtimes: [null, 2.5] };
    expect(insertNewQuery('s', batch, 'r', 9).text).toMatch(/ON CONFLICT \(id\) DO NOTHING/);
    // Discovery never waits for rows other pods hold, and leaves unchanged rows alone.
    expect(touchKnownQuery('s', batch, 'r', 9).text).toMatch(/FOR UPDATE OF it SKIP LOCKED/);
    expect(touchKnownQuery('s', batch, 'r', 9).text).toMatch(/IS DISTINCT FROM/);
    expect(knownQuery('s', batch, 'r', 9).text).toMatch(/FOR UPDATE SKIP LOCKED/);
    expect(knownQuery('s', batch, 'r', 9).text).toMatch(/IS DISTINCT FROM/);
    for (const bad of ['Cronsafe', '1x', 'a"b', 'a-b', '', 'x'.repeat(64)]) expect(() => ident(bad)).toThrow(/schema name/);
  });

  it('classifies transient errors: connection loss, shutdown, deadlock, serialization', () => {
    for (const code of ['57P01', '40001', '40P01', '55P03', '08006', '08001', 'ECONNREFUSED', 'ECONNRESET']) {
      expect(isTransient(Object.assign(new Error('x'), { code })), code).toBe(true);
    }
    expect(isTransient(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isTransient(new AggregateError([Object.assign(new Error(), { code: 'ECONNREFUSED' })]))).toBe(true);
    for (const code of ['23505', '42P01', '22P02', undefined]) expect(isTransient(Object.assign(new Error('x'), { code }))).toBe(false);
    // A Unix socket whose server is not started: no socket file. A missing TLS file is no outage.
    expect(isTransient(Object.assign(new Error('connect ENOENT /run/postgresql/.s.PGSQL.5432'), { code: 'ENOENT', syscall: 'connect' }))).toBe(true);
    expect(isTransient(Object.assign(new Error("ENOENT: no such file or directory, open '/x/ca.pem'"), { code: 'ENOENT', syscall: 'open' }))).toBe(false);
  });

  it('names host, database and schema in messages, never the password', () => {
    const url = 'postgres://app:p%40ss%3Aw0rd@db.example:6543/jobs?sslmode=require';
    expect(describeTarget(url, 'cs')).toBe('db.example:6543/jobs as app (schema cs)');
    const msg = scrub(`failed: ${url} and p@ss:w0rd and p%40ss%3Aw0rd`, url);
    expect(msg).not.toMatch(/w0rd/);
    // A "%" that starts no escape (`jobs%zz`) named the redacted URL instead of host:port/db.
    expect(describeTarget('postgres://app:pw0rd@db.example:6543/jobs%zz', 'cs')).toBe('db.example:6543/jobs%zz as app (schema cs)');
    expect(describeTarget('postgres://a%zzp:pw0rd@db.example:6543/jo%2Fbs', 'cs')).toBe('db.example:6543/jo/bs as a%zzp (schema cs)');
  });

  it("names the user and port the driver connects with: the URL's ?user= and ?port= win, as in pg; ?password= is scrubbed too", () => {
    // pg-connection-string lets query parameters win over the authority's user and port.
    expect(describeTarget('postgres://app@db.example:5432/jobs?user=etl&port=6543', 'cs')).toBe('db.example:6543/jobs as etl (schema cs)');
    expect(describeTarget('postgres:///jobs?host=/run/pg&user=etl', 'cs')).toBe('/run/pg:5432/jobs as etl (schema cs)');
    // What the URL leaves out, the driver takes from the environment: so does the message.
    const env = { PGHOST: 'db.internal', PGPORT: '6432', PGUSER: 'etl', PGDATABASE: 'jobs' };
    expect(describeTarget('postgres://app@/jobs', 'cs', env)).toBe('db.internal:6432/jobs as app (schema cs)');
    expect(describeTarget('postgresql://app:pw@/jobs', 'cs', env)).toBe('db.internal:6432/jobs as app (schema cs)');
    expect(describeTarget('postgres://db.example/x', 'cs', env)).toBe('db.example:6432/x as etl (schema cs)');
    expect(describeTarget('postgres://', 'cs', env)).toBe('db.internal:6432/jobs as etl (schema cs)');
    expect(describeTarget('postgres://app@db.example:5433/x', 'cs', env)).toBe('db.example:5433/x as app (schema cs)');
    const url = 'postgres://app@db.example/jobs?password=hunter2%21x';
    expect(scrub('failed: hunter2!x and hunter2%21x', url)).toBe('failed: *** and ***');
  });

  it('takes state.schema from the config, as a checked identifier', () => {
    const file = (state: string) => {
      const f = path.join(mkdtempSync(path.join(tmpdir(), 'cronsafe-pgcfg-')), 'cronsafe.yaml');
      writeFileSync(f, `name: j\nsource: {directory: .}\nhandler: {command: ["true"]}\nstate: ${state}\n`);
      return f;
    };
    const url = 'postgres://u:pw@db/x';
    expect(loadConfig(file(`{postgres: "${url}", schema: qc_ledger}`), { checkPaths: false }).state).toEqual({ postgres: url, schema: 'qc_ledger' });
    expect(loadConfig(file(`{postgres: "${url}"}`), { checkPaths: false }).state).toEqual({ postgres: url }); // default: cronsafe
    expect(() => loadConfig(file(`{postgres: "${url}", schema: "x; DROP"}`), { checkPaths: false })).toThrow(/state\.schema: expected a lowercase SQL identifier/);
  });

  it('lets the pods of one Job share a pass, and nobody else', () => {
    const at = new Date('2026-01-01T00:05:00Z');
    expect(runGroup({ CRONSAFE_RUN_GROUP: 'g', JOB_NAME: 'j' }, at, 'o')).toBe('group:g');
    expect(runGroup({ CRONSAFE_JOB_NAME: 'nightly-29000000', JOB_NAME: 'x' }, at, 'o')).toBe('job:nightly-29000000');
    expect(runGroup({ JOB_NAME: 'nightly-29000000' }, at, 'o')).toBe('job:nightly-29000000');
    expect(runGroup({}, at, 'o')).toBe('occurrence:2026-01-01T00:05:00.000Z');
    expect(runGroup({}, undefined, 'host:1:r')).toBe('run:host:1:r');
  });
});

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL ledger', () => {
  let server: PgServer;
  let url = '';
  let n = 0;
  const fresh = (over: Partial<Parameters<typeof openPostgresLedger>[0]> = {}) => openPostgresLedger({ url, schema: `t_${++n}`, ...over });

  beforeAll(async () => {
    server = await startPostgres();
    url = await server.createDatabase('ledger');
  });
  afterAll(async () => {
    await server?.stop();
  });

  // A schema per test: the same database, nothing shared between tests.
  ledgerContract('postgres', () => fresh());
  storeContract('postgres', () => loadConfig(workspace({ handler: { command: ['true'] }, state: { postgres: url, schema: `t_${++n}` } }).configPath), { shared: true });

  it("takes libpq's socket form with userinfo and no host (postgresql://user:pw@/db?host=/dir), which WHATWG URLs refuse", async () => {
    const socketUrl = `postgresql://postgres:unused-pw@/ledger?host=${encodeURIComponent(server.dir)}&port=${server.port}`;
    const config = loadConfig(workspace({ handler: { command: ['true'] }, state: { postgres: socketUrl, schema: `t_${++n}` } }).configPath);
    expect(config.state.postgres).toBe(socketUrl);
    expect(describeTarget(socketUrl, 'cs')).toBe(`${server.dir}:${server.port}/ledger as postgres (schema cs)`);
    expect(scrub('failed: unused-pw', socketUrl)).toBe('failed: ***');
    const ledger = await openPostgresLedger({ url: socketUrl, schema: `t_${++n}` });
    try {
      expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 0, dead: 0 });
    } finally {
      await ledger.close();
    }
  });

  // The claim statements send their arrays as text they build themselves (query.ts), not through pg's.
  it('sends any id and number array as the server reads what pg would send', async () => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      const ids = ['a', '', 'NULL', 'null', '"', '\\', '\\"', 'x,y', '{z}', ' lead', 'trail ', 'tab\there', 'new\nline', 'é 日本 🎉', "o'q", 'a"b\\c"d', 'x'.repeat(4096)];
      const nums = [0, -1, 1.5, 1_700_000_000_000.25, null, 2 ** 53, 1e21, -0.000001];
      for (const a of [ids, [], ['one']]) {
        const [row] = (await c.query<{ a: string[]; b: string[] }>('SELECT $1::text[] AS a, $2::text[] AS b', [textArray(a), a])).rows;
        expect(row!.a).toEqual(a);
        expect(row!.a).toEqual(row!.b);
      }
      const [row] = (await c.query<{ a: number[]; b: number[]; i: number[] }>('SELECT $1::float8[] AS a, $2::float8[] AS b, $3::bigint[] AS i', [numberArray(nums), nums, numberArray([1, null, 2 ** 53])])).rows;
      expect(row!.a).toEqual(row!.b);
      expect(row!.i.map(String)).toEqual(['1', 'null', String(2 ** 53)]);
    } finally {
      await c.end();
    }
  });

  it("keeps its sessions' settings when the URL has its own `options` (pg lets the URL's win)", async () => {
    // A provider's endpoint id or a search_path in `options=`: both must reach the server.
    const withOptions = `${url}?options=${encodeURIComponent('-c work_mem=8MB')}`;
    const settings = `SELECT current_setting('work_mem') AS wm, current_setting('enable_seqscan') AS es,
      current_setting('synchronous_commit') AS sc, current_setting('default_transaction_read_only') AS ro`;
    const ex = new PostgresExecutor({ url: withOptions, schema: 'unused' });
    const readOnly = new PostgresExecutor({ url: withOptions, schema: 'unused', readOnly: true });
    try {
      expect(await ex.on('claims', 'read settings', { name: 'settings', text: settings, values: [] })).toEqual([{ wm: '8MB', es: 'off', sc: 'off', ro: 'off' }]);
      expect(await readOnly.query('read settings', { text: settings, values: [] })).toEqual([{ wm: '8MB', es: 'on', sc: 'on', ro: 'on' }]);
    } finally {
      await ex.close();
      await readOnly.close();
    }
  });

  it('takes the last of repeated `options=` in the URL, as pg and libpq do', async () => {
    const twice = `${url}?options=${encodeURIComponent('-c work_mem=8MB')}&options=${encodeURIComponent('-c work_mem=16MB')}`;
    const ex = new PostgresExecutor({ url: twice, schema: 'unused' });
    try {
      const read = { name: 'work_mem', text: `SELECT current_setting('work_mem') AS wm`, values: [] };
      expect(await ex.query('read work_mem', read)).toEqual([{ wm: '16MB' }]);
      expect(await ex.on('claims', 'read work_mem', read)).toEqual([{ wm: '16MB' }]);
    } finally {
      await ex.close();
    }
  });

  it('reads `options=` without the URL\'s fragment, as pg reads the rest of the URL', async () => {
    const withFragment = `${url}?options=${encodeURIComponent('-c work_mem=8MB')}#primary`;
    const ex = new PostgresExecutor({ url: withFragment, schema: 'unused', readOnly: true });
    try {
      expect(await ex.query('read work_mem', { text: `SELECT current_setting('work_mem') AS wm`, values: [] })).toEqual([{ wm: '8MB' }]);
    } finally {
      await ex.close();
    }
  });

  it('leaves the rest of the URL as written when it takes `options=` out (pg reads a raw % or space in a password its own way)', async () => {
    // pg percent-encodes a URL with a raw space or a stray % once more: a re-encoded `host=%2F...` became a host name.
    const socket = `postgres://postgres:50%off@/ledger?host=${server.dir}&port=${server.port}&options=${encodeURIComponent('-c work_mem=8MB')}`;
    const ex = new PostgresExecutor({ url: socket, schema: 'unused', readOnly: true, retryBudgetMs: 2_000 });
    try {
      expect(await ex.query('read work_mem', { text: `SELECT current_setting('work_mem') AS wm`, values: [] })).toEqual([{ wm: '8MB' }]);
    } finally {
      await ex.close();
    }
  });

  it("keeps PGOPTIONS on every session, its settings' too (pg reads it only when no options are given)", async () => {
    const before = process.env.PGOPTIONS;
    process.env.PGOPTIONS = '-c work_mem=8MB';
    const settings = `SELECT current_setting('work_mem') AS wm, current_setting('enable_seqscan') AS es, current_setting('default_transaction_read_only') AS ro`;
    const ex = new PostgresExecutor({ url, schema: 'unused' });
    const readOnly = new PostgresExecutor({ url, schema: 'unused', readOnly: true });
    try {
      expect(await ex.query('read settings', { text: settings, values: [] })).toEqual([{ wm: '8MB', es: 'on', ro: 'off' }]);
      expect(await ex.on('claims', 'read settings', { name: 'settings', text: settings, values: [] })).toEqual([{ wm: '8MB', es: 'off', ro: 'off' }]);
      expect(await readOnly.query('read settings', { text: settings, values: [] })).toEqual([{ wm: '8MB', es: 'on', ro: 'on' }]);
    } finally {
      if (before === undefined) delete process.env.PGOPTIONS;
      else process.env.PGOPTIONS = before;
      await ex.close();
      await readOnly.close();
    }
  });

  it('works for a role that may not read pg_settings (a DBA revoked it from PUBLIC)', async () => {
    const dbUrl = await server.createDatabase('nosettings');
    await server.admin(`REVOKE SELECT ON pg_catalog.pg_settings FROM PUBLIC`, [], 'nosettings');
    await server.admin(`CREATE ROLE cs_nosettings LOGIN`);
    await server.admin(`GRANT CREATE ON DATABASE nosettings TO cs_nosettings`);
    const roleUrl = dbUrl.replace('//postgres@', '//cs_nosettings@');
    const ledger = await openPostgresLedger({ url: roleUrl, schema: 'cs', retryBudgetMs: 2_000 });
    try {
      const lock = await tryPostgresRunLock({ url: roleUrl, schema: 'cs', name: 'job', group: 'g', owner: 'o' });
      expect(lock?.joined).toBe(false);
      await lock!.release();
      expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 0, dead: 0 });
    } finally {
      await ledger.close();
    }
    const reader = new PostgresExecutor({ url: roleUrl, schema: 'cs', readOnly: true });
    try {
      const check = `SELECT current_setting('client_connection_check_interval') AS cci`;
      expect(await reader.query('read the check', { text: check, values: [] })).toEqual([{ cci: '1s' }]);
    } finally {
      await reader.close();
    }
  });

  describe('many pods on one ledger', () => {
    it('never hands one item to two concurrent claimers (SKIP LOCKED, idempotent upsert)', async () => {
      const schema = `t_${++n}`;
      const [a, b, c] = await Promise.all([1, 2, 3].map(() => openPostgresLedger({ url, schema })));
      const ids = Array.from({ length: 3000 }, (_, i) => `item-${i}`);
      const claimer = async (ledger: PostgresLedger, owner: string) => {
        const got: string[] = [];
        for (let i = 0; i < ids.length; i += 100) {
          const batch = ids.slice(i, i + 100).map((id) => ({ id }));
          got.push(...(await discoverAndClaim(ledger, batch, opts(owner, { limit: 60 }))).map((x) => x.id));
        }
        for (;;) {
          const due = await ledger.claimDue({ ...opts(owner), limit: 50 });
          if (due.length === 0) return got;
          got.push(...due.map((x) => x.id));
        }
      };
      const results = await Promise.all([claimer(a!, 'a'), claimer(b!, 'b'), claimer(c!, 'c')]);
      const all = results.flat();
      expect(new Set(all).size).toBe(all.length); // nobody got an item twice
      expect(await a!.counts()).toEqual({ pending: ids.length - all.length, claimed: all.length, done: 0, dead: 0 });
      for (const l of [a, b, c]) await l!.close();
    });

    it('writes a batch and its counters together: a repeat and a stale attempt in the batch are fenced, and counted', async () => {
      const ledger = await fresh();
      const [a, b, c, d] = await discoverAndClaim(ledger, [{ id: 'a' }, { id: 'b' }, { id: 'c' }, { id: 'd' }], opts('o'));
      const outs = await ledger.complete([a!, a!, { ...b!, attempt: 9 }, b!], T0 + 1);
      expect(outs.map((o) => [o.id, o.result])).toEqual([['a', 'applied'], ['a', 'fenced'], ['b', 'fenced'], ['b', 'applied']]);
      expect(outs[2]).toMatchObject({ reason: expect.stringMatching(/attempt 9/) });
      expect(await ledger.release([c!, c!], T0 + 2, 'stop')).toMatchObject([{ result: 'applied', state: 'pending' }, { result: 'fenced' }]);
      expect(await ledger.forget([d!, d!], T0 + 3)).toMatchObject([{ result: 'applied', state: 'gone' }, { result: 'fenced' }]);
      expect(await ledger.attemptTotals()).toEqual({ succeeded: 2, failed: 0, dead: 0, released: 1, fenced: 4, gone: 1 });
      expect((await ledger.totals()).itemsDone).toBe(2);
      expect(await ledger.get('c')).toMatchObject({ state: 'pending', attempts: 1, released: 1, lastError: 'stop' });
      expect(await ledger.get('d')).toBeNull();
      await ledger.close();
    });

    it("a completion's retry (its first answer lost) applies what the first try committed, counted once; a stale claim stays fenced", async () => {
      const schema = `t_${++n}`;
      const ledger = await openPostgresLedger({ url, schema });
      const [a, b, c] = await discoverAndClaim(ledger, [{ id: 'a' }, { id: 'b' }, { id: 'c' }], opts('o'));
      // b: never started, so undone (attempt 0 again), then taken by p on attempt 1, the
      // number o's claim had; c: handed back and taken by o again, on attempt 2.
      await ledger.release([b!], T0 + 1, 'stop', true);
      await ledger.release([c!], T0 + 1, 'stop');
      const [b2] = await ledger.claim(['b'], opts('p', { now: T0 + 2 }));
      const [c2] = await ledger.claim(['c'], opts('o', { now: T0 + 2 }));
      expect([b2?.attempt, c2?.attempt]).toEqual([1, 2]);
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      const run = async (claims: Claim[], again: boolean) =>
        (await client.query<{ id: string }>(completeQuery(schema, claimColumns(claims), T0 + 3, again))).rows.map((r) => r.id).sort();
      const done = [a!, b2!, c2!];
      expect(await run(done, false)).toEqual(['a', 'b', 'c']);
      // The executor's retry of the same statement: the first try committed.
      expect(await run(done, true)).toEqual(['a', 'b', 'c']);
      expect(await ledger.attemptTotals()).toMatchObject({ succeeded: 3, fenced: 0 });
      expect((await ledger.totals()).itemsDone).toBe(3);
      // Stale claims, on a first try or a retry: another owner's completion on the same
      // attempt number (b), a later attempt of the same owner (c).
      expect(await run([b!, c!], false)).toEqual([]);
      expect(await run([b!, c!], true)).toEqual([]);
      expect(await ledger.attemptTotals()).toMatchObject({ succeeded: 3, fenced: 4 });
      expect((await ledger.totals()).itemsDone).toBe(3);
      // The whole verb: a completion of a claim already done is fenced (the ledger contract).
      expect(await ledger.complete([a!], T0 + 4)).toMatchObject([{ id: 'a', result: 'fenced' }]);
      await client.end();
      await ledger.close();
    });

    it("a failure's or hand-back's retry (its first answer lost) applies what the first try committed, counted once; another's change stays fenced", async () => {
      const schema = `t_${++n}`;
      const ledger = await openPostgresLedger({ url, schema });
      const [a, b, c, d, e] = await discoverAndClaim(ledger, ['a', 'b', 'c', 'd', 'e'].map((id) => ({ id })), opts('o'));
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      const exec = execOn(client);
      const now = T0 + 3;
      // Each write run twice, as the executor's first try (committed, its answer lost) and
      // its retry: a (failed, to retry), b (failed, dead: its last attempt), c (handed back),
      // d (handed back unstarted).
      const fail = (claims: Claim[], retry: typeof RETRY, again: boolean) => failClaims(exec, schema, claims.map((claim) => ({ claim, error: 'boom' })), { now, retry, random: () => 0.5 }, again);
      const release = async (claims: Claim[], unstarted: boolean, again: boolean) =>
        (await client.query<{ id: string }>(releaseQuery(schema, claimColumns(claims), now, 'stop', unstarted, again))).rows.map((r) => r.id);
      const first = [await fail([a!], RETRY, false), await fail([b!], { ...RETRY, maxAttempts: 1 }, false)];
      expect(first.flat()).toMatchObject([{ id: 'a', result: 'applied', state: 'pending' }, { id: 'b', result: 'applied', state: 'dead' }]);
      expect(await fail([a!], RETRY, true)).toEqual(first[0]);
      expect(await fail([b!], { ...RETRY, maxAttempts: 1 }, true)).toEqual(first[1]);
      expect(await release([c!], false, false)).toEqual(['c']);
      // Before the retry a pod of the pass whose clock is 2 ms behind finds c again (its scan):
      // a row never charged comes down to that pod's now (discover.ts), and the retry must
      // still know its own hand-back.
      await ledger.discover([{ id: 'c' }], { runId: 'run-o', now: now - 2 });
      expect(await ledger.get('c')).toMatchObject({ state: 'pending', availableAt: now - 2 });
      expect(await release([c!], false, true)).toEqual(['c']);
      expect(await release([d!], true, false)).toEqual(['d']);
      expect(await release([d!], true, true)).toEqual(['d']);
      expect(await ledger.attemptTotals()).toEqual({ succeeded: 0, failed: 1, dead: 1, released: 2, fenced: 0, gone: 0 });
      // The same rows seen by a first try (no answer was lost): fenced, as on SQLite.
      expect(await fail([a!], RETRY, false)).toMatchObject([{ id: 'a', result: 'fenced' }]);
      expect(await release([c!], false, false)).toEqual([]);
      expect(await ledger.attemptTotals()).toMatchObject({ failed: 1, released: 2, fenced: 2 });
      // e: o's lease ran out and another pod took the claim back (charged, 'abandoned') before
      // o's write: o's retry finds another's change, at another time, and stays fenced. So
      // does a retry that finds a later attempt's change (a, claimed again and failed).
      await ledger.reclaimExpired({ now: T0 + 120_000, retry: RETRY });
      expect(await ledger.get('e')).toMatchObject({ state: 'pending', attempts: 1 });
      const late = { now: T0 + 120_001, retry: RETRY, random: () => 0.5 };
      expect(await failClaims(exec, schema, [{ claim: e!, error: 'boom' }], late, true)).toMatchObject([{ id: 'e', result: 'fenced' }]);
      expect((await client.query(releaseQuery(schema, claimColumns([e!]), T0 + 120_001, 'stop', false, true))).rows).toEqual([]);
      expect((await client.query(releaseQuery(schema, claimColumns([e!]), T0 + 120_001, 'stop', true, true))).rows).toEqual([]);
      const [a2] = await ledger.claimDue({ ...opts('o', { now: T0 + 200_000 }), limit: 1, exclude: ['c', 'd', 'e'] });
      expect(a2).toMatchObject({ id: 'a', attempt: 2 });
      await ledger.fail([{ claim: a2!, error: 'boom' }], { now: T0 + 200_001, retry: RETRY });
      expect(await fail([a!], RETRY, true)).toMatchObject([{ id: 'a', result: 'fenced' }]);
      expect(await ledger.attemptTotals()).toMatchObject({ failed: 3, dead: 1, released: 2, fenced: 6 });
      await client.end();
      await ledger.close();
    });

    it("a forget's retry (its first answer lost) finds the row gone: applied, counted once; a row still there stays fenced", async () => {
      const schema = `t_${++n}`;
      const ledger = await openPostgresLedger({ url, schema });
      const [a, b] = await discoverAndClaim(ledger, ['a', 'b'].map((id) => ({ id })), opts('o'));
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      const ids = async (claims: Claim[], again: boolean) => (await client.query<{ id: string }>(forgetQuery(schema, claimColumns(claims), again))).rows.map((r) => r.id);
      expect(await ids([a!], false)).toEqual(['a']);
      expect(await ids([a!], true)).toEqual(['a']);
      expect(await ledger.attemptTotals()).toMatchObject({ gone: 1, fenced: 0 });
      // b: another attempt holds it now (o's claim is stale), on a first try or a retry.
      await ledger.release([b!], T0 + 1, 'stop');
      await ledger.claim(['b'], opts('p', { now: T0 + 2 }));
      expect(await ids([b!], false)).toEqual([]);
      expect(await ids([b!], true)).toEqual([]);
      expect(await ledger.attemptTotals()).toMatchObject({ gone: 1, fenced: 2 });
      expect(await ledger.get('b')).toMatchObject({ state: 'claimed', owner: 'p' });
      await client.end();
      await ledger.close();
    });

    it("a retry that finds its first try's write counts the batch's stale claims as fenced once: the first try, committed, counted them", async () => {
      const schema = `t_${++n}`;
      const ledger = await openPostgresLedger({ url, schema });
      const [a, b, c] = await discoverAndClaim(ledger, ['a', 'b', 'c'].map((id) => ({ id })), opts('o'));
      const stale = (x: Claim): Claim => ({ ...x, attempt: 9 });
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      const now = T0 + 3;
      const ids = async (query: Query) => (await client.query<{ id: string }>(query)).rows.map((r) => r.id);
      for (const again of [false, true]) {
        expect(await ids(completeQuery(schema, claimColumns([a!, stale(a!)]), now, again))).toEqual(['a']);
        expect(await ids(releaseQuery(schema, claimColumns([b!, stale(b!)]), now, 'stop', false, again))).toEqual(['b']);
        const outs = await failClaims(execOn(client), schema, [c!, stale(c!)].map((claim) => ({ claim, error: 'boom' })), { now, retry: RETRY, random: () => 0.5 }, again);
        expect(outs.map((o) => o.result)).toEqual(['applied', 'fenced']);
      }
      expect(await ledger.attemptTotals()).toEqual({ succeeded: 1, failed: 1, dead: 0, released: 1, fenced: 3, gone: 0 });
      await client.end();
      await ledger.close();
    });

    it('skips a row another transaction has locked instead of waiting for it', async () => {
      const ledger = await fresh();
      await discoverAndClaim(ledger, [{ id: 'locked' }, { id: 'free' }], opts('o', { limit: 0 }));
      const holder = new pg.Client({ connectionString: url });
      await holder.connect();
      try {
        await holder.query('BEGIN');
        await holder.query(`SELECT 1 FROM ${ident(ledger.schema)}.items WHERE id = 'locked' FOR UPDATE`);
        const started = Date.now();
        const claims = await ledger.claimDue({ ...opts('o'), limit: 10 });
        expect(claims.map((c) => c.id)).toEqual(['free']);
        expect(Date.now() - started).toBeLessThan(2000);
      } finally {
        await holder.query('ROLLBACK');
        await holder.end();
        await ledger.close();
      }
    });

    it('reclaims only claims whose lease expired, and records who completed', async () => {
      const ledger = await fresh();
      await discoverAndClaim(ledger, [{ id: 'dead-pod' }], opts('pod-1', { leaseMs: 1000 }));
      await discoverAndClaim(ledger, [{ id: 'live-pod' }], opts('pod-2', { leaseMs: 60_000 }));
      expect(await ledger.reclaimExpired({ now: T0 + 1000, retry: RETRY })).toBe(0); // lease_until < now, strictly
      expect(await ledger.reclaimExpired({ now: T0 + 5000, retry: RETRY, random: () => 0 })).toBe(1);
      expect(await ledger.get('dead-pod')).toMatchObject({ state: 'pending', attempts: 1, availableAt: T0 + 5500 });
      expect((await ledger.get('dead-pod'))?.lastError).toMatch(/lease expired/);
      expect(await ledger.get('live-pod')).toMatchObject({ state: 'claimed', owner: 'pod-2' });
      await ledger.complete([{ id: 'live-pod', owner: 'pod-2', attempt: 1, charged: 1 }], T0 + 6000);
      const [row] = await server.admin(`SELECT done_by FROM ${ident(ledger.schema)}.items WHERE id = 'live-pod'`, [], 'ledger');
      expect(row).toEqual({ done_by: 'pod-2' });
      await ledger.close();
    });
  });

  it("a renewal that reaches the ledger after a newer claim never shortens that claim's lease", async () => {
    // The runner renews with the lease as of when it sent the renewal; a claim sent later (on
    // another session) may commit first. Shortened, the lease would run out on siblings before
    // the end the claiming pod's lease guard counts from, and the pod could still commit its
    // output after a sibling took the item over.
    const ledger = await fresh();
    await discoverAndClaim(ledger, [{ id: 'a' }], opts('pod-1', { now: T0 + 10_000 })); // lease to T0 + 70 s
    expect(await ledger.renew('pod-1', ['a'], T0 + 60_000)).toEqual([]); // sent at T0, arriving late
    const [row] = await server.admin<{ lease_until: string }>(`SELECT lease_until FROM ${ident(ledger.schema)}.items WHERE id = 'a'`, [], 'ledger');
    expect(Number(row!.lease_until)).toBe(T0 + 70_000);
    expect(await ledger.reclaimExpired({ now: T0 + 65_000, retry: RETRY })).toBe(0);
    await ledger.close();
  });

  describe('requeue while a pass runs', () => {
    it("marks the requeued item as the running pass's (run_lock): swept by it, never forgotten by its end of scan", async () => {
      const ledger = await fresh();
      const [first] = await discoverAndClaim(ledger, [{ id: 'a' }], opts('pod-1', { runId: 'old-pass' }));
      await ledger.complete(first ? [first] : [], T0);
      // A new pass starts (its lock records its group) and its scan passes the done item.
      await server.admin(`INSERT INTO ${ident(ledger.schema)}.run_lock (name, run_group, owner, acquired_at) VALUES ('j', 'new-pass', 'pod-2', $1)`, [T0 + 1], 'ledger');
      expect(await ledger.discover([{ id: 'a' }], { runId: 'new-pass', now: T0 + 2 })).toEqual([]);
      expect(await ledger.requeue(['a'], { states: ['done'] }, T0 + 3)).toEqual(['a']);
      expect(await ledger.forgetUnseen('new-pass')).toBe(0);
      expect(await ledger.claimDue({ ...opts('pod-2', { runId: 'new-pass', now: T0 + 3 }), limit: 5 })).toMatchObject([{ id: 'a', attempt: 1 }]);
      await ledger.close();
    });

    it('dead-letter retry does the same: a dead item the running scan passed is not forgotten as a deleted file', async () => {
      // Before, retryDead left the dead row's older pass: the pass's end-of-scan forgetUnseen
      // deleted it (its last error with it) as "gone", counted it so and logged its file missing.
      const ledger = await fresh();
      const retry = { maxAttempts: 1, backoffMs: 0, backoffMaxMs: 0 };
      const [first] = await discoverAndClaim(ledger, [{ id: 'a' }], opts('pod-1', { runId: 'old-pass' }));
      await ledger.fail(first ? [{ claim: first, error: 'corrupt input' }] : [], { now: T0, retry });
      expect((await ledger.get('a'))?.state).toBe('dead');
      await server.admin(`INSERT INTO ${ident(ledger.schema)}.run_lock (name, run_group, owner, acquired_at) VALUES ('j', 'new-pass', 'pod-2', $1)`, [T0 + 1], 'ledger');
      expect(await ledger.discover([{ id: 'a' }], { runId: 'new-pass', now: T0 + 2 })).toEqual([]);
      expect(await ledger.retryDead(['a'], T0 + 3)).toBe(1);
      expect(await ledger.forgetUnseen('new-pass')).toBe(0);
      expect(await ledger.get('a')).toMatchObject({ state: 'pending', lastError: 'corrupt input' });
      expect(await ledger.claimDue({ ...opts('pod-2', { runId: 'new-pass', now: T0 + 3 }), limit: 5 })).toMatchObject([{ id: 'a', attempt: 1 }]);
      await ledger.close();
    });
  });

  it("a claim of an earlier pass taken back by a pod joining late is the running pass's: a sibling's end of scan does not forget it", async () => {
    // Before, the row kept the earlier pass (discovery marks only pending rows, and the scan
    // passed it while it was held): the sibling's forgetUnseen deleted it as a gone file, its
    // charged attempt and last error with it, and counted it as gone.
    const ledger = await fresh();
    const [held] = await discoverAndClaim(ledger, [{ id: 'x' }, { id: 'y' }], opts('pod-dead', { runId: 'old-pass', leaseMs: 1000, limit: 1 }));
    expect(held?.id).toBe('x');
    // The next pass starts (its lock records its group); its first pod's scan passes x, held.
    await server.admin(`INSERT INTO ${ident(ledger.schema)}.run_lock (name, run_group, owner, acquired_at) VALUES ('j', 'new-pass', 'pod-b', $1)`, [T0 + 500], 'ledger');
    expect(await ledger.discover([{ id: 'x' }, { id: 'y' }], { runId: 'new-pass', now: T0 + 500 })).toEqual(['y']);
    // A pod joining late takes the expired claim back at its start, then the first pod's scan ends.
    expect(await ledger.reclaimAbandoned('pod-c', { now: T0 + 2000, retry: RETRY })).toBe(1);
    expect(await ledger.forgetUnseen('new-pass')).toBe(0);
    expect(await ledger.get('x')).toMatchObject({ state: 'pending', attempts: 1 });
    await ledger.close();
  });

  describe('migrations', () => {
    it('are applied once when many pods open a new schema at the same time', async () => {
      const schema = `t_${++n}`;
      const ledgers = await Promise.all(Array.from({ length: 6 }, () => openPostgresLedger({ url, schema })));
      const rows = await server.admin(`SELECT version, name FROM ${schema}.schema_migrations`, [], 'ledger');
      expect(rows).toEqual(MIGRATIONS.map((m) => ({ version: m.version, name: m.name })));
      await ledgers[0]!.migrate();
      for (const l of ledgers) await l.close();
    });

    // Pods of a Job start at once on a new schema: one looked for schema_migrations before
    // another's first start committed, then saw that pod's tables and refused them as another
    // program's (exit 78 'holds tables of something else', 1 fresh start in ~12 with 3 pods).
    it("a pod that sees another pod's first start commit between its looks is not told the ledger is another program's", async () => {
      const schema = `t_${++n}`;
      const other = new pg.Client({ connectionString: url });
      const pod = new pg.Client({ connectionString: url });
      await other.connect();
      await pod.connect();
      try {
        const first = migrationsTableQuery(schema).text;
        let cut = false;
        // The other pod's whole first start commits right after this pod found no schema_migrations.
        const exec = async (query: Query) => {
          const rows = (await pod.query(query)).rows;
          if (!cut && query.text === first) {
            cut = true;
            await other.query('BEGIN');
            await migrate(execOn(other), schema);
            await other.query('COMMIT');
          }
          return rows;
        };
        const race = async (check: (e: Exec) => Promise<unknown>): Promise<unknown> => {
          cut = false;
          await server.admin(`DROP SCHEMA IF EXISTS ${schema} CASCADE`, [], 'ledger');
          await pod.query('BEGIN');
          const r = await check(exec as Exec).then(() => 'ok', (err: unknown) => err);
          await pod.query('ROLLBACK');
          expect(cut).toBe(true);
          return r;
        };
        expect(await race((e) => migrate(e, schema))).toBe('ok');
        // status at that moment: no ledger yet (a run is making it), not another program's schema
        expect(await race((e) => checkReadableSchema(e, schema))).toBeInstanceOf(NoLedgerYet);
        const rows = await server.admin(`SELECT version FROM ${schema}.schema_migrations`, [], 'ledger');
        expect(rows).toHaveLength(MIGRATIONS.length);
      } finally {
        await other.end();
        await pod.end();
      }
    });

    // Migration 007: items.state's check as an array literal (read at every statement that
    // writes items; the ARRAY[...] form was folded into an array anew each time).
    it('007 moves a ledger of 006 with rows in every state to the cheaper state check, rows intact, bad states still refused', async () => {
      const schema = `t_${++n}`;
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        // In a transaction, as every caller runs it (its DDL tries under a savepoint).
        await c.query('BEGIN');
        await migrate(execOn(c), schema, MIGRATIONS.filter((m) => m.version <= 6));
        await c.query('COMMIT');
        const s = ident(schema);
        await c.query(`INSERT INTO ${s}.items (id, state, attempts, released, owner, lease_until, available_at, first_seen_at, updated_at, done_at, done_by, dead_at, last_error)
          VALUES ('p', 'pending', 1, 1, NULL, NULL, 5, 1, 2, NULL, NULL, NULL, 'handed back'),
                 ('c', 'claimed', 2, 0, 'pod-1', 99, 1, 1, 2, NULL, NULL, NULL, NULL),
                 ('d', 'done', 1, 0, NULL, NULL, 1, 1, 3, 3, 'pod-1', NULL, NULL),
                 ('x', 'dead', 3, 0, NULL, NULL, 1, 1, 4, NULL, NULL, 4, 'boom')`);
        const all = `SELECT * FROM ${s}.items ORDER BY id`;
        const before = (await c.query(all)).rows;
        const checks = `SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = '${s}.items'::regclass AND contype = 'c' AND pg_get_constraintdef(oid) LIKE '%state = ANY%'`;
        expect((await c.query(checks)).rows).toEqual([{ def: `CHECK ((state = ANY (ARRAY['pending'::text, 'claimed'::text, 'done'::text, 'dead'::text])))` }]);

        await c.query('BEGIN');
        expect(await migrate(execOn(c), schema)).toEqual([7]);
        await c.query('COMMIT');
        expect((await c.query(all)).rows).toEqual(before);
        expect((await c.query(checks)).rows).toEqual([{ def: `CHECK ((state = ANY ('{pending,claimed,done,dead}'::text[])))` }]);
        for (const bad of ['Done', 'running', '']) {
          await expect(c.query(`UPDATE ${s}.items SET state = $1, owner = NULL WHERE id = 'd'`, [bad])).rejects.toMatchObject({ code: '23514' });
        }
        await expect(c.query(`UPDATE ${s}.items SET owner = NULL WHERE id = 'c'`)).rejects.toMatchObject({ code: '23514' });
        expect((await c.query(all)).rows).toEqual(before);
      } finally {
        await c.end();
      }
      // The migrated ledger works: the claimed item completes, and the pending one is claimed.
      const ledger = await openPostgresLedger({ url, schema });
      try {
        expect(await ledger.complete([{ id: 'c', owner: 'pod-1', attempt: 2, charged: 2 }], T0)).toEqual([{ id: 'c', result: 'applied', state: 'done' }]);
        expect((await ledger.claim(['p', 'd', 'x'], opts('pod-2'))).map((cl) => [cl.id, cl.attempt])).toEqual([['p', 2]]);
      } finally {
        await ledger.close();
      }
    });

    it('refuse a schema written by a newer cronsafe', async () => {
      const schema = `t_${++n}`;
      await (await openPostgresLedger({ url, schema })).close();
      await server.admin(`INSERT INTO ${schema}.schema_migrations VALUES (999, 'future', 0)`, [], 'ledger');
      await expect(openPostgresLedger({ url, schema })).rejects.toThrow(/schema version 999.*upgrade cronsafe/);
    });
  });

  describe('transient errors', () => {
    it('retries a transaction whose connection was killed mid-statement', async () => {
      const retries: string[] = [];
      const ledger = await fresh({ onRetry: (r) => retries.push(r.error.code ?? '') });
      const [claim] = await discoverAndClaim(ledger, [{ id: 'a' }], opts('o'));
      const blocker = new pg.Client({ connectionString: url });
      await blocker.connect();
      await blocker.query('BEGIN');
      await blocker.query(`SELECT 1 FROM ${ident(ledger.schema)}.items WHERE id = 'a' FOR UPDATE`);
      const completing = ledger.complete([claim!], T0 + 1);
      // Kill the ledger's session while it waits for the row lock (57P01 admin shutdown).
      for (let i = 0; i < 100; i++) {
        const killed = await server.admin(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'cronsafe' AND wait_event_type = 'Lock'`,
          [],
          'ledger',
        );
        if (killed.length > 0) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      await blocker.query('ROLLBACK');
      await blocker.end();
      expect(await completing).toEqual([{ id: 'a', result: 'applied', state: 'done' }]);
      expect(retries).toContain('57P01');
      await ledger.close();
    });

    it("rides through a DBA's lock_timeout while maintenance holds the table for a moment (55P03 is retried)", async () => {
      // A role with lock_timeout (a common DBA guard) and a short table lock (VACUUM FULL,
      // an index swap): the statement was cancelled before it did anything, so it is run
      // again, not thrown; thrown, it failed every pod of the pass at once (exit 1).
      await server.admin(`DO $$ BEGIN CREATE ROLE guarded LOGIN SUPERUSER; EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
      await server.admin(`ALTER ROLE guarded SET lock_timeout = '100ms'`);
      const retries: string[] = [];
      const guardedUrl = url.replace('postgres@', 'guarded@');
      const ledger = await fresh({ url: guardedUrl, onRetry: (r) => retries.push(r.error.code ?? '') });
      const [claim] = await discoverAndClaim(ledger, [{ id: 'a' }, { id: 'b' }], opts('o', { limit: 1 }));
      const blocker = new pg.Client({ connectionString: url });
      await blocker.connect();
      await blocker.query('BEGIN');
      await blocker.query(`LOCK TABLE ${ident(ledger.schema)}.items IN EXCLUSIVE MODE`);
      const both = Promise.all([ledger.complete([claim!], T0 + 1), ledger.claimDue({ ...opts('o'), limit: 1 })]);
      await new Promise((r) => setTimeout(r, 600));
      await blocker.query('COMMIT');
      await blocker.end();
      const [completed, swept] = await both;
      expect(completed).toEqual([{ id: claim!.id, result: 'applied', state: 'done' }]);
      expect(swept.length).toBe(1);
      expect(retries).toContain('55P03');
      await ledger.close();
    });

    it('fails clearly, without the password, when the database is down at start', async () => {
      const port = await freePort();
      const started = Date.now();
      const err = await openPostgresLedger({ url: `postgres://app:hunter2pw@127.0.0.1:${port}/jobs`, schema: 'cs', startBudgetMs: 500 }).catch((e: Error) => e);
      expect(err).toBeInstanceOf(Error);
      expect((err as Error).message).toMatch(new RegExp(`127\\.0\\.0\\.1:${port}/jobs as app \\(schema cs\\).*ECONNREFUSED`));
      expect((err as Error).message).not.toContain('hunter2pw');
      expect(Date.now() - started).toBeLessThan(5000);
    });
  });
});
