import { readFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execOn } from '../../src/ledger/postgres/connection.js';
import { migrate } from '../../src/ledger/postgres/migrate.js';
import { MIGRATIONS } from '../../src/ledger/postgres/migrations/index.js';
import { configure, runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

const KNOWN = Math.max(...MIGRATIONS.map((m) => m.version));
const copy = { command: ['/bin/cp', '{path}', '{output}'] };

/**
 * A role that may use the ledger but not change its schema: the DBA ran the first migration
 * (docs/postgres.md), then an upgrade brings a new one. Each start must say it is the
 * migration that was refused and what it needs, not a bare "permission denied for schema"
 * under "take the run lock" (the role has USAGE; granting it again changes nothing).
 */
describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a migration the role may not make', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('an upgrade over tables a DBA created names the migration and the privileges it needs; the owner starting once fixes it', async () => {
    const url = await server.createDatabase('upgrade');
    // The schema as the previous version left it, made by the DBA's role.
    const dba = new pg.Client({ connectionString: url });
    await dba.connect();
    await dba.query('BEGIN');
    await migrate(execOn(dba), 'qc', MIGRATIONS.slice(0, -1));
    await dba.query('COMMIT');
    await dba.query(`CREATE ROLE worker LOGIN; GRANT USAGE ON SCHEMA qc TO worker; GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA qc TO worker`);
    await dba.end();

    const ws = workspace({ handler: copy, state: { postgres: url.replace('postgres@', 'worker@'), schema: 'qc' } }, { 'a.txt': 'a' });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      `cannot migrate schema qc from version ${KNOWN - 1} to ${KNOWN} (this cronsafe's): the role needs CREATE on schema qc and to own its tables`,
    );
    expect(r.stderr).toContain('permission denied for schema qc [42501]');
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(await server.admin(`SELECT max(version) AS v FROM qc.schema_migrations`, [], 'upgrade')).toEqual([{ v: KNOWN - 1 }]);

    // What the message and docs/postgres.md advise: the tables' owner starts this version once.
    configure(ws, { state: { postgres: url, schema: 'qc' } });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    configure(ws, { state: { postgres: url.replace('postgres@', 'worker@'), schema: 'qc' } });
    const again = await runCli(['run', '-c', ws.configPath]);
    expect(again.code, again.stderr).toBe(0);
    expect(readFileSync(path.join(ws.out, 'a.txt.out'), 'utf8')).toBe('a');
  }, 60_000);

  it('a first start without CREATE on the database names it, and the schema a DBA can make instead', async () => {
    const url = await server.createDatabase('first');
    await server.admin(`CREATE ROLE newcomer LOGIN; REVOKE CREATE ON SCHEMA public FROM PUBLIC`, [], 'first');
    const ws = workspace({ handler: copy, state: { postgres: url.replace('postgres@', 'newcomer@'), schema: 'qc' } }, { 'a.txt': 'a' });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('cannot create schema qc (the first start makes it and its tables): the role needs CREATE on the database');
    expect(r.stderr).toContain('CREATE SCHEMA "qc" AUTHORIZATION <role>');
    expect(r.stderr).toContain('permission denied for database first [42501]');
  }, 60_000);

  // The server names the table, not the privilege: a role granted SELECT, INSERT and UPDATE
  // failed every run with `permission denied for table meta` (it lacked DELETE), and a DBA
  // could not tell what to grant on a table the role could already read.
  it('a role short of the documented grants: run and requeue exit 1 naming the privileges to grant; status reads with SELECT; the documented grants run', async () => {
    const url = await server.createDatabase('grants');
    const ws = workspace({ handler: copy, state: { postgres: url, schema: 'qc' } }, { 'a.txt': 'a', 'b.txt': 'b' });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    await server.admin(
      `CREATE ROLE nodelete LOGIN; GRANT USAGE ON SCHEMA qc TO nodelete; GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA qc TO nodelete;
       CREATE ROLE reader LOGIN; GRANT USAGE ON SCHEMA qc TO reader; GRANT SELECT ON ALL TABLES IN SCHEMA qc TO reader`,
      [],
      'grants',
    );
    const needs = 'the role needs USAGE on schema qc and SELECT, INSERT, UPDATE and DELETE on all its tables';
    for (const role of ['nodelete', 'reader']) {
      configure(ws, { state: { postgres: url.replace('postgres@', `${role}@`), schema: 'qc' } });
      const run = await runCli(['run', '-c', ws.configPath]);
      expect(run.code, `${role}: ${run.stderr}`).toBe(1);
      expect(run.stderr).toContain(needs);
      expect(run.stderr).toContain('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA qc TO <role>');
      const status = await runCli(['status', '--json', '-c', ws.configPath]);
      expect(status.code, status.stderr).toBe(0);
    }
    const requeue = await runCli(['requeue', '--all', '-c', ws.configPath]);
    expect(requeue.code).toBe(1);
    expect(requeue.stderr).toContain(needs);

    await server.admin('GRANT DELETE ON ALL TABLES IN SCHEMA qc TO nodelete', [], 'grants');
    configure(ws, { state: { postgres: url.replace('postgres@', 'nodelete@'), schema: 'qc' } });
    expect((await runCli(['requeue', '--all', '-c', ws.configPath])).code).toBe(0);
    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);
  }, 60_000);
});
