/**
 * state.schema naming another program's schema (the application's own, or one a Rails app
 * migrates, with its `schema_migrations (version varchar)`): the Rails one read as "schema
 * version 20240101120000, newer than this cronsafe knows; upgrade cronsafe" (exit 1, and no
 * upgrade helps); any other had cronsafe's eight tables added among the application's. Both
 * are refused (exit 78, naming state.schema) before anything is written, as SQLite's
 * foreign database is (foreign-database.test.ts).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';
import { MIGRATIONS } from '../../src/ledger/postgres/migrations/index.js';

describe.skipIf(PG_SKIP_REASON !== undefined)('state.schema naming a schema that is not a ledger', () => {
  let server: PgServer;
  let url = '';
  beforeAll(async () => {
    server = await startPostgres();
    url = await server.createDatabase('apps');
  });
  afterAll(async () => {
    await server?.stop();
  });

  const tablesOf = async (schema: string): Promise<string[]> =>
    (await server.admin<{ t: string }>(`SELECT tablename AS t FROM pg_tables WHERE schemaname = $1 ORDER BY 1`, [schema], 'apps')).map((r) => r.t);

  it.each([
    ['an application schema', 'app', ['CREATE TABLE app.users (id serial PRIMARY KEY, email text)'], 'holds tables of something else ("users") and no cronsafe ledger'],
    [
      'a Rails schema (its own schema_migrations)',
      'rails',
      ['CREATE TABLE rails.schema_migrations (version varchar PRIMARY KEY)', "INSERT INTO rails.schema_migrations VALUES ('20240101120000')", 'CREATE TABLE rails.posts (id serial PRIMARY KEY)'],
      'holds a schema_migrations table of something else (version character varying), not a cronsafe ledger',
    ],
  ])('%s: run, status and requeue exit 78 naming state.schema, and leave it as it was', async (_what, schema, sql, said) => {
    await server.admin(`CREATE SCHEMA ${schema}; ${sql.join('; ')}`, [], 'apps');
    const before = await tablesOf(schema);
    const ws = workspace({ handler: { command: ['cp', '{path}', '{output}'] }, state: { postgres: url, schema } }, { 'a.txt': 'a\n' });
    for (const args of [['run'], ['status'], ['requeue', '--all']]) {
      const r = await runCli([...args, '-c', ws.configPath]);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(`state.schema: `);
      expect(r.stderr).toContain(`schema ${schema} ${said}; nothing was written to it`);
      expect(r.stderr).not.toContain('upgrade cronsafe');
    }
    expect(await tablesOf(schema)).toEqual(before);
    expect(existsSync(path.join(ws.out, 'a.txt.out'))).toBe(false);
  }, 60_000);

  it("another job's ledger at an older version is refused (78) before it is migrated: the owner's older pods would be refused as 'newer'", async () => {
    const files = { 'a.txt': 'a\n' };
    const owner = workspace({ name: 'owner-job', handler: { command: ['cp', '{path}', '{output}'] }, state: { postgres: url, schema: 'owned' } }, files);
    expect((await runCli(['run', '-c', owner.configPath])).code).toBe(0);
    // As an older cronsafe left it: without the newest migration.
    const newest = MIGRATIONS[MIGRATIONS.length - 1]!;
    expect(newest.name).toBe('state-check');
    await server.admin(
      `ALTER TABLE owned.items DROP CONSTRAINT items_state_check, ADD CONSTRAINT items_state_check CHECK (state IN ('pending', 'claimed', 'done', 'dead'));
       DELETE FROM owned.schema_migrations WHERE version = ${newest.version}`,
      [],
      'apps',
    );
    const other = workspace({ name: 'other-job', handler: { command: ['cp', '{path}', '{output}'] }, state: { postgres: url, schema: 'owned' } }, files);
    const r = await runCli(['run', '-c', other.configPath]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toContain('state.schema: the PostgreSQL schema "owned" is the ledger of job "owner-job"');
    const versions = await server.admin<{ v: number }>(`SELECT max(version) AS v FROM owned.schema_migrations`, [], 'apps');
    expect(versions[0]?.v).toBe(newest.version - 1);
    expect(existsSync(path.join(other.out, 'a.txt.out'))).toBe(false);
  }, 60_000);

  it("a schema holding only an extension's objects (pg_stat_statements' views, as in a managed database's public) becomes the ledger", async () => {
    await server.admin(`CREATE SCHEMA with_ext; CREATE EXTENSION pg_stat_statements SCHEMA with_ext`, [], 'apps');
    const ws = workspace({ handler: { command: ['cp', '{path}', '{output}'] }, state: { postgres: url, schema: 'with_ext' } }, { 'a.txt': 'a\n' });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(await tablesOf('with_ext')).toContain('items');
    expect(existsSync(path.join(ws.out, 'a.txt.out'))).toBe(true);
  }, 60_000);

  it('an empty schema (made for cronsafe by a DBA) becomes the ledger, as before', async () => {
    await server.admin(`CREATE SCHEMA made_for_it`, [], 'apps');
    const ws = workspace({ handler: { command: ['cp', '{path}', '{output}'] }, state: { postgres: url, schema: 'made_for_it' } }, { 'a.txt': 'a\n' });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(await tablesOf('made_for_it')).toContain('items');
  }, 60_000);
});
