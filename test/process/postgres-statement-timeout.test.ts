/**
 * A DBA's `statement_timeout` on the role (ALTER ROLE ... SET statement_timeout): a short one
 * (50 ms) cancels a claim now and then (57014), which is retried, so the pods of a group
 * finish the pass with each item charged once. One shorter than cronsafe's own statements
 * need (the first start's migration) fails each start: exit 1 naming the setting to change.
 * Before, the message said only "canceling statement due to statement timeout".
 */
import { describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';

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
