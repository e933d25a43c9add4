/**
 * state.postgres's query parameters and database name, checked before any connection. Before:
 * `?statement_timeout=abc` passed `cronsafe validate` and each run failed at the connect with
 * the server's `invalid value for parameter "statement_timeout"` (22023, exit 1 after the
 * start's retries); `?lock_timeout=30s` was read by the driver as 30 ms; libpq's
 * `?connect_timeout=abc` and `?keepalives=x` were taken in silence; a `%zz` in the database
 * name connected to a database named `jobs%zz` and its error showed the redacted URL, not
 * host:port/db. Now each is exit 78 naming state.postgres and what is wrong, with the password
 * hidden and nothing written; the values the driver reads as meant still run.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

const PASSWORD = 'Hunter2pw';
const COPY = ['/bin/cp', '{path}', '{output}'];

describe.skipIf(PG_SKIP_REASON !== undefined)('state.postgres URL parameters and database name', () => {
  let server: PgServer;
  let url = '';
  beforeAll(async () => {
    server = await startPostgres();
    // Trust authentication on loopback: the password is never asked for, but is in the URL.
    url = (await server.createDatabase('jobs')).replace('postgres@', `postgres:${PASSWORD}@`);
  });
  afterAll(async () => {
    await server?.stop();
  });

  const schemas = async (): Promise<string[]> =>
    (await server.admin<{ n: string }>(`SELECT nspname AS n FROM pg_namespace WHERE nspname = 'up'`, [], 'jobs')).map((r) => r.n);

  /** Each URL (with what stderr must say): validate and run exit 78 saying it, no password, nothing written. */
  const expectRefused = async (cases: Array<[string, string]>): Promise<void> => {
    for (const [postgres, said] of cases) {
      const ws = workspace({ handler: { command: COPY }, state: { postgres, schema: 'up' } }, { 'a.txt': 'a' });
      for (const cmd of ['validate', 'run']) {
        const r = await runCli([cmd, '-c', ws.configPath], { timeoutMs: 30_000 });
        expect(r.code, `${cmd} with ${postgres}: ${r.stderr}`).toBe(78);
        expect(r.stderr).toContain(said);
        expect(r.stderr + r.stdout).not.toContain(PASSWORD);
      }
    }
    expect(await schemas()).toEqual([]);
  };

  it('a value the driver or libpq cannot read, or a bad "%" in the database name: exit 78 naming state.postgres and it, no password, nothing written', async () => {
    const cases: Array<[string, string]> = [
      ['?statement_timeout=abc', 'state.postgres: expected ?statement_timeout= to be a whole number of milliseconds'],
      ['?lock_timeout=30s', 'state.postgres: expected ?lock_timeout= to be a whole number of milliseconds from 0 to 2147483647, got "30s": the pg driver reads only its leading digits (30 ms here)'],
      ['?connect_timeout=abc', 'state.postgres: expected ?connect_timeout= to be an integer, got "abc"'],
      ['?keepalives=x', 'state.postgres: expected ?keepalives= to be an integer, got "x"'],
      ['%zz', 'state.postgres: expected each "%" in the database name to start a %XX escape (two hex digits), got "%zz"'],
    ];
    await expectRefused(cases.map(([rest, said]) => [`${url}${rest}`, said]));
  }, 120_000);

  it('a port of 0 or past 65535, a ?port= that is no port, a user name or password whose escapes are no UTF-8: exit 78 naming state.postgres, no password, nothing written', async () => {
    // Before: each passed validate and every run exited 1 at the connect ("the port is not a
    // number from 1 to 65535", or the driver's "URI malformed").
    const port = String(server.port);
    const cases: Array<[string, string]> = [
      [url.replace(`:${port}/`, ':0/'), 'state.postgres: expected the port (the URL\'s, or its ?port= parameter) to be a number from 1 to 65535, got "0"'],
      [`${url}?port=abc`, 'state.postgres: expected the port (the URL\'s, or its ?port= parameter) to be a number from 1 to 65535, got "abc"'],
      [`${url}?port=70000`, 'got "70000"'],
      // The URL's own port, where the URL parser refuses it: said as the port, not as a
      // malformed URL with a password to percent-encode (what the user was told before).
      [url.replace(`:${port}/`, ':70000/'), 'state.postgres: expected the port (the URL\'s, or its ?port= parameter) to be a number from 1 to 65535, got "70000"'],
      [url.replace(`:${port}/`, ':5432x/'), 'state.postgres: expected the port (the URL\'s, or its ?port= parameter) to be a number from 1 to 65535, got "5432x"'],
      [url.replace(`:${PASSWORD}@`, `:${PASSWORD}%C3@`), "state.postgres: expected the user name's and password's %XX escapes to spell UTF-8 text"],
      [url.replace('//postgres:', '//postgres%E2%82:'), "state.postgres: expected the user name's and password's %XX escapes to spell UTF-8 text"],
      // Over the Unix socket: a URL without a host.
      [`postgres://postgres:${PASSWORD}%C3@/jobs?host=${encodeURIComponent(server.dir)}&port=${port}`, "state.postgres: expected the user name's and password's %XX escapes to spell UTF-8 text"],
    ];
    await expectRefused(cases);
  }, 180_000);

  it('values read as meant run: whole milliseconds, libpq integers, an empty value, a port, a password escape of UTF-8', async () => {
    const ws = workspace(
      {
        handler: { command: COPY },
        // A password with an escape of UTF-8 (é), and the port given again as ?port=.
        state: { postgres: `${url.replace(`:${PASSWORD}@`, `:${PASSWORD}%C3%A9@`)}?statement_timeout=60000&lock_timeout=&connect_timeout=5&keepalives=1&port=${server.port}`, schema: 'up' },
      },
      { 'a.txt': 'a', 'b.txt': 'b' },
    );
    const r = await runCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(0);
    const rows = await server.admin<{ state: string; n: number }>(`SELECT state, count(*)::int AS n FROM up.items GROUP BY state`, [], 'jobs');
    expect(rows).toEqual([{ state: 'done', n: 2 }]);
  }, 90_000);
});
