/**
 * docs/postgres.md: the password never appears in logs or error messages. Connection
 * strings as users really get them wrong, through CRONSAFE_STATE_POSTGRES (a Secret):
 * libpq's keyword form, a generated password with a raw '#' or '/', one slash too few,
 * blanks in front. Before, each of these printed the password: in the config error (exit
 * 78), in the connection error, or in `validate`'s and `run started`'s config summary; the
 * last three were not even refused as malformed.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

const SECRET = 'Hunter2Secret';

describe.skipIf(PG_SKIP_REASON !== undefined)('a PostgreSQL password is never printed, however the connection string is written', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
    await server.createDatabase('pw');
  });
  afterAll(async () => {
    await server?.stop();
  });

  const run = async (url: string, args: string[]) => {
    const ws = workspace({ handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: 'postgres://placeholder/x' } }, { 'a.txt': 'a' });
    const r = await runCli([...args, '-c', ws.configPath], { env: { CRONSAFE_STATE_POSTGRES: url }, timeoutMs: 30_000 });
    const printed = r.stdout + r.stderr;
    for (const spelling of [SECRET, 'Hun#ter2', 'Hunter2/', 'ter2Sec', '@ter2', 'ter2/', 'ter2?', '4711/']) expect(printed, `${args[0]} with ${JSON.stringify(url)}`).not.toContain(spelling);
    return r;
  };

  it('malformed: exit 78 naming state.postgres, without the password', async () => {
    const port = server.port;
    for (const url of [
      `host=127.0.0.1 port=${port} user=app password=${SECRET} dbname=pw`,
      `postgres://app:Hun#ter2Secret@127.0.0.1:${port}/pw`,
      `postgres://app:Hunter2/Secret@127.0.0.1:${port}/pw`,
      // a raw '@' before the '/' (or '?', '#'): new URL and the driver take `ter2` for the
      // host and the rest of the password for the database name
      `postgres://app:Hun@ter2/Secret@127.0.0.1:${port}/pw`,
      `postgres://app:Hun@ter2?Sec#ret@127.0.0.1:${port}/pw`,
      // digits, then a raw '/': new URL takes `4711` for a port and printed the URL whole
      `postgres://app:4711/Secret@127.0.0.1:${port}/pw`,
      `postgres:/app:${SECRET}@127.0.0.1:${port}/pw`,
      // new URL takes it, the driver does not (a host named 'base'); the tab one it does, by luck
      ` postgres://app:${SECRET}@127.0.0.1:${port}/pw`,
      `\tpostgres://app:${SECRET}@127.0.0.1:${port}/pw`,
      // not URLs at all: the scheme left out or mistyped, the URL quoted in its Secret
      `app:${SECRET}@127.0.0.1:${port}/pw`,
      `//app:${SECRET}@127.0.0.1:${port}/pw`,
      `postgres//app:${SECRET}@127.0.0.1:${port}/pw`,
      `"postgres://app:${SECRET}@127.0.0.1:${port}/pw"`,
      // a NUL (%00): the server refused the startup packet (class 08), retried as an outage, exit 1
      `postgres://app:${SECRET}@127.0.0.1:${port}/pw%00`,
      `postgres://ap%00p:${SECRET}@127.0.0.1:${port}/pw`,
      `postgres://app:${SECRET}@127.0.0.1:${port}/pw?application_name=%00x`,
      `postgres://app:${SECRET}@127.0.0.1:${port}/pw?options=-c%20search_path%3Dx%00`,
    ]) {
      for (const cmd of ['validate', 'run', 'status']) {
        const r = await run(url, [cmd]);
        expect(r.code, `${cmd} with ${JSON.stringify(url)}: ${r.stderr}`).toBe(78);
        expect(r.stderr).toContain('state.postgres');
      }
    }
  }, 120_000);

  it('a well-formed URL with the password: validate and the run show it redacted', async () => {
    const url = `postgres://postgres:${SECRET}@127.0.0.1:${server.port}/pw`;
    expect((await run(url, ['validate'])).code).toBe(0);
    const r = await run(url, ['run']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(':***@127.0.0.1');
  }, 60_000);

  // net.connect throws at once on such a port, and the driver's client then never ended:
  // every command exited 13 (Node's "unsettled top-level await") and printed nothing.
  // (A ?port= that is no port is refused with the config since: postgres-url-params.test.ts.)
  it('a port the driver cannot use (PGPORT=99999): exit 1 saying so, not a silent exit 13', async () => {
    for (const [url, env] of [[`postgres://app:${SECRET}@127.0.0.1/pw`, { PGPORT: '99999' }]] as const) {
      for (const cmd of ['run', 'status']) {
        const ws = workspace({ handler: { command: ['/bin/cp', '{path}', '{output}'] } }, { 'a.txt': 'a' });
        const r = await runCli([cmd, '-c', ws.configPath], { env: { CRONSAFE_STATE_POSTGRES: url, ...env }, timeoutMs: 30_000 });
        expect(r.code, `${cmd} with ${url} ${JSON.stringify(env)}: ${r.stderr}`).toBe(1);
        expect(r.stderr).toContain('the port is not a number from 1 to 65535');
        expect(r.stdout + r.stderr).not.toContain(SECRET);
      }
    }
  }, 60_000);

  // PostgreSQL 14+ asks for a password by SCRAM by default, and the driver's words for a URL
  // (or Secret) without one were "SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string".
  it('a server that asks for a password and none is given: exit 1 saying so, naming host:port', async () => {
    await server.admin(`CREATE ROLE nopw LOGIN PASSWORD '${SECRET}'`);
    const hba = path.join(server.dir, 'data', 'pg_hba.conf');
    writeFileSync(hba, `host all nopw 127.0.0.1/32 scram-sha-256\n${readFileSync(hba, 'utf8')}`);
    await server.admin('SELECT pg_reload_conf()');
    // The reload is asynchronous: wait until the server asks nopw for its password.
    const deadline = Date.now() + 10_000;
    for (;;) {
      const c = new pg.Client({ connectionString: `postgres://nopw:wrong@127.0.0.1:${server.port}/pw` });
      const refused = await c.connect().then(() => false, () => true);
      await c.end().catch(() => undefined);
      if (refused) break;
      if (Date.now() > deadline) throw new Error('pg_hba.conf was not reloaded');
      await new Promise((r) => setTimeout(r, 50));
    }
    for (const url of [`postgres://nopw@127.0.0.1:${server.port}/pw`, `postgres://nopw:@127.0.0.1:${server.port}/pw`]) {
      for (const cmd of ['run', 'status']) {
        const r = await run(url, [cmd]);
        expect(r.code, `${cmd} with ${url}: ${r.stderr}`).toBe(1);
        expect(r.stderr).toContain(`127.0.0.1:${server.port}/pw as nopw`);
        expect(r.stderr).toContain('the server asks for a password and none was given');
      }
    }
    // With the password, the same role gets in.
    const ok = await run(`postgres://nopw:${SECRET}@127.0.0.1:${server.port}/pw`, ['status']);
    expect(ok.stderr).not.toContain('password');
  }, 60_000);
});
