/**
 * docs/postgres.md, "Schema": an upgrade's migration while a pass runs and a report is left
 * open in a transaction on `items` (`BEGIN; SELECT * FROM items LIMIT 1;` in psql, then idle).
 * Migration 007's ALTER TABLE items waited for its ACCESS EXCLUSIVE lock with no lock_timeout
 * and no log line, and every running pod's statements on `items` queued behind it: the pass
 * stalled for as long as the report stayed open. Each try now waits a few hundred ms and then
 * leaves the queue: the running pod finishes its pass while the report is still open, the new
 * pod says once which session it waits for, and migrates once the report ends. Real
 * processes, a real server.
 */
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { spawnCli, workspace, type Running } from '../helpers/cli.js';
import { asSchema6, openReport, PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';
import { MIGRATIONS } from '../../src/ledger/postgres/migrations/index.js';

const SCHEMA = 'migq';
const DB = 'migq';
const PASSWORD = 'Sekr3t-pw';
const ITEMS = 12;
const WAITS = /^ledger migration 7 \(state-check\) waits for a lock/;

describe.skipIf(PG_SKIP_REASON !== undefined)("a migration while a pass runs and a report holds a lock on items", () => {
  const db = usePostgresDatabase(DB);
  const open: Running[] = [];
  let reader: pg.Client | undefined;
  afterEach(async () => {
    await reader?.end().catch(() => undefined);
    reader = undefined;
    for (const r of open.splice(0)) r.child.kill('SIGKILL');
  });

  /** The ALTER of a pod's migration, queued on the server for the lock. */
  const alterWaiting = async (): Promise<boolean> =>
    (
      await db.server.admin<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock' AND query ILIKE '%ALTER TABLE%items%'`,
        [DB],
      )
    )[0]!.n > 0;

  it('the running pod finishes its pass while the report is open; the new pod names the report once, and migrates when it ends', async () => {
    // trust auth: the password is sent nowhere, but it is in the URL the pods are given.
    const url = db.url.replace('postgres@', `postgres:${PASSWORD}@`);
    expect(url).toContain(PASSWORD);
    const gates = path.join(db.server.dir, 'gates');
    mkdirSync(gates, { recursive: true });
    const files = Object.fromEntries(Array.from({ length: ITEMS }, (_, i) => [`item-${String(i).padStart(2, '0')}.txt`, `${i}\n`]));
    // Each attempt says it started, then waits for `go`: the pass is held mid-way for as long as the test needs.
    const handler = ['/bin/sh', '-c', ': > "$G/started-$CRONSAFE_ITEM_ID"; while [ ! -e "$G/go" ]; do sleep 0.05; done; cp "$1" "$2"', 'gated', '{path}', '{output}'];
    const ws = workspace({ handler: { command: handler }, state: { postgres: url, schema: SCHEMA } }, files);
    const env = { G: gates, CRONSAFE_JOB_NAME: 'qc-29001' };

    const first = spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 170_000 });
    open.push(first);
    await until(() => readdirSync(gates).some((f) => f.startsWith('started-')), 'the first pod to start its attempts', 60_000);

    // The ledger as the older cronsafe left it (schema 6), with that pod mid-pass on it.
    const newest = MIGRATIONS[MIGRATIONS.length - 1]!;
    expect(newest).toMatchObject({ version: 7, name: 'state-check' });
    await asSchema6(db.server, DB, SCHEMA);

    // A report left open in a transaction: it holds ACCESS SHARE on items until it ends.
    const report = await openReport(db.server, DB, SCHEMA);
    reader = report.reader;
    const readerPid = report.pid;

    // A pod of the new version starts (the same Job's late pod) and must migrate.
    const second = spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 170_000 });
    open.push(second);
    await until(async () => second.lines.some((l) => WAITS.test(String(l.msg))) || (await alterWaiting()), "the second pod's migration to wait for the report", 60_000);

    // The first pod's attempts finish: its completions and the claims after them must go
    // through while the report is still open (they queued behind the ALTER for good before).
    let firstExit: unknown;
    void first.exited.then((r) => (firstExit = r));
    writeFileSync(path.join(gates, 'go'), '');
    await until(() => firstExit !== undefined, 'the first pod to finish its pass while the report is open', 90_000);
    expect(firstExit, `first: ${first.stderr()}\nsecond: ${second.stderr()}`).toEqual({ code: 0, signal: null });
    expect(first.lines.find((l) => l.msg === 'run finished'), first.stderr()).toMatchObject({ outcome: 'completed' });
    // The report is still open and the migration still waits for it.
    expect((await reader.query<{ open: boolean }>(`SELECT now() IS NOT NULL AS open`)).rows[0]?.open).toBe(true);
    const before = await db.server.admin<{ state: string; n: number }>(`SELECT state, count(*)::int AS n FROM ${SCHEMA}.items GROUP BY state`, [], DB);
    expect(before).toEqual([{ state: 'done', n: ITEMS }]);
    expect((await db.server.admin<{ v: number }>(`SELECT max(version) AS v FROM ${SCHEMA}.schema_migrations`, [], DB))[0]?.v).toBe(6);

    // Said once, naming the report's session, never the password.
    const told = second.lines.filter((l) => WAITS.test(String(l.msg)));
    expect(told, JSON.stringify(second.lines.slice(-5))).toHaveLength(1);
    expect(told[0]!.msg).toContain(`pid ${readerPid} (user postgres, application report-psql, idle in transaction for `);
    expect(told[0]!.msg).toContain('pg_terminate_backend');
    expect(told[0]).toMatchObject({ migration: 7 });
    // (A statement of the running pod's that happened to be running then may be named beside it.)
    const holder = (told[0]!.holders as { pid?: unknown; queryStart?: unknown }[]).find((h) => h.pid === readerPid);
    expect(holder).toMatchObject({ application: 'report-psql', state: 'idle in transaction', table: 'items', mode: 'AccessShareLock' });
    expect(String(holder?.queryStart)).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);

    // The report ends: the migration goes through, and the late pod finds its Job's pass done.
    await reader.query('COMMIT');
    const secondExit = await second.exited;
    expect(secondExit, second.stderr()).toEqual({ code: 0, signal: null });
    expect((await db.server.admin<{ v: number }>(`SELECT max(version) AS v FROM ${SCHEMA}.schema_migrations`, [], DB))[0]?.v).toBe(7);
    const check = await db.server.admin<{ def: string }>(
      `SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = 'items_state_check' AND conrelid = $1::regclass`,
      [`${SCHEMA}.items`],
      DB,
    );
    expect(check[0]?.def).toContain("'{pending,claimed,done,dead}'::text[]");
    const items = await db.server.admin<{ n: number; attempts: number }>(`SELECT count(*)::int AS n, max(attempts) AS attempts FROM ${SCHEMA}.items WHERE state = 'done'`, [], DB);
    expect(items).toEqual([{ n: ITEMS, attempts: 1 }]);
    for (const id of Object.keys(files)) expect(existsSync(path.join(ws.out, `${id}.out`)), id).toBe(true);
    const said = first.stdout() + first.stderr() + second.stdout() + second.stderr();
    expect(said).not.toContain(PASSWORD);
  }, 180_000);
});
