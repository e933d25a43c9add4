/**
 * `cronsafe daemon` on PostgreSQL, started (an upgrade) while a session holds a lock on the
 * ledger's `items` in an open transaction (a report left open in psql). The daemon's first
 * open of the ledger migrates it, and the migration waits for that lock a few hundred ms at a
 * time for up to 5 minutes, as a run's does. A run says once which session it waits for; the
 * daemon's open said nothing: an operator saw a silent daemon, not even `daemon started`. It
 * now names the session as a run does, and goes on once the session ends. Real processes, a
 * real server. A daemon SIGTERMed while another pod's migration held the migration's advisory
 * lock (that pod waiting for such a session in turn) waited in pg_advisory_xact_lock, and so
 * for the drain's last resort (exit 75), not stopping at once as during its own migration's wait.
 */
import path from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { FIXTURES, runCli, spawnCli, workspace, type Running } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';
import { asSchema6, openReport, PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';
import { MIGRATIONS } from '../../src/ledger/postgres/migrations/index.js';

const DB = 'daemonmig';
const SCHEMA = 'dmig';
const PASSWORD = 'Sekr3t-pw';
const WAITS = /^ledger migration 7 \(state-check\) waits for a lock on schema dmig's tables, held by pid \d+ \(user postgres, application report-psql, idle in transaction/;

describe.skipIf(PG_SKIP_REASON !== undefined)('cronsafe daemon on PostgreSQL, its first open migrating while a session holds a lock on items', () => {
  const db = usePostgresDatabase(DB);
  let reader: pg.Client | undefined;
  const open: Running[] = [];
  afterEach(async () => {
    await reader?.end().catch(() => undefined);
    reader = undefined;
    for (const r of open.splice(0)) if (r.child.exitCode === null) r.child.kill('SIGKILL');
  });

  /** A workspace whose PostgreSQL ledger at `schema` is as the older cronsafe left it (schema 6): the daemon's first open migrates it. */
  const olderLedger = async (schema: string): Promise<ReturnType<typeof workspace>> => {
    const ws = workspace(
      { handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') }, state: { postgres: db.url, schema }, schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' } },
      { 'a.txt': 'a' },
    );
    const first = await runCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    expect(first.code, first.stderr).toBe(0);
    await asSchema6(db.server, DB, schema);
    return ws;
  };

  /** SIGTERM: exit 0 with `daemon stopped`, well within a pod's grace period (30 s): not the migration's 5 minutes, nor the drain's last resort. */
  const stopsAtOnce = async (daemon: Running): Promise<void> => {
    const asked = Date.now();
    daemon.child.kill('SIGTERM');
    const exit = await daemon.exited;
    const took = Date.now() - asked;
    expect(exit.code, daemon.stderr()).toBe(0);
    expect(daemon.lines.find((l) => l.msg === 'daemon stopped'), daemon.stderr()).toMatchObject({ signal: 'SIGTERM' });
    expect(took).toBeLessThan(20_000);
  };

  it('names the session it waits for, and starts once that session ends', async () => {
    // trust auth: the password is sent nowhere, but it is in the URL the daemon is given.
    const url = db.url.replace('postgres@', `postgres:${PASSWORD}@`);
    const ws = workspace(
      { handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') }, state: { postgres: url, schema: SCHEMA }, schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' } },
      { 'a.txt': 'a' },
    );
    // The ledger as the older cronsafe left it (schema 6).
    const first = await runCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    expect(first.code, first.stderr).toBe(0);
    expect(MIGRATIONS[MIGRATIONS.length - 1]).toMatchObject({ version: 7, name: 'state-check' });
    await asSchema6(db.server, DB, SCHEMA);
    // A report left open in a transaction: it holds ACCESS SHARE on items until it ends.
    const report = await openReport(db.server, DB, SCHEMA);
    reader = report.reader;
    const { pid } = report;

    const daemon = spawnCli(['daemon', '-c', ws.configPath], { timeoutMs: 120_000 });
    open.push(daemon);
    const told = await daemon.waitFor((l) => /waits for a lock/.test(String(l.msg)) || l.msg === 'daemon started', 60_000);
    expect(told.msg, daemon.stderr()).toMatch(WAITS);
    expect(told.msg).toContain(`pid ${pid} `);
    expect(told.msg).toContain('pg_terminate_backend');
    expect(told).toMatchObject({ level: 'warn', migration: 7 });
    expect(daemon.stdout() + daemon.stderr()).not.toContain(PASSWORD);
    // Still waiting: not started, the schema still at 6.
    expect(daemon.lines.some((l) => l.msg === 'daemon started')).toBe(false);
    expect((await db.server.admin<{ v: number }>(`SELECT max(version) AS v FROM ${SCHEMA}.schema_migrations`, [], DB))[0]?.v).toBe(6);

    // The report ends: the migration goes through and the daemon starts.
    await reader.query('COMMIT');
    await daemon.waitFor((l) => l.msg === 'daemon started', 60_000);
    expect((await db.server.admin<{ v: number }>(`SELECT max(version) AS v FROM ${SCHEMA}.schema_migrations`, [], DB))[0]?.v).toBe(7);
    daemon.child.kill('SIGTERM');
    expect((await daemon.exited).code, daemon.stderr()).toBe(0);
    expect(daemon.lines.filter((l) => /waits for a lock/.test(String(l.msg)))).toHaveLength(1);
  }, 150_000);

  it('SIGTERM while it waits: it stops at once (exit 0, `daemon stopped`), not at the drain\'s last resort, nothing migrated', async () => {
    const ws = await olderLedger('dstop');
    reader = (await openReport(db.server, DB, 'dstop')).reader;
    const daemon = spawnCli(['daemon', '-c', ws.configPath], { timeoutMs: 120_000 });
    open.push(daemon);
    await daemon.waitFor((l) => /waits for a lock/.test(String(l.msg)), 60_000);
    await stopsAtOnce(daemon);
    expect((await db.server.admin<{ v: number }>(`SELECT max(version) AS v FROM dstop.schema_migrations`, [], DB))[0]?.v).toBe(6);
  }, 150_000);

  it("SIGTERM while another pod's migration holds the migration lock: it stops at once (exit 0, `daemon stopped`), nothing migrated", async () => {
    const ws = await olderLedger('dadv');
    // Another pod's migration of the schema, in its transaction: it holds the migration's advisory lock (migrate.ts).
    reader = new pg.Client({ connectionString: db.server.url(DB), application_name: 'other-pod' });
    await reader.connect();
    await reader.query('BEGIN');
    await reader.query(`SELECT pg_advisory_xact_lock(hashtext('cronsafe:migrate'), hashtext($1))`, ['dadv']);
    const holder = (await reader.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const daemon = spawnCli(['daemon', '-c', ws.configPath], { timeoutMs: 120_000 });
    open.push(daemon);
    // Ready: the daemon's open has asked for the migration lock (its session's statement names it).
    const asking = async (): Promise<boolean> =>
      (await db.server.admin<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid <> $1 AND datname = $2 AND query LIKE '%advisory_xact_lock(hashtext(''cronsafe:migrate'')%'`, [holder, DB]))[0]!.n > 0;
    await until(asking, "the daemon's migration to ask for the migration lock", 60_000);
    expect(daemon.lines.some((l) => l.msg === 'daemon started')).toBe(false);
    await stopsAtOnce(daemon);
    await reader.query('ROLLBACK');
    expect((await db.server.admin<{ v: number }>(`SELECT max(version) AS v FROM dadv.schema_migrations`, [], DB))[0]?.v).toBe(6);
  }, 150_000);
});
