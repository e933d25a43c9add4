/**
 * docs/postgres.md, "Connection": a role's (or database's) settings that change how the
 * server reads what cronsafe sends. `array_nulls = off` (kept for old clients): the arrays
 * cronsafe sends as text write a null element as `NULL`, which the server then read as the
 * string "NULL": every pass failed at its first discovery, `invalid input syntax for type
 * bigint: "NULL" [22P02]` (exit 1), and so did every start after. Each session now turns it on
 * for itself.
 */
import { describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';

const ITEMS = 30;

describe.skipIf(PG_SKIP_REASON !== undefined)("PostgreSQL: a role's settings that change how the server reads cronsafe's statements", () => {
  const pg = usePostgresDatabase('admin');

  it('array_nulls = off: run does every item (exit 0), status and plan read the ledger', async () => {
    await pg.server.admin(`CREATE ROLE nonulls LOGIN`);
    await pg.server.admin(`CREATE DATABASE nonulls OWNER nonulls`);
    await pg.server.admin(`ALTER ROLE nonulls SET array_nulls = off`);
    const url = `postgres://nonulls@127.0.0.1:${pg.server.port}/nonulls`;
    const files = Object.fromEntries(Array.from({ length: ITEMS }, (_, i) => [`d${i % 3}/f${i}.txt`, String(i)]));
    const ws = workspace({ handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: url, schema: 'an' } }, files);
    for (const cmd of [['run'], ['status'], ['plan']]) {
      const r = await runCli([...cmd, '-c', ws.configPath], { timeoutMs: 60_000 });
      expect(r.code, `${cmd.join(' ')}: ${r.stderr}`).toBe(0);
    }
    const rows = await pg.server.admin<{ state: string; attempts: number; n: number }>(`SELECT state, attempts, count(*)::int AS n FROM an.items GROUP BY state, attempts`, [], 'nonulls');
    expect(rows).toEqual([{ state: 'done', attempts: 1, n: ITEMS }]);
  }, 120_000);
});
