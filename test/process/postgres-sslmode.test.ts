/**
 * A URL copied from psql with `sslmode=prefer` (libpq's default), or `allow`, to a server
 * without TLS (an in-cluster PostgreSQL): libpq falls back to an unencrypted connection,
 * the pg driver never does, not even with the `uselibpqcompat=true` its own start-up warning
 * suggests. Every start failed with the driver's "The server does not support SSL
 * connections" alone; the message now says why and what to write instead.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

describe.skipIf(PG_SKIP_REASON !== undefined)('a URL that asks for TLS of a server without it', () => {
  let server: PgServer;
  let url = '';
  beforeAll(async () => {
    server = await startPostgres();
    url = await server.createDatabase('tls');
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('sslmode=prefer or allow (libpq would fall back) and require: exit 1 saying the driver does not fall back and to write sslmode=disable; disable runs', async () => {
    const ws = workspace({ handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: 'postgres://placeholder/x' } }, { 'a.txt': 'a' });
    const start = (query: string, cmd = 'run') =>
      runCli([cmd, '-c', ws.configPath], { env: { CRONSAFE_STATE_POSTGRES: `${url.replace('postgres@', 'postgres:Pw4711x@')}?${query}` }, timeoutMs: 20_000 });
    for (const query of ['sslmode=prefer', 'uselibpqcompat=true&sslmode=prefer', 'sslmode=allow']) {
      const r = await start(query);
      expect(r.code, `${query}: ${r.stderr}`).toBe(1);
      expect(r.stderr).toContain('The server does not support SSL connections');
      const mode = query.slice(query.lastIndexOf('sslmode='));
      expect(r.stderr).toContain(`(the connection asks for TLS (${mode}) and this server offers none; the pg driver, unlike libpq, never falls back to an unencrypted connection`);
      expect(r.stderr).toContain('write sslmode=disable in the URL to connect without TLS, or enable TLS on the server)');
      expect(r.stderr).not.toContain('Pw4711x');
    }
    const strict = await start('sslmode=require', 'status');
    expect(strict.code).toBe(1);
    expect(strict.stderr).toContain('(the connection asks for TLS (sslmode=require) and this server offers none: write sslmode=disable');
    expect(strict.stderr).not.toContain('falls back');

    const plain = await start('sslmode=disable');
    expect(plain.code, plain.stderr).toBe(0);
  }, 60_000);

  // libpq refuses a PGSSLMODE it does not know (`invalid sslmode value`); the pg driver reads
  // it as none given and connected without TLS: a typo in the variable meant to require TLS
  // turned it off, silently.
  it('PGSSLMODE that libpq refuses (verify_full, Require): exit 78 naming state.postgres and PGSSLMODE, nothing written; a URL with its own sslmode runs', async () => {
    const ws = workspace({ handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: 'postgres://placeholder/x' } }, { 'a.txt': 'a' });
    const db = await server.createDatabase('tlsenv');
    for (const mode of ['verify_full', 'Require']) {
      for (const cmd of ['validate', 'run', 'status']) {
        const r = await runCli([cmd, '-c', ws.configPath], { env: { CRONSAFE_STATE_POSTGRES: db, PGSSLMODE: mode }, timeoutMs: 20_000 });
        expect(r.code, `${cmd} with PGSSLMODE=${mode}: ${r.stdout}${r.stderr}`).toBe(78);
        expect(r.stderr).toContain(`state.postgres: the environment variable PGSSLMODE is "${mode}", no sslmode`);
      }
    }
    // Nothing reached the server: the run made no ledger.
    expect(await server.admin("SELECT 1 FROM pg_namespace WHERE nspname = 'cronsafe'", [], 'tlsenv')).toEqual([]);
    const own = await runCli(['run', '-c', ws.configPath], { env: { CRONSAFE_STATE_POSTGRES: `${db}?sslmode=disable`, PGSSLMODE: 'verify_full' }, timeoutMs: 20_000 });
    expect(own.code, own.stderr).toBe(0);
  }, 60_000);

  // libpq 16's sslrootcert=system (the system's CAs), in URLs some providers give: the pg
  // driver read `system` as a file path, and every start failed with ENOENT open 'system'.
  it('sslrootcert=system: TLS verified against the system CAs (verify-full), not a file named system; a weaker sslmode beside it is refused with 78', async () => {
    const ws = workspace({ handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: 'postgres://placeholder/x' } }, { 'a.txt': 'a' });
    const db = await server.createDatabase('rootcert');
    const start = (query: string, cmd = 'run') => runCli([cmd, '-c', ws.configPath], { env: { CRONSAFE_STATE_POSTGRES: `${db}?${query}` }, timeoutMs: 20_000 });
    for (const query of ['sslrootcert=system', 'sslrootcert=system&sslmode=verify-full', 'sslmode=verify-full&sslrootcert=system']) {
      const r = await start(query);
      // This server has no TLS: the connection asked for it (before: ENOENT, the file "system").
      expect(r.code, `${query}: ${r.stderr}`).toBe(1);
      expect(r.stderr).toContain('The server does not support SSL connections');
      expect(r.stderr).not.toContain('ENOENT');
      expect(r.stderr).toMatch(/the connection asks for TLS \((sslmode=verify-full|sslrootcert=system)\) and this server offers none/);
    }
    for (const mode of ['require', 'verify-ca', 'disable', 'no-verify']) {
      for (const cmd of ['validate', 'run']) {
        const r = await start(`sslrootcert=system&sslmode=${mode}`, cmd);
        expect(r.code, `${mode} / ${cmd}: ${r.stderr}`).toBe(78);
        expect(r.stderr).toContain(`expected sslmode=verify-full (or none) with sslrootcert=system, got sslmode="${mode}"`);
      }
    }
    // Nothing reached the server: no run made a ledger.
    expect(await server.admin("SELECT 1 FROM pg_namespace WHERE nspname = 'cronsafe'", [], 'rootcert')).toEqual([]);
    // Eleven commands one after the other, each a Node start: past 60 s at a load of 40.
  }, 180_000);

  // `sslnegotiation=direct` turns TLS on in the driver (pg-connection-string: ssl = true), which
  // then never reads PGSSLMODE: the check refused a URL that connects with TLS whatever it says.
  it('a URL with sslnegotiation=direct and PGSSLMODE=Require: validate exits 0 (the driver takes TLS from the URL); sslnegotiation=postgres is still refused', async () => {
    const ws = workspace({ handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: 'postgres://app@db.example:5432/jobs?sslnegotiation=direct' } }, { 'a.txt': 'a' });
    const r = await runCli(['validate', '-c', ws.configPath], { env: { PGSSLMODE: 'Require' }, timeoutMs: 20_000 });
    expect(r.code, r.stderr).toBe(0);
    const other = await runCli(['validate', '-c', ws.configPath], { env: { PGSSLMODE: 'Require', CRONSAFE_STATE_POSTGRES: 'postgres://app@db.example:5432/jobs?sslnegotiation=postgres' }, timeoutMs: 20_000 });
    expect(other.code).toBe(78);
    expect(other.stderr).toContain('state.postgres: the environment variable PGSSLMODE is "Require", no sslmode');
  }, 60_000);
});
