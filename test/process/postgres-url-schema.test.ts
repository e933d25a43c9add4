/**
 * A schema chosen in the URL (`?schema=` as Prisma writes it, JDBC's `?currentSchema=`,
 * `?search_path=`) is a parameter the pg driver ignores: the ledger went to state.schema
 * (`cronsafe` by default) all the same. Two releases of one job (same `name`, staging and
 * prod) told apart only by their Secret's `?schema=` shared one ledger and one run lock:
 * the prod pass took the staging pass's done items for its own (never ran them) and
 * forgot its pending ones as gone files. Such a URL is refused (exit 78 naming
 * state.postgres and state.schema) unless it names state.schema itself.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

describe.skipIf(PG_SKIP_REASON !== undefined)('a schema given in the state.postgres URL', () => {
  let server: PgServer;
  let url = '';
  beforeAll(async () => {
    server = await startPostgres();
    url = await server.createDatabase('shared');
  });
  afterAll(async () => {
    await server?.stop();
  });

  const schemas = async (): Promise<string[]> =>
    (await server.admin<{ n: string }>(`SELECT nspname AS n FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' AND nspname NOT IN ('public', 'information_schema') ORDER BY 1`, [], 'shared')).map(
      (r) => r.n,
    );

  it('?schema=, ?currentSchema= or ?search_path= other than state.schema: exit 78 naming both keys, nothing written; the same name as state.schema runs', async () => {
    for (const param of ['schema=staging', 'currentSchema=prod', 'search_path=prod', 'sslmode=disable&schema=prod']) {
      const ws = workspace({ name: 'caption-qc', handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: `${url}?${param}` } }, { 'a.txt': 'a' });
      for (const cmd of ['validate', 'run', 'status', 'requeue']) {
        const r = await runCli([cmd, ...(cmd === 'requeue' ? ['--all'] : []), '-c', ws.configPath], { timeoutMs: 30_000 });
        expect(r.code, `${cmd} with ?${param}: ${r.stderr}`).toBe(78);
        expect(r.stderr).toContain('state.postgres');
        expect(r.stderr).toContain('state.schema');
      }
      // The same through the Secret's variable: the message says where the URL came from.
      const r = await runCli(['run', '-c', ws.configPath], { env: { CRONSAFE_STATE_POSTGRES: `${url}?${param}` }, timeoutMs: 30_000 });
      expect(r.code, r.stderr).toBe(78);
      expect(r.stderr).toContain('CRONSAFE_STATE_POSTGRES');
    }
    expect(await schemas()).toEqual([]);

    const ws = workspace({ name: 'caption-qc', handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: `${url}?schema=staging`, schema: 'staging' } }, { 'a.txt': 'a' });
    const r = await runCli(['run', '-c', ws.configPath], { timeoutMs: 30_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(await schemas()).toEqual(['staging']);
  }, 120_000);

  // Prisma's own default (`?schema=public`, in the DATABASE_URL a Prisma app's .env has) and
  // PostgreSQL's (`search_path="$user",public`) choose no schema of their own: they were
  // refused, advising `state.schema: public` (a schema holding the application's tables) or
  // `state.schema: "\"$user\",public"`. A list is read by its first schema.
  it('?schema=public, the default search_path, or a list whose first schema is state.schema: accepted; a list led by another is refused naming it', async () => {
    for (const param of ['schema=public', 'search_path=%22%24user%22,public', 'search_path=%24user,%20public', 'search_path=cronsafe,public', 'currentSchema=%22cronsafe%22']) {
      const ws = workspace({ name: 'caption-qc', handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: `${url}?${param}` } }, { 'a.txt': 'a' });
      const r = await runCli(['validate', '-c', ws.configPath], { timeoutMs: 30_000 });
      expect(r.code, `?${param}: ${r.stderr}`).toBe(0);
    }
    const ws = workspace({ name: 'caption-qc', handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: `${url}?search_path=prod,public` } }, { 'a.txt': 'a' });
    const r = await runCli(['validate', '-c', ws.configPath], { timeoutMs: 30_000 });
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toContain('set state.schema: "prod" instead');
  }, 60_000);

  // libpq's own way to choose a schema in a URL is `options=-csearch_path=...`: the server set
  // the session's search_path, but cronsafe names state.schema in every statement, so two
  // releases told apart by it shared one ledger, as with ?schema=.
  it('options=-c search_path= naming another schema than state.schema: exit 78 naming both keys, nothing written; naming state.schema runs', async () => {
    const before = await schemas();
    for (const [query, env] of [
      ['options=-c%20search_path%3Dstaging', {}],
      ['options=-csearch_path%3Dprod,public', {}],
      ['sslmode=disable&options=--search-path%3Dprod', {}],
      // The last options= is the one the server gets.
      [`options=-c%20search_path%3Dcronsafe&options=-c%20search_path%3Dprod`, {}],
    ] as const) {
      const ws = workspace({ name: 'caption-qc', handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: `${url}?${query}` } }, { 'a.txt': 'a' });
      for (const cmd of ['validate', 'run', 'status', 'requeue']) {
        const r = await runCli([cmd, ...(cmd === 'requeue' ? ['--all'] : []), '-c', ws.configPath], { env, timeoutMs: 30_000 });
        expect(r.code, `${cmd} with ?${query} ${JSON.stringify(env)}: ${r.stderr}`).toBe(78);
        expect(r.stderr).toContain("state.postgres: expected no search_path in the URL's options= naming another schema");
        expect(r.stderr).toContain('state.schema');
      }
    }
    expect(await schemas()).toEqual(before);
    // Options that choose no other schema (its own, beside a timeout) run. PGOPTIONS, the
    // environment's (a handler's database may be what it is for), is left alone.
    const ws = workspace(
      { name: 'caption-qc', handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: `${url}?options=-c%20search_path%3Dstaging%20-c%20statement_timeout%3D60s`, schema: 'staging' } },
      { 'a.txt': 'a' },
    );
    const r = await runCli(['run', '-c', ws.configPath], { timeoutMs: 30_000 });
    expect(r.code, r.stderr).toBe(0);
    const env = await runCli(['status', '-c', ws.configPath], { env: { CRONSAFE_STATE_POSTGRES: url, PGOPTIONS: '-c search_path=prod' }, timeoutMs: 30_000 });
    expect(env.code, env.stderr).toBe(0);
  }, 120_000);

  // The server folds a search_path's names not in double quotes to lower case: `Qc` is schema
  // qc. Compared as written, `?options=-csearch_path%3DQc` beside `state.schema: qc` (or
  // `CRONSAFE,public` beside the default) was refused, advising a state.schema ("Qc") that
  // state.schema itself refuses.
  it('options=-c search_path= naming state.schema in capitals (unquoted): runs, as the server reads it so; "QC" in quotes is another schema, refused', async () => {
    const url = await server.createDatabase('folded');
    for (const [query, schema] of [
      ['options=-csearch_path%3DQc', 'qc'],
      ['options=-c%20statement_timeout%3D60s%20-c%20search_path%3DCRONSAFE,public', undefined],
      ['options=--search-path%3DPublic', 'other'],
    ] as const) {
      const ws = workspace(
        { name: 'caption-qc', handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: `${url}?${query}`, ...(schema ? { schema } : {}) } },
        { 'a.txt': 'a' },
      );
      for (const cmd of ['validate', 'run']) {
        const r = await runCli([cmd, '-c', ws.configPath], { timeoutMs: 30_000 });
        expect(r.code, `${cmd} with ?${query}: ${r.stderr}`).toBe(0);
      }
      expect(readFileSync(join(ws.out, 'a.txt.out'), 'utf8')).toBe('a');
    }
    // The server's own reading of that search_path: the schema the ledger is in.
    const session = new pg.Client({ connectionString: url, options: '-c search_path=Qc' });
    await session.connect();
    expect((await session.query<{ s: string }>('SELECT current_schema() AS s')).rows[0]!.s).toBe('qc');
    await session.end();
    const quoted = workspace(
      { name: 'caption-qc', handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: `${url}?options=-csearch_path%3D%22QC%22`, schema: 'qc' } },
      { 'a.txt': 'a' },
    );
    const r = await runCli(['validate', '-c', quoted.configPath], { timeoutMs: 30_000 });
    expect(r.code).toBe(78);
    expect(r.stderr).toContain("state.postgres: expected no search_path in the URL's options= naming another schema");
  }, 60_000);

  // CRONSAFE_STATE_POSTGRES replaces state.postgres and drops state.sqlite, yet a `${VAR}` in
  // either still had to be set: a pod given the URL by the variable alone exited 78 naming
  // a variable whose value was never to be used.
  it('CRONSAFE_STATE_POSTGRES set: a ${VAR} in the state.postgres or state.sqlite it replaces need not be set; without it, still refused', async () => {
    for (const state of [{ postgres: '${DATABASE_URL}', schema: 'replaced' }, { sqlite: '${STATE_DIR}/job.db', schema: 'replaced' }]) {
      const ws = workspace({ handler: { command: ['/bin/cp', '{path}', '{output}'] }, state }, { 'a.txt': 'a' });
      for (const cmd of ['validate', 'run', 'status']) {
        const r = await runCli([cmd, '-c', ws.configPath], { env: { CRONSAFE_STATE_POSTGRES: url }, timeoutMs: 30_000 });
        expect(r.code, `${cmd} with ${JSON.stringify(state)}: ${r.stderr}`).toBe(0);
      }
      const without = await runCli(['validate', '-c', ws.configPath], { timeoutMs: 30_000 });
      expect(without.code).toBe(78);
      expect(without.stderr).toMatch(/state\.(postgres|sqlite): environment variable (DATABASE_URL|STATE_DIR) is not set/);
    }
  }, 60_000);

  // libpq's list of hosts, for a primary that moves between them: the pg driver takes one host.
  // With ports it was refused as a URL whose password needed percent-encoding; without, the
  // list was looked up as one host name (exit 1 after 5 s, `getaddrinfo ENOTFOUND db1,db2`).
  it('a libpq host list (db1:5432,db2:5432 or db1,db2): exit 78 naming state.postgres, saying to name one endpoint, without the password', async () => {
    for (const hosts of [`127.0.0.1:${server.port},127.0.0.2:${server.port}`, `127.0.0.1,127.0.0.2:${server.port}`]) {
      const list = `postgres://postgres:Hunter2Secret@${hosts}/shared?target_session_attrs=read-write`;
      const ws = workspace({ handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: list } }, { 'a.txt': 'a' });
      for (const cmd of ['validate', 'run', 'status']) {
        const r = await runCli([cmd, '-c', ws.configPath], { timeoutMs: 30_000 });
        expect(r.code, `${cmd} with ${hosts}: ${r.stderr}`).toBe(78);
        expect(r.stderr).toContain('state.postgres: expected one host');
        expect(r.stdout + r.stderr).not.toContain('Hunter2');
      }
    }
    expect(await schemas()).not.toContain('cronsafe');
  }, 120_000);
});
