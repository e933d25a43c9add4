/**
 * A DBA's `statement_timeout` on the role (ALTER ROLE ... SET statement_timeout): a short one
 * (50 ms) cancels a claim now and then (57014), which is retried, so the pods of a group
 * finish the pass with each item charged once. One shorter than cronsafe's own statements
 * need (the first start's migration) fails each start: exit 1 naming the setting to change.
 * Before, the message said only "canceling statement due to statement timeout". A statement
 * the timeout cancels mid-run (waiting for a lock an operator holds) is retried, and its
 * warning does not say to raise the setting: that hint is for the migration only.
 */
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from 'pg';
import { describe, expect, it } from 'vitest';
import { runCli, spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

const COPY = ['/bin/cp', '{path}', '{output}'];
const files = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`d${i % 4}/i${i}.txt`, String(i)]));

describe.skipIf(PG_SKIP_REASON !== undefined)("PostgreSQL: the role's statement_timeout", () => {
  const pg = usePostgresDatabase('admin');

  const roleWith = async (role: string, db: string, timeout: string): Promise<string> => {
    await pg.server.admin(`CREATE ROLE ${role} LOGIN`);
    await pg.server.admin(`CREATE DATABASE ${db} OWNER ${role}`);
    await pg.server.admin(`ALTER ROLE ${role} SET statement_timeout = '${timeout}'`);
    return `postgres://${role}@127.0.0.1:${pg.server.port}/${db}`;
  };

  it('shorter than the first migration needs: exit 1 naming statement_timeout and what to do, nothing written', async () => {
    const url = await roleWith('tiny', 'tiny', '1ms');
    const ws = workspace({ handler: { command: COPY }, state: { postgres: url, schema: 'st' } }, files(3));
    const r = await runCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain('127.0.0.1:');
    expect(r.stderr).toMatch(/statement_timeout, set for the role.*ALTER ROLE <role> SET statement_timeout/);
    const [row] = await pg.server.admin<{ n: number }>(`SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'st'`, [], 'tiny');
    expect(row?.n).toBe(0);
  }, 90_000);

  it('mid-run, a write cancelled while an operator locks the items table: retried, its warning without the migration\'s hint', async () => {
    await pg.server.admin(`CREATE ROLE mid LOGIN`);
    await pg.server.admin(`CREATE DATABASE mid OWNER mid`);
    const url = `postgres://mid@127.0.0.1:${pg.server.port}/mid`;
    // Each item's handler touches `started`, then waits for `go`.
    const gate = workspace({});
    const started = path.join(gate.dir, 'started');
    const go = path.join(gate.dir, 'go');
    const handler = { command: ['/bin/sh', '-c', `touch '${started}'; while [ ! -e '${go}' ]; do sleep 0.05; done; cp "$0" "$1"`, '{path}', '{output}'] };
    const ws = workspace({ handler, state: { postgres: url, schema: 'st' }, log: { level: 'info' } }, { 'first.txt': '1' });
    writeFileSync(go, '');
    // The first run migrates with no timeout; then the role gets one that its statements fit.
    const first = await runCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    expect(first.code, first.stderr).toBe(0);
    await pg.server.admin(`ALTER ROLE mid SET statement_timeout = '300ms'`);
    rmSync(go);
    rmSync(started);
    writeFileSync(path.join(ws.source, 'second.txt'), '2');
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 90_000 });
    await until(() => existsSync(started), 'the second item to start', 60_000);
    const locker = new Client({ connectionString: pg.server.url('mid') });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE st.items IN ACCESS EXCLUSIVE MODE');
      writeFileSync(go, '');
      const warning = await run.waitFor((l) => l.msg === 'state store: a transient error; retrying', 60_000);
      expect(String(warning.err)).toContain('canceling statement due to statement timeout');
      expect(String(warning.err)).not.toContain('ALTER ROLE');
      expect(String(warning.err)).not.toContain('statement_timeout, set for the role');
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      await locker.end();
    }
    const exit = await run.exited;
    expect(exit.code, run.stderr()).toBe(0);
    const rows = await pg.server.admin<{ state: string; n: number }>(`SELECT state, count(*)::int AS n FROM st.items GROUP BY state`, [], 'mid');
    expect(rows).toEqual([{ state: 'done', n: 2 }]);
  }, 150_000);

  it('50 ms: three pods of a run group finish the pass, each item done and charged once', async () => {
    const url = await roleWith('short', 'short', '50ms');
    const n = 300;
    const ws = workspace({ handler: { command: COPY }, state: { postgres: url, schema: 'st' }, log: { level: 'info' } }, files(n));
    const pods = await Promise.all([1, 2, 3].map(() => runCli(['run', '-c', ws.configPath], { env: { CRONSAFE_RUN_GROUP: 'st-1' }, timeoutMs: 120_000 })));
    for (const p of pods) expect(p.code, p.stderr).toBe(0);
    const rows = await pg.server.admin<{ state: string; n: number; charged: number }>(`SELECT state, count(*)::int AS n, sum(attempts - released)::int AS charged FROM st.items GROUP BY state`, [], 'short');
    expect(rows).toEqual([{ state: 'done', n, charged: n }]);
  }, 150_000);
});
