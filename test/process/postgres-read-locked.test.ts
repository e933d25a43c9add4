/**
 * The operator's read commands on PostgreSQL while another session holds a lock on the
 * ledger's tables (a `LOCK TABLE` left open, a hung migration): they waited silently for as
 * long as the lock was held. Now they give up after a few seconds, exit 1, naming the
 * session that holds the lock.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: the operator\'s commands (status, dead-letter list, plan, requeue, dead-letter retry)', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('each exits 1 within seconds, naming the session that holds the lock, instead of hanging', async () => {
    const url = await server.createDatabase('locked');
    const ws = workspace({ handler: { command: ['true'] }, state: { postgres: url, schema: 'lk' } }, { 'a.txt': 'a' });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);

    await whileLocked(url, 'lk', 'hung-migration', [['status'], ['status', '--json'], ['dead-letter', 'list'], ['plan'], ['requeue', '--all', '--dry-run']], ws.configPath, (r) => {
      expect(r.stderr).toContain('on items (AccessExclusiveLock)');
    });
    // Once the lock is gone, status reads as ever.
    expect((await runCli(['status', '-c', ws.configPath])).code).toBe(0);
  }, 60_000);

  it('requeue and dead-letter retry exit 1 within seconds too, naming the session, and move nothing (SQLite: "database is locked" after 5 s)', async () => {
    const url = await server.createDatabase('writelocked');
    const ws = workspace(
      { handler: { command: ['sh', '-c', 'case "$CRONSAFE_ITEM_ID" in bad*) exit 3;; esac'] }, retry: { maxAttempts: 1 }, state: { postgres: url, schema: 'wl' } },
      { 'a.txt': 'a', 'bad.txt': 'b' },
    );
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);

    await whileLocked(url, 'wl', 'vacuum-full', [['requeue', '--all'], ['requeue', 'a.txt'], ['dead-letter', 'retry', '--all'], ['dead-letter', 'retry', 'bad.txt']], ws.configPath);
    const r = await runCli(['status', '--json', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect((JSON.parse(r.stdout) as { items: Record<string, number>; requeued: number })).toMatchObject({ items: { done: 1, dead: 1 }, requeued: 0 });
  }, 60_000);

  it('status says when a dead run\'s claims are taken back on PostgreSQL: after their lease, not at the next run\'s start', async () => {
    const url = await server.createDatabase('claimednote');
    const ws = workspace({ handler: { command: ['true'] }, state: { postgres: url, schema: 'cn' }, lease: { seconds: 45, renewSeconds: 15 } }, { 'a.txt': 'a' });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    const r = await runCli(['status', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    const claimed = r.stdout.split('\n').find((l) => l.trimStart().startsWith('claimed'));
    expect(claimed).toContain('left running by a run that died: taken back once their lease (lease.seconds: 45) has run out');
    expect(claimed).not.toContain('the next run takes them back');
  }, 30_000);

  it('plan says the same of a claim left on PostgreSQL, not "the next run takes them back"', async () => {
    const url = await server.createDatabase('claimedplan');
    const ws = workspace({ handler: { command: ['true'] }, state: { postgres: url, schema: 'cp' }, lease: { seconds: 45, renewSeconds: 15 } }, { 'a.txt': 'a', 'b.txt': 'b' });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    // What a pod SIGKILLed mid-attempt leaves: a claim whose lease has not run out.
    await server.admin(`UPDATE cp.items SET state = 'claimed', owner = 'vm:1:gone', lease_until = $1 WHERE id = 'a.txt'`, [Date.now() + 45_000], 'claimedplan');
    const r = await runCli(['plan', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    const claimed = r.stdout.split('\n').find((l) => l.startsWith('claimed'));
    expect(claimed).toMatch(/^claimed +1 /);
    expect(claimed).toContain('left by a run that died (taken back once their lease, lease.seconds: 45, has run out');
    expect(claimed).not.toContain('the next run takes them back');
  }, 30_000);
});

/**
 * Runs `commands` at once while another session (`application`) holds `schema.items` in
 * ACCESS EXCLUSIVE mode: each must exit 1 within seconds, in one line naming that session.
 */
async function whileLocked(url: string, schema: string, application: string, commands: string[][], configPath: string, more?: (r: Awaited<ReturnType<typeof runCli>>) => void): Promise<void> {
  const locker = new pg.Client({ connectionString: url, application_name: application });
  await locker.connect();
  try {
    const pid = (await locker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    await locker.query('BEGIN');
    await locker.query(`LOCK TABLE ${schema}.items IN ACCESS EXCLUSIVE MODE`);
    const started = Date.now();
    // Killed after 30 s (the lock is held far longer): before, every one of them was.
    const results = await Promise.all(commands.map((c) => runCli([...c, '-c', configPath], { timeoutMs: 30_000 })));
    for (const [i, r] of results.entries()) {
      expect(r.signal, `${commands[i]!.join(' ')} was killed: it hung`).toBeNull();
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/^cronsafe: state store unavailable \(postgres\): .*waited 5 s for a lock on the ledger's tables/);
      expect(r.stderr).toContain(`held by pid ${pid} (user postgres, application ${application}, idle in transaction since `);
      more?.(r);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
    }
    expect(Date.now() - started).toBeLessThan(25_000);
  } finally {
    await locker.end();
  }
}
