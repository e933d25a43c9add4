/**
 * No database password in what cronsafe writes because of what a handler said. A command
 * handler inherited cronsafe's whole environment, CRONSAFE_STATE_POSTGRES (the ledger's URL,
 * password included) among it; one that printed its environment (`env`, `set -x`) or a
 * traceback quoting a connection string put the password in cronsafe's log lines (stderr is
 * logged), in the item's last error (`dead-letter list`, `status`, a Kubernetes Event) and
 * in the run's summary. Now the child does not get CRONSAFE_STATE_POSTGRES, and every
 * spelling of the known secrets (state.postgres's password encoded or not, PGPASSWORD, the
 * Pushgateway URL's password) is `***` in the handler's text. PGPASSWORD itself still
 * reaches the child: a handler may use it for its own database.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configure, runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

/** The ledger's password as the database knows it, and as the URL must spell it. */
const PASSWORD = 'Pw#Sec/ret%42';
const ENCODED = encodeURIComponent(PASSWORD);
const PGPASSWORD = 'HandlersOwnDb7';
const PUSH_PASSWORD = 'PushGatePass9';

describe.skipIf(PG_SKIP_REASON !== undefined)('secrets a handler prints never reach cronsafe\'s text', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
    await server.createDatabase('sec');
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('env, a quoted URL and the decoded password: *** in the log, last_error, dead-letter list and status', async () => {
    const ws = workspace(
      {
        handler: {
          // What a careless handler does: dump its environment, then fail quoting a URL
          // with the password decoded (as a traceback of a failed connect would).
          command: ['/bin/sh', '-c', 'env >&2; echo "could not connect to postgres://app:$DB_PASSWORD@db/sec" >&2; exit 3'],
          env: { DB_PASSWORD: '${DB_PASSWORD}' },
        },
        // The Pushgateway's URL from the environment, as a Secret gives it (nothing listens there).
        metrics: { pushgateway: '${PUSH_URL}' },
        retry: { maxAttempts: 1 },
      },
      { 'a.txt': 'a' },
    );
    const env = {
      CRONSAFE_STATE_POSTGRES: `postgres://postgres:${ENCODED}@127.0.0.1:${server.port}/sec`,
      DB_PASSWORD: PASSWORD,
      PGPASSWORD,
      PUSH_URL: `http://pusher:${PUSH_PASSWORD}@127.0.0.1:1/`,
    };
    const secrets = [PASSWORD, ENCODED, PGPASSWORD, PUSH_PASSWORD];
    const clean = (what: string, text: string) => {
      for (const s of secrets) expect(text, `${what} holds ${s}`).not.toContain(s);
    };

    const run = await runCli(['run', '-c', ws.configPath], { env, timeoutMs: 60_000 });
    expect(run.code, run.stderr).toBe(0);
    const log = run.stdout + run.stderr;
    // The handler did run and print: its lines are there, with the secrets hidden.
    expect(log).toContain('could not connect to postgres://app:***@db/sec');
    expect(log).toContain('PGPASSWORD=***');
    expect(log).toContain('PUSH_URL=http://pusher:***@127.0.0.1:1/');
    // cronsafe's own connection string is not the handler's business.
    expect(log).not.toContain('CRONSAFE_STATE_POSTGRES=');
    clean('the run log', log);

    const [row] = await server.admin<{ last_error: string }>('SELECT last_error FROM cronsafe.items', [], 'sec');
    expect(row?.last_error).toContain('exit code 3');
    clean('last_error', row!.last_error);
    const events = await server.admin<{ detail: string | null }>('SELECT detail::text AS detail FROM cronsafe.events', [], 'sec');
    clean('the ledger\'s events', events.map((e) => e.detail ?? '').join('\n'));

    for (const args of [['dead-letter', 'list'], ['dead-letter', 'list', '--json'], ['status'], ['status', '--json']]) {
      const r = await runCli([...args, '-c', ws.configPath], { env, timeoutMs: 30_000 });
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
      clean(args.join(' '), r.stdout + r.stderr);
    }
    const listed = await runCli(['dead-letter', 'list', '--json', '-c', ws.configPath], { env, timeoutMs: 30_000 });
    expect(JSON.stringify(JSON.parse(listed.stdout))).toContain('could not connect to postgres://app:***@db/sec');
    expect(readFileSync(ws.configPath, 'utf8')).toContain('${DB_PASSWORD}');
  }, 120_000);

  it('a password cut by the 2 KB stderr tail of the last error, or by handler.maxLogBytes: its piece is *** too', async () => {
    await server.createDatabase('sec3');
    const ws = workspace(
      {
        handler: {
          // The password, then 2040 bytes: the tail kept for the last error starts 8 characters into it.
          // And on stdout past maxLogBytes: the budget ends 5 characters into it.
          command: ['/bin/sh', '-c', 'printf 12345%s "$DB_PASSWORD"; printf %s "$DB_PASSWORD" >&2; head -c 2040 /dev/zero | tr "\\0" x >&2; exit 3'],
          env: { DB_PASSWORD: '${DB_PASSWORD}' },
          maxLogBytes: 10,
        },
        retry: { maxAttempts: 1 },
      },
      { 'a.txt': 'a' },
    );
    const env = { CRONSAFE_STATE_POSTGRES: `postgres://postgres:${ENCODED}@127.0.0.1:${server.port}/sec3`, DB_PASSWORD: PASSWORD };
    const run = await runCli(['run', '-c', ws.configPath], { env, timeoutMs: 60_000 });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('"msg":"12345***"');
    const [row] = await server.admin<{ last_error: string }>('SELECT last_error FROM cronsafe.items', [], 'sec3');
    expect(row?.last_error).toMatch(/^exit code 3: \*\*\*x{2040}$/);
    for (const piece of [PASSWORD.slice(0, 5), PASSWORD.slice(-8)]) expect(run.stdout + row!.last_error).not.toContain(piece);
  }, 120_000);

  it('a module handler that prints the ledger URL (console.log, console.error, ctx.log): *** in the run\'s stdout and stderr', async () => {
    // A module runs in cronsafe's process: its console.log and console.error went to the
    // run's stdout and stderr as written (and its ctx.log lines to the log), the ledger's
    // password in them, while a command handler's output had it as ***.
    await server.createDatabase('sec5');
    const ws = workspace({}, { 'a.txt': 'a' });
    const file = path.join(ws.dir, 'h.mjs');
    writeFileSync(
      file,
      `export default async (item, ctx) => {
        const url = process.env.CRONSAFE_STATE_POSTGRES;
        console.log('connecting to ' + url);
        console.error('password ' + decodeURIComponent(new URL(url).password));
        ctx.log.info({ url }, 'connecting');
      };`,
    );
    configure(ws, { handler: { module: file } });
    const env = { CRONSAFE_STATE_POSTGRES: `postgres://postgres:${ENCODED}@127.0.0.1:${server.port}/sec5` };
    const run = await runCli(['run', '-c', ws.configPath], { env, timeoutMs: 60_000 });
    expect(run.code, run.stderr).toBe(0);
    // The handler did run and print: its lines are there, with the password hidden.
    expect(run.stdout).toContain(`connecting to postgres://postgres:***@127.0.0.1:${server.port}/sec5`);
    expect(run.stderr).toContain('password ***');
    expect(run.stdout).toContain(`"url":"postgres://postgres:***@127.0.0.1:${server.port}/sec5"`);
    for (const s of [PASSWORD, ENCODED]) expect(run.stdout + run.stderr).not.toContain(s);
  }, 120_000);

  it("state.postgres from ${LEDGER_URL} (docs' \"from a Secret\"), or its password from ${DB_PASSWORD}: neither variable reaches a command handler, PGPASSWORD and handler.env's do", async () => {
    await server.createDatabase('sec4');
    const ws = workspace(
      {
        // What the handler got, byte for byte (its environment as the kernel gave it).
        handler: { command: ['/bin/sh', '-c', 'cat /proc/$$/environ > "$1"', 'sh', '{output}'], env: { MINE: '${DB_PASSWORD}' } },
        state: { postgres: '${LEDGER_URL}' },
      },
      { 'a.txt': 'a', 'b.txt': 'b' },
    );
    const env = {
      LEDGER_URL: `postgres://postgres:${ENCODED}@127.0.0.1:${server.port}/sec4`,
      DB_PASSWORD: PASSWORD,
      PGPASSWORD,
      UNRELATED: 'kept',
    };
    const run = await runCli(['run', '-c', ws.configPath], { env, timeoutMs: 60_000 });
    expect(run.code, run.stderr).toBe(0);
    const got = new Set(readFileSync(path.join(ws.out, 'a.txt.out'), 'latin1').split('\0'));
    // Before: LEDGER_URL (the password in it) and DB_PASSWORD were the handler's too.
    expect([...got].filter((v) => v.startsWith('LEDGER_URL=') || v.startsWith('DB_PASSWORD='))).toEqual([]);
    expect(got.has(`PGPASSWORD=${PGPASSWORD}`)).toBe(true);
    expect(got.has(`MINE=${PASSWORD}`)).toBe(true);
    expect(got.has('UNRELATED=kept')).toBe(true);
  }, 120_000);

  // docs/configuration.md's own example is `state.postgres: ${PGURL}`: a name starting with
  // PG was passed on whole, as if it were one of libpq's variables, URL and password included.
  it('state.postgres from ${PGURL} (the docs\' example) or its password from ${PG_PASS}: neither reaches a command handler, libpq\'s PGPASSWORD and PGUSER do', async () => {
    await server.createDatabase('sec7');
    const ws = workspace(
      {
        handler: { command: ['/bin/sh', '-c', 'cat /proc/$$/environ > "$1"', 'sh', '{output}'] },
        state: { postgres: '${PGURL}' },
      },
      { 'a.txt': 'a' },
    );
    const env = { PGURL: `postgres://postgres:${ENCODED}@127.0.0.1:${server.port}/sec7`, PG_PASS: PASSWORD, PGPASSWORD, PGUSER: 'someone' };
    const run = await runCli(['run', '-c', ws.configPath], { env, timeoutMs: 60_000 });
    expect(run.code, run.stderr).toBe(0);
    const got = new Set(readFileSync(path.join(ws.out, 'a.txt.out'), 'latin1').split('\0'));
    // Before: PGURL and PG_PASS were the handler's.
    expect([...got].filter((v) => v.startsWith('PGURL=') || v.startsWith('PG_PASS='))).toEqual([]);
    expect(got.has(`PGPASSWORD=${PGPASSWORD}`)).toBe(true);
    expect(got.has('PGUSER=someone')).toBe(true);
  }, 120_000);

  it('handler.env may still pass CRONSAFE_STATE_POSTGRES on, to a handler that runs cronsafe itself', async () => {
    const ws = workspace(
      {
        handler: {
          command: ['/bin/sh', '-c', 'test -n "$CRONSAFE_STATE_POSTGRES"'],
          env: { CRONSAFE_STATE_POSTGRES: '${CRONSAFE_STATE_POSTGRES}' },
        },
      },
      { 'a.txt': 'a' },
    );
    await server.createDatabase('sec2');
    const env = { CRONSAFE_STATE_POSTGRES: `postgres://postgres:${ENCODED}@127.0.0.1:${server.port}/sec2` };
    const run = await runCli(['run', '-c', ws.configPath], { env, timeoutMs: 60_000 });
    expect(run.code, run.stderr).toBe(0);
    const [row] = await server.admin<{ n: string }>("SELECT count(*) AS n FROM cronsafe.items WHERE state = 'done'", [], 'sec2');
    expect(Number(row?.n)).toBe(1);
  }, 120_000);
});

describe('secrets in what a module handler\'s code throws outside an attempt', () => {
  it('an uncaught exception from a timer quoting PGPASSWORD: *** in the log and on stderr', async () => {
    // The exception stops the run (exit 1); its message was logged and printed as thrown,
    // while one thrown by the function itself was already redacted.
    const ws = workspace({ handler: { module: 'h.mjs' } }, { 'a.txt': 'a' });
    const file = path.join(ws.dir, 'h.mjs');
    writeFileSync(
      file,
      "export default async () => { setTimeout(() => { throw new Error('cannot reach postgres://app:' + process.env.PGPASSWORD + '@db/x'); }, 0); await new Promise((r) => setTimeout(r, 100)); };",
    );
    configure(ws, { handler: { module: file } });
    const run = await runCli(['run', '-c', ws.configPath], { env: { PGPASSWORD }, timeoutMs: 60_000 });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain('uncaught exception: cannot reach postgres://app:***@db/x');
    expect(run.stdout + run.stderr).not.toContain(PGPASSWORD);
  }, 60_000);
});

describe('secrets in what a module handler throws at its import', () => {
  it('validate and run: the config error quotes the throw with PGPASSWORD as ***', async () => {
    const ws = workspace({}, { 'a.txt': 'a' });
    const file = path.join(ws.dir, 'h.mjs');
    writeFileSync(file, "throw new Error('cannot reach postgres://app:' + process.env.PGPASSWORD + '@db/x');");
    configure(ws, { handler: { module: file } });
    for (const command of ['validate', 'run']) {
      const r = await runCli([command, '-c', ws.configPath], { env: { PGPASSWORD }, timeoutMs: 60_000 });
      expect(r.code, r.stderr).toBe(78);
      expect(r.stderr).toContain('cannot import: cannot reach postgres://app:***@db/x');
      expect(r.stdout + r.stderr).not.toContain(PGPASSWORD);
    }
  }, 60_000);
});
