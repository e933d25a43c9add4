/**
 * A role whose settings end or fail sessions quickly, as a DBA sets them against sessions left
 * open by people (ALTER ROLE ... SET idle_in_transaction_session_timeout = '20ms', lock_timeout).
 *
 * The run lock's session takes the lock in one transaction of several statements (the
 * migration's checks, the gate, the decision), each a round trip. When the pod was slow to
 * send the next one (a loaded node: 4 pods on 2 cores), the server saw the session idle in its
 * transaction past 20 ms and ended it: the start was retried until its budget ran out (exit 1
 * after ~5 s, `terminating connection due to idle-in-transaction timeout [25P03]`), and a lock
 * taken again mid-run was lost (exit 75). Here the moment is made certain by a proxy that
 * hands the lock sessions' answers over 50 ms late (a slow link, or a pod that is slow to
 * read them), for every pod.
 *
 * The role's lock_timeout turned the lock session's wait for another pod's migration (the
 * advisory lock that serialises migrations) into failed starts: exit 1 after ~5 s, where
 * without it the pods wait for that migration and then run.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { finished, spawnCli, workspace, type Running, type Workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';
import { tcpProxy, type TcpProxy } from '../helpers/relay.js';
import { until } from '../helpers/wait.js';

/** ~20 ms of waiting per item (as I/O does), then the output. */
const IO_HANDLER = `import { writeFile } from 'node:fs/promises';
export default async function io(item, ctx) {
  await new Promise((resolve) => setTimeout(resolve, 20));
  await writeFile(ctx.outputPath, String(process.pid));
}
`;

const PODS = 4;
const ITEMS = 100;
/** How late the proxy hands a lock session's answers over: well past the role's 20 ms. */
const LATE_MS = 50;

let proxy: TcpProxy | undefined;
const running: Running[] = [];
afterEach(async () => {
  for (const r of running.splice(0)) if (r.child.exitCode === null) r.child.kill('SIGKILL');
  await proxy?.close();
  proxy = undefined;
});

describe.skipIf(PG_SKIP_REASON !== undefined)("PostgreSQL: the role's session timeouts and the run lock's session", () => {
  const pg = usePostgresDatabase('admin');

  /** A role and a database it owns, the role given `settings` (ALTER ROLE ... SET). */
  const roleWith = async (role: string, settings: Record<string, string>): Promise<string> => {
    await pg.server.admin(`CREATE ROLE ${role} LOGIN`);
    await pg.server.admin(`CREATE DATABASE ${role} OWNER ${role}`);
    for (const [k, v] of Object.entries(settings)) await pg.server.admin(`ALTER ROLE ${role} SET ${k} = '${v}'`);
    return `postgres://${role}@127.0.0.1:${pg.server.port}/${role}`;
  };

  const backlog = (url: string, schema: string): Workspace => {
    const files = Object.fromEntries(Array.from({ length: ITEMS }, (_, i) => [`d${i % 4}/i${i}.txt`, String(i)]));
    const ws = workspace({ handler: { module: 'handler.mjs' }, state: { postgres: url, schema }, concurrency: 4, log: { level: 'info' } }, files);
    writeFileSync(path.join(ws.dir, 'handler.mjs'), IO_HANDLER);
    return ws;
  };

  const pods = (ws: Workspace, group: string): Running[] => {
    const runs = Array.from({ length: PODS }, () => spawnCli(['run', '-c', ws.configPath], { env: { CRONSAFE_RUN_GROUP: group }, timeoutMs: 150_000 }));
    running.push(...runs);
    return runs;
  };

  /** Every pod exit 0 with its pass completed, its lock never lost; every item done, charged once. */
  const allFinished = async (runs: Running[], db: string, schema: string): Promise<void> => {
    const exits = await Promise.all(runs.map((r) => r.exited));
    for (const [i, e] of exits.entries()) expect(e.code, runs[i]!.stderr()).toBe(0);
    for (const r of runs) expect(finished(r)?.outcome, r.stderr()).toBe('completed');
    expect(runs.flatMap((r) => r.lines.filter((l) => /run lock session lost/.test(l.msg)).map((l) => l.msg))).toEqual([]);
    const rows = await pg.server.admin<{ state: string; attempts: number; n: number }>(
      `SELECT state, attempts, count(*)::int AS n FROM ${schema}.items GROUP BY state, attempts ORDER BY state, attempts`,
      [],
      db,
    );
    expect(rows).toEqual([{ state: 'done', attempts: 1, n: ITEMS }]);
  };

  it(`idle_in_transaction_session_timeout at 20 ms, the lock sessions' answers ${LATE_MS} ms late: ${PODS} pods all finish (exit 0), every item done once`, async () => {
    const url = await roleWith('idler', { idle_in_transaction_session_timeout: '20ms' });
    // PostgreSQL 17's transaction_timeout is as short where the server has it.
    const [v] = await pg.server.admin<{ has: boolean }>(`SELECT current_setting('transaction_timeout', true) IS NOT NULL AS has`);
    if (v?.has) await pg.server.admin(`ALTER ROLE idler SET transaction_timeout = '20ms'`);
    proxy = await tcpProxy(pg.server.port, {
      fromServer(chunk, conn) {
        if (!conn.startup.includes('cronsafe-lock')) return true;
        // Timers of one delay fire in the order they were set: the answers keep their order.
        setTimeout(() => conn.client.write(chunk), LATE_MS);
        return false;
      },
    });
    const ws = backlog(url.replace(`:${pg.server.port}/`, `:${proxy.port}/`), 'it');
    await allFinished(pods(ws, 'idle-tx'), 'idler', 'it');
  }, 180_000);

  it("lock_timeout at 20 ms while another session migrates the schema for longer than a start's 5 s: the pods wait for it, then all finish", async () => {
    const url = await roleWith('locker', { lock_timeout: '20ms' });
    // Another pod's migration, as the pods see it: the advisory lock that serialises migrations of schema `lt`, held.
    const holder = new Client({ connectionString: pg.server.url('locker') });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT pg_advisory_xact_lock(hashtext('cronsafe:migrate'), hashtext('lt'))`);
      const ws = backlog(url, 'lt');
      const runs = pods(ws, 'lock-timeout');
      const waiting = async (): Promise<number> => {
        const [r] = await pg.server.admin<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory' AND NOT l.granted AND a.application_name = 'cronsafe-lock'`,
          [],
          'locker',
        );
        return r?.n ?? 0;
      };
      await until(async () => runs.some((r) => r.child.exitCode !== null) || (await waiting()) === PODS, 'every pod to wait for the migration', 60_000);
      // Held past a start's budget (5 s): a pod that failed its waits (55P03) and retried them has given up by then.
      const heldUntil = Date.now() + 7_000;
      await until(async () => Date.now() >= heldUntil || runs.some((r) => r.child.exitCode !== null), 'the hold', 30_000);
      expect(runs.map((r) => r.child.exitCode), runs.map((r) => r.stderr()).join('\n')).toEqual(Array(PODS).fill(null));
      await holder.query('COMMIT');
      await allFinished(runs, 'locker', 'lt');
    } finally {
      await holder.end();
    }
  }, 180_000);
});
