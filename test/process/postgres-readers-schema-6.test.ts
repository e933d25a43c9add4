/**
 * docs/postgres.md, "Schema": the read-only commands on a ledger an upgrade has not migrated
 * yet. status, dead-letter list and plan refused a ledger of schema 6 (exit 1, "`cronsafe run`
 * migrates it") though migration 007 changes nothing they read (it restates a check): during
 * an upgrade, until a run migrated it (or while its migration waited for a lock), an operator
 * could not look. They read it as it is now, migrating nothing; an older schema is still refused.
 */
import { describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';

describe.skipIf(PG_SKIP_REASON !== undefined)('read-only commands on a ledger of schema 6', () => {
  const db = usePostgresDatabase('readers6');

  it('status, dead-letter list and plan read it and leave it at 6; schema 5 is still refused', async () => {
    const ws = workspace({ handler: { command: ['cp', '{path}', '{output}'] }, state: { postgres: db.url, schema: 'qc' } }, { 'a.txt': 'a', 'b.txt': 'b' });
    const first = await runCli(['run', '-c', ws.configPath]);
    expect(first.code, first.stderr).toBe(0);
    // As the older cronsafe left it: 007 not applied.
    await db.server.admin(
      `ALTER TABLE qc.items DROP CONSTRAINT items_state_check, ADD CONSTRAINT items_state_check CHECK (state IN ('pending', 'claimed', 'done', 'dead'));
       DELETE FROM qc.schema_migrations WHERE version = 7`,
      [],
      'readers6',
    );
    const version = async (): Promise<number> => (await db.server.admin<{ v: number }>('SELECT max(version) AS v FROM qc.schema_migrations', [], 'readers6'))[0]!.v;

    const status = await runCli(['status', '--json', '-c', ws.configPath]);
    expect(status.code, status.stderr).toBe(0);
    expect((JSON.parse(status.stdout) as { items: unknown }).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
    const dead = await runCli(['dead-letter', 'list', '--json', '-c', ws.configPath]);
    expect(dead.code, dead.stderr).toBe(0);
    expect(JSON.parse(dead.stdout)).toEqual([]);
    const plan = await runCli(['plan', '-c', ws.configPath]);
    expect(plan.code, plan.stderr).toBe(0);
    expect(await version()).toBe(6);

    // An older schema (5: before 006) is still "a run migrates it".
    await db.server.admin(`DELETE FROM qc.schema_migrations WHERE version = 6`, [], 'readers6');
    const older = await runCli(['status', '-c', ws.configPath]);
    expect(older.code).toBe(1);
    expect(older.stderr).toContain("has schema version 5, older than this cronsafe's (7); `cronsafe run` migrates it (this command does not)");
  }, 90_000);
});
