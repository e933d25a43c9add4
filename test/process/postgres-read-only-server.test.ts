/**
 * state.postgres naming a server that takes no writes: a hot standby (a read replica's
 * endpoint, given by mistake for the primary's), or a database or role with
 * `default_transaction_read_only = on` (what some providers set when the disk quota is
 * reached). Every start exited 1 with the server's `cannot execute INSERT in a read-only
 * transaction [25006]` alone, which does not say what to change. It now says why and what
 * to point state.postgres at; nothing is claimed or charged.
 *
 * Mid-pass the same answer is a failover under way (the demoted primary still behind the
 * endpoint for a moment, or a provider's read-only switch): the run's start wrote, so the
 * server took writes. It failed the pass at the next write (exit 1), its running attempts'
 * claims left for the lease and charged again; it is now retried as an outage is.
 *
 * Only once this pod's ledger has written: a pod that joins its group's pass writes nothing
 * to take the run lock, so on a database turned read-only it retried its first write for 30 s
 * ("a transient error; retrying") before it exited 1; it now fails at once, as a start does.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { finished, runCli, spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, writeGatedJob, type PgServer } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a server that takes no writes', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('default_transaction_read_only on the database: run, requeue and dead-letter retry exit 1 saying so, nothing charged; status still reads', async () => {
    const url = await server.createDatabase('ro');
    const ws = workspace({ handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: url, schema: 'ro' } }, { 'a.txt': 'a' });
    const first = await runCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    expect(first.code, first.stderr).toBe(0);
    await server.admin(`ALTER DATABASE ro SET default_transaction_read_only = on`);
    try {
      const files = { 'b.txt': 'b' };
      const ws2 = workspace({ handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: url, schema: 'ro' } }, files);
      for (const args of [['run'], ['requeue', '--all'], ['dead-letter', 'retry', '--all']]) {
        const r = await runCli([...args, '-c', ws2.configPath], { timeoutMs: 60_000 });
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(1);
        expect(r.stderr).toContain('[25006]');
        expect(r.stderr).toContain('the server takes no writes');
        expect(r.stderr).toContain('hot standby');
        expect(r.stderr).toContain('default_transaction_read_only');
      }
      const status = await runCli(['status', '-c', ws2.configPath]);
      expect(status.code, status.stderr).toBe(0);
    } finally {
      await server.admin(`ALTER DATABASE ro RESET default_transaction_read_only`);
    }
    const rows = await server.admin<{ id: string; state: string; attempts: number }>(`SELECT id, state, attempts FROM ro.items ORDER BY id`, [], 'ro');
    expect(rows).toEqual([{ id: 'a.txt', state: 'done', attempts: 1 }]);
  }, 120_000);

  it("a failover's read-only moment mid-pass (sessions cut, the server back taking no writes for a while): the pass rides through, exit 0, the item done and charged once", async () => {
    const url = await server.createDatabase('rofailover');
    const ws = workspace({}, { 'a.txt': 'a' });
    const { started, go } = writeGatedJob(ws, url);
    const run = spawnCli(['run', '-c', ws.configPath], { env: { CRONSAFE_RUN_GROUP: 'g1' }, timeoutMs: 120_000 });
    await until(() => existsSync(started), 'the handler to start', 30_000);
    await server.admin(`ALTER SYSTEM SET default_transaction_read_only = on`);
    await server.admin(`SELECT pg_reload_conf()`);
    try {
      // The failover: every session of the run cut, and the endpoint answers from a server that takes no writes.
      await server.admin(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'cronsafe%'`);
      writeFileSync(go, '');
      await run.waitFor((l) => l.msg === 'state store: a transient error; retrying' && String(l.err).includes('[25006]'), 20_000);
    } finally {
      await server.admin(`ALTER SYSTEM RESET default_transaction_read_only`);
      await server.admin(`SELECT pg_reload_conf()`);
    }
    const e = await run.exited;
    expect(e.code, run.stderr()).toBe(0);
    expect(finished(run)?.outcome).toBe('completed');
    const rows = await server.admin<{ id: string; state: string; attempts: number }>(`SELECT id, state, attempts FROM cronsafe.items ORDER BY id`, [], 'rofailover');
    expect(rows).toEqual([{ id: 'a.txt', state: 'done', attempts: 1 }]);
  }, 120_000);

  it("a pod joining its group's pass on a database turned read-only (its run lock wrote nothing) exits 1 at once saying so, as a start does; the pass it joined is not disturbed", async () => {
    const url = await server.createDatabase('rojoin');
    const ws = workspace({}, { 'a.txt': 'a', 'b.txt': 'b' });
    const { started, go } = writeGatedJob(ws, url);
    const first = spawnCli(['run', '-c', ws.configPath], { env: { CRONSAFE_RUN_GROUP: 'g1' }, timeoutMs: 120_000 });
    await until(() => existsSync(started), 'the handler to start', 30_000);
    // New sessions only: the first pod's own sessions still take writes.
    await server.admin(`ALTER DATABASE rojoin SET default_transaction_read_only = on`);
    let joiner;
    try {
      const t0 = Date.now();
      joiner = await runCli(['run', '-c', ws.configPath], { env: { CRONSAFE_RUN_GROUP: 'g1' }, timeoutMs: 60_000 });
      // Under the old code: 30 s of retries, then exit 1.
      expect(Date.now() - t0, joiner.stderr).toBeLessThan(15_000);
    } finally {
      await server.admin(`ALTER DATABASE rojoin RESET default_transaction_read_only`);
    }
    expect(joiner.lines.some((l) => l.msg === 'joined the pass of this run group'), joiner.stderr).toBe(true);
    expect(joiner.code, joiner.stderr).toBe(1);
    expect(joiner.stderr).toContain('[25006]');
    expect(joiner.stderr).toContain('the server takes no writes');
    expect(joiner.stderr).not.toContain('gave up after');
    expect(joiner.lines.filter((l) => l.msg === 'state store: a transient error; retrying')).toEqual([]);
    writeFileSync(go, '');
    const e = await first.exited;
    expect(e.code, first.stderr()).toBe(0);
    const rows = await server.admin<{ id: string; state: string; attempts: number }>(`SELECT id, state, attempts FROM cronsafe.items ORDER BY id`, [], 'rojoin');
    expect(rows).toEqual([
      { id: 'a.txt', state: 'done', attempts: 1 },
      { id: 'b.txt', state: 'done', attempts: 1 },
    ]);
  }, 120_000);
});
