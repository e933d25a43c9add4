/**
 * docs/postgres.md, "Connection": a control character inside state.postgres. The URL parser
 * (WHATWG, which the config check and the pg driver both use) drops every TAB and line break
 * wherever it is: `/e<TAB>u` (a value pasted from a spreadsheet) connected to database `eu`
 * and ran there, a password or host with one was another; other controls were passed on. Each
 * is refused (exit 78 naming state.postgres and where it is, never the password) by validate
 * and at start. Line breaks at the very end (a Secret's file, `echo`) are taken off, as the
 * parser did, but now before anything reads the URL: its last parameter kept them
 * (`sslrootcert=system<LF>` was read as a file named `system`: ENOENT at every start).
 */
import { describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';

const SECRET = 'Hunter2Secret';

describe.skipIf(PG_SKIP_REASON !== undefined)('a control character in state.postgres', () => {
  const db = usePostgresDatabase('eu');

  const run = async (url: string, args: string[]) => {
    const ws = workspace({ handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: 'postgres://placeholder/x', schema: 'ctl' } }, { 'a.txt': 'a' });
    return runCli([...args, '-c', ws.configPath], { env: { CRONSAFE_STATE_POSTGRES: url }, timeoutMs: 30_000 });
  };
  const ledgerMade = async (): Promise<boolean> =>
    (await db.server.admin<{ n: number }>(`SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'ctl'`, [], 'eu'))[0]!.n > 0;

  it('is refused by validate and at start (exit 78 naming state.postgres and where), never showing the password; nothing is written', async () => {
    const at = `127.0.0.1:${db.server.port}`;
    const cases: [string, RegExp][] = [
      [`postgres://postgres:${SECRET}@${at}/e\tu`, /found a TAB in the database name/],
      [`postgres://postgres:${SECRET}@${at}/e\nu`, /found a line break \(LF\) in the database name/],
      [`postgres://postgres:${SECRET}@${at}/e\x01u`, /found a control character \(U\+0001\) in the database name/],
      [`postgres://postgres:Hunter2\rSecret@${at}/eu`, /found a carriage return \(CR\) in the password/],
      [`postgres://post\tgres:${SECRET}@${at}/eu`, /found a TAB in the user name/],
      [`postgres://postgres:${SECRET}@127.0.\t0.1:${db.server.port}/eu`, /found a TAB in the host or port/],
      [`postgres://postgres:${SECRET}@${at}/eu?application_name=a\tb`, /found a TAB in the value of \?application_name=/],
      [`postgres://postgres:${SECRET}@${at}/eu\t`, /found a TAB in the database name/],
    ];
    for (const [url, where] of cases) {
      for (const cmd of ['validate', 'run']) {
        const r = await run(url, [cmd]);
        const what = `${cmd} with ${JSON.stringify(url)}: ${r.stderr}`;
        expect(r.code, what).toBe(78);
        expect(r.stderr, what).toMatch(/state\.postgres: expected no control character in it, found /);
        expect(r.stderr, what).toMatch(where);
        expect(r.stdout + r.stderr, what).not.toContain('Hunter2');
      }
    }
    expect(await ledgerMade()).toBe(false);
  }, 120_000);

  it("line breaks at the very end (a Secret's file) are taken off: the run works on the database named, and the URL's last parameter is read without them", async () => {
    for (const end of ['\n', '\r\n']) {
      const url = `postgres://postgres:${SECRET}@127.0.0.1:${db.server.port}/eu${end}`;
      const v = await run(url, ['validate']);
      expect(v.code, v.stderr).toBe(0);
      expect(v.stdout).toContain(`"postgres": "postgres://postgres:***@127.0.0.1:${db.server.port}/eu"`);
      const r = await run(url, ['run']);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout + r.stderr).not.toContain(SECRET);
    }
    expect(await ledgerMade()).toBe(true);
    // libpq's sslrootcert=system as the last parameter: verify-full against the system's CAs,
    // which this server (no TLS) refuses; it was read as a file named "system" (ENOENT).
    const r = await run(`postgres://postgres:${SECRET}@127.0.0.1:${db.server.port}/eu?sslrootcert=system\n`, ['run']);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain('The server does not support SSL connections');
    expect(r.stderr).not.toContain('ENOENT');
  }, 120_000);
});
