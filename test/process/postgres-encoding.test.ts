/**
 * A ledger in a database whose encoding cannot hold every name: in a LATIN1 database, one
 * file named `日本.txt` (or a handler's stderr with a `€` in its error) failed the pass at
 * the ledger's write with `22P05 ... has no equivalent in encoding "LATIN1"`, on every run
 * (exit 1, nothing of the backlog done; a failure's write left the claims behind). Such a
 * database is now refused when the ledger would be created in it (exit 78 naming
 * state.postgres), before anything is written; SQL_ASCII (bytes as given) and UTF8 work.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

describe.skipIf(PG_SKIP_REASON !== undefined)('state.postgres naming a database whose encoding is not UTF8', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  const files = { 'plain.txt': 'plain\n', '日本.txt': 'nihon\n' };

  it('LATIN1: run exits 78 naming state.postgres and the encoding, every time, and creates nothing in it', async () => {
    await server.admin(`CREATE DATABASE latin ENCODING 'LATIN1' TEMPLATE template0`);
    const ws = workspace({ handler: { command: ['cp', '{path}', '{output}'] }, state: { postgres: server.url('latin'), schema: 'jobs' } }, files);
    for (let i = 0; i < 2; i++) {
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(78);
      expect(r.stderr).toContain('state.postgres: ');
      expect(r.stderr).toContain('encoding LATIN1');
      expect(r.stderr).toContain("ENCODING 'UTF8'");
      expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    }
    const schemas = await server.admin<{ n: string }>(`SELECT count(*) AS n FROM pg_namespace WHERE nspname = 'jobs'`, [], 'latin');
    expect(Number(schemas[0]?.n)).toBe(0);
    expect(existsSync(path.join(ws.out, 'plain.txt.out'))).toBe(false);
  }, 60_000);

  it('SQL_ASCII: the item named outside ASCII is done like any other', async () => {
    await server.admin(`CREATE DATABASE bytes ENCODING 'SQL_ASCII' TEMPLATE template0`);
    const ws = workspace({ handler: { command: ['cp', '{path}', '{output}'] }, state: { postgres: server.url('bytes'), schema: 'jobs' } }, files);
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(path.join(ws.out, '日本.txt.out'), 'utf8')).toBe('nihon\n');
    const rows = await server.admin<{ id: string; state: string }>(`SELECT id, state FROM jobs.items ORDER BY id`, [], 'bytes');
    expect(rows).toEqual([
      { id: 'plain.txt', state: 'done' },
      { id: '日本.txt', state: 'done' },
    ]);
  }, 60_000);
});
