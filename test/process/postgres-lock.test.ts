import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresLedger } from '../../src/ledger/postgres/index.js';
import { recordGroupQuery, tryPostgresRunLock, type RunLockOptions } from '../../src/ledger/postgres/run-lock.js';
import { PassConfigDiffers } from '../../src/ledger/run-lock.js';
import { finished, runCli, spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

/** A handler that takes WAIT_MS per item, so a run stays active while the test looks. */
const SLOW = `import { setTimeout as delay } from 'node:timers/promises';
export default async function slow(item, ctx) {
  ctx.log.info('handler started');
  await delay(Number(process.env.WAIT_MS ?? 100), undefined, { signal: ctx.signal });
}
`;

/** A lost node is simulated by dropping its packets: root and iptables (loopback rules only). */
const IPTABLES = (() => {
  try {
    execFileSync('iptables', ['-w', '-L', 'INPUT', '-n'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL run lock', () => {
  let server: PgServer;
  let url = '';
  let n = 0;
  beforeAll(async () => {
    server = await startPostgres();
    url = await server.createDatabase('lock');
  });
  afterAll(async () => {
    await server?.stop();
  });

  const lockOpts = (schema: string, group: string, over: Partial<RunLockOptions> = {}): RunLockOptions => ({
    url, schema, name: 'job', group, owner: `owner-${group}-${++n}`, ...over,
  });

  it('lets the pods of one group share the pass and keeps every other group out until all are gone', async () => {
    const schema = `l_${++n}`;
    const a = await tryPostgresRunLock(lockOpts(schema, 'job-1'));
    const b = await tryPostgresRunLock(lockOpts(schema, 'job-1'));
    expect([a?.joined, b?.joined]).toEqual([false, true]);
    expect(await tryPostgresRunLock(lockOpts(schema, 'job-2'))).toBeNull();
    await a!.release();
    expect(await tryPostgresRunLock(lockOpts(schema, 'job-2'))).toBeNull(); // b is still in the pass
    await b!.release();
    const c = await tryPostgresRunLock(lockOpts(schema, 'job-2'));
    expect(c?.joined).toBe(false);
    // Another schema (another ledger) is another lock.
    const other = await tryPostgresRunLock(lockOpts(`l_${++n}`, 'job-1'));
    expect(other).not.toBeNull();
    for (const l of [c, other]) await l!.release();
  });

  it("two jobs whose pass-lock keys collide (PostgreSQL's 32-bit hashtext): the skip says so, not 'another run group, holder unknown'", async () => {
    // Two jobs, each with its own schema, whose '<schema>.<name>' have one hashtext: found
    // among generated names (SELECT ... GROUP BY hashtext(...) HAVING count(*) > 1).
    const [x, y] = [{ schema: 'job224535', name: 'job-224535' }, { schema: 'job261439', name: 'job-261439' }];
    const [same] = await server.admin<{ same: boolean }>(`SELECT hashtext($1) = hashtext($2) AS same`, [`${x.schema}.${x.name}`, `${y.schema}.${y.name}`], 'lock');
    expect(same?.same).toBe(true);
    const a = await tryPostgresRunLock({ url, ...x, group: 'job-x-1', owner: 'x-1' });
    expect(a?.joined).toBe(false);

    const events: { msg: string; holder?: unknown }[] = [];
    const b = await tryPostgresRunLock({ url, ...y, group: 'job-y-1', owner: 'y-1' }, (msg, detail) => events.push({ msg, ...detail }));
    expect(b).toBeNull(); // not avoided (pods of an older cronsafe take the pass lock alone): told
    // Before: 'run lock held by another run group', holder 'unknown'.
    expect(events).toHaveLength(1);
    expect(events[0]!.msg).toContain('hash collision');
    expect(events[0]!.msg).toContain(`hashtext('${y.schema}.${y.name}')`);
    expect(events[0]!.holder).toBe('another job (hash collision)');

    // A fire of the job itself while its pass runs is an overlapping fire, as before; a pod of its pass joins.
    const own: { msg: string }[] = [];
    expect(await tryPostgresRunLock({ url, ...x, group: 'job-x-2', owner: 'x-2' }, (msg) => own.push({ msg }))).toBeNull();
    expect(own.map((e) => e.msg)).toEqual(['run lock held by another run group']);
    const pod = await tryPostgresRunLock({ url, ...x, group: 'job-x-1', owner: 'x-1b' });
    expect(pod?.joined).toBe(true);
    await a!.release();
    const again: { msg: string }[] = [];
    expect(await tryPostgresRunLock({ url, ...y, group: 'job-y-2', owner: 'y-2' }, (msg) => again.push({ msg }))).toBeNull(); // the joined pod holds it
    expect(again[0]?.msg).toContain('hash collision');
    await pod!.release();
    const c = await tryPostgresRunLock({ url, ...y, group: 'job-y-3', owner: 'y-3' });
    expect(c?.joined).toBe(false);
    await c!.release();
  });

  // The lock sessions opened since `before` was read. A session an earlier test released may
  // still be listed in pg_stat_activity for a moment under load (its backend not yet gone):
  // taken for this test's, it was the one terminated, and the test waited 60 s for a loss
  // that never came.
  const lockSessions = async (): Promise<Array<{ pid: number; port: number }>> =>
    server.admin<{ pid: number; port: number }>(`SELECT pid, client_port AS port FROM pg_stat_activity WHERE application_name = 'cronsafe-lock'`, [], 'lock');
  const newLockSessions = async (before: Array<{ pid: number }>): Promise<Array<{ pid: number; port: number }>> =>
    (await lockSessions()).filter((s) => !before.some((b) => b.pid === s.pid));
  const terminate = (sessions: Array<{ pid: number }>) => server.admin(`SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid`, [sessions.map((s) => s.pid)], 'lock');

  it("keeps its session through the server's idle_session_timeout (no window in which another Job could take the pass)", async () => {
    // A DBA's idle_session_timeout cut the idle lock session again and again: each time the
    // lock was free until it was taken again.
    const db = `idle_${++n}`;
    const idleUrl = await server.createDatabase(db);
    await server.admin(`ALTER DATABASE "${db}" SET idle_session_timeout = '400ms'`);
    const lock = await tryPostgresRunLock({ url: idleUrl, schema: 's', name: 'job', group: 'job-1', owner: 'o-1' });
    const [held] = await server.admin<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name = 'cronsafe-lock'`, [], db);
    expect(held).toBeDefined();
    // The readiness signal: the server cut a session that went idle after ours did.
    const control = new pg.Client({ connectionString: idleUrl });
    control.on('error', () => undefined);
    const ended = new Promise((r) => control.once('end', r));
    await control.connect();
    await ended;
    const alive = await server.admin(`SELECT 1 FROM pg_stat_activity WHERE pid = $1`, [held!.pid], db);
    expect(alive, 'the lock session survived the idle timeout').toHaveLength(1);
    expect(lock!.lost.aborted).toBe(false);
    await lock!.release();
  });

  it('takes the lock again when its session is cut, and reports it lost when it cannot', async () => {
    const schema = `l_${++n}`;
    const events: string[] = [];
    const before = await lockSessions();
    const a = await tryPostgresRunLock(lockOpts(schema, 'job-1', { retryBudgetMs: 1500 }), (msg) => events.push(msg));
    const kill = async () => terminate(await newLockSessions(before));
    expect(await kill()).toHaveLength(1);
    for (let i = 0; i < 100 && !events.includes('run lock taken again'); i++) await new Promise((r) => setTimeout(r, 20));
    expect(events).toEqual(['run lock session lost; taking the lock again', 'run lock taken again']);
    expect(await tryPostgresRunLock(lockOpts(schema, 'job-2'))).toBeNull(); // still ours
    expect(a!.lost.aborted).toBe(false);

    await server.halt();
    try {
      await new Promise<void>((resolve) => a!.lost.addEventListener('abort', () => resolve()));
      expect(String(a!.lost.reason)).toMatch(/run lock lost: gave up|run lock lost: take the run lock on PostgreSQL 127\.0\.0\.1/);
    } finally {
      await server.start();
    }
    await a!.release();
  });

  it('taken again mid-run after a newer cronsafe migrated the schema (a rolling upgrade), it is kept, not lost', async () => {
    // The retake ran the migration check: "newer than this cronsafe knows" lost the lock, and
    // the pass drained (exit 75) at the first cut of its session (a failover) during an upgrade.
    const schema = `l_${++n}`;
    const events: string[] = [];
    const before = await lockSessions();
    const a = await tryPostgresRunLock(lockOpts(schema, 'job-1'), (msg) => events.push(msg));
    await server.admin(`INSERT INTO ${schema}.schema_migrations (version, name, applied_at) VALUES (999, 'from-a-newer-cronsafe', 0)`, [], 'lock');
    expect(await terminate(await newLockSessions(before))).toHaveLength(1);
    for (let i = 0; i < 250 && !events.includes('run lock taken again') && !a!.lost.aborted; i++) await new Promise((r) => setTimeout(r, 20));
    expect(a!.lost.aborted ? String(a!.lost.reason) : '').toBe('');
    expect(events).toEqual(['run lock session lost; taking the lock again', 'run lock taken again']);
    expect(await server.admin(`SELECT max(version) AS v FROM ${schema}.schema_migrations`, [], 'lock')).toEqual([{ v: 999 }]);
    await a!.release();
  });

  it('taken again mid-run, the lock keeps the owner that started the pass of its group (joiners plan their fire by its start)', async () => {
    const schema = `l_${++n}`;
    const a = await tryPostgresRunLock(lockOpts(schema, 'job-1'));
    const owner = async () => (await server.admin<{ owner: string }>(`SELECT owner FROM ${schema}.run_lock`, [], 'lock'))[0]?.owner;
    const first = await owner();
    expect(first).toMatch(/^owner-job-1-/);
    const record = (group: string, who: string, retake: boolean) => {
      const query = recordGroupQuery(schema, 'job', group, who, Date.now(), retake);
      return server.admin(query.text, query.values, 'lock');
    };
    await record('job-1', 'a-sibling', true);
    expect(await owner()).toBe(first);
    await record('job-1', 'a-sibling', false); // a start, not a retake: it starts the pass
    expect(await owner()).toBe('a-sibling');
    await record('job-2', 'another-job', true); // another group got in while the session was cut
    expect(await owner()).toBe('another-job');
    await a!.release();
  });

  it("a pod of the group with another discovery config does not join the pass (PassConfigDiffers); one of a pass recorded without a config does", async () => {
    const schema = `l_${++n}`;
    const x = { 'source.directory': '/data/queue', 'source.include': ['**'] };
    const y = { 'source.directory': '/data/queue', 'source.include': ['*.txt'] };
    const a = await tryPostgresRunLock(lockOpts(schema, 'job-1', { passConfig: x }));
    expect(a?.joined).toBe(false);
    const refused = await tryPostgresRunLock(lockOpts(schema, 'job-1', { passConfig: y })).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(PassConfigDiffers);
    expect(refused).toMatchObject({ key: 'source.include', message: expect.stringContaining('source.include here ["*.txt"], in the pass ["**"]') });
    // A key one side does not know (another cronsafe version) is not compared.
    const b = await tryPostgresRunLock(lockOpts(schema, 'job-1', { passConfig: { ...x, 'a.newer.key': 1 } }));
    expect(b?.joined).toBe(true);
    await b!.release();
    await a!.release();
    // A pass recorded by a cronsafe from before migration 006 (no pass_config) is joined.
    const old = await tryPostgresRunLock(lockOpts(schema, 'job-2'));
    const joins = await tryPostgresRunLock(lockOpts(schema, 'job-2', { passConfig: y }));
    expect(joins?.joined).toBe(true);
    for (const l of [old, joins]) await l!.release();
  });

  it('taken again mid-run into a pass of its group recorded with another config since: lost (the run drains), not joined', async () => {
    const schema = `l_${++n}`;
    const x = { 'source.directory': '/data/queue' };
    const before = await lockSessions();
    const a = await tryPostgresRunLock(lockOpts(schema, 'job-1', { passConfig: x, retryBudgetMs: 1500 }));
    const ours = await newLockSessions(before);
    expect(ours).toHaveLength(1);
    const mine = ours[0];
    const sibling = await tryPostgresRunLock(lockOpts(schema, 'job-1', { passConfig: x }));
    expect(sibling?.joined).toBe(true);
    // As when every session of the pass was cut and a pod with the new config started it anew.
    await server.admin(`UPDATE ${schema}.run_lock SET pass_config = '{"source.directory": "/data/elsewhere"}'`, [], 'lock');
    expect(await server.admin(`SELECT pg_terminate_backend($1)`, [mine!.pid], 'lock')).toHaveLength(1);
    await new Promise<void>((resolve) => a!.lost.addEventListener('abort', () => resolve()));
    expect(String(a!.lost.reason)).toContain('run lock lost: source.directory: not the same as in the pass');
    for (const l of [a, sibling]) await l!.release();
  });

  it('a run of another Job exits 0 at once and records the skip; a pod of the same Job joins', async () => {
    // More than one discovery batch (256), so there is work left for a pod that comes later.
    const files = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`f${i}.txt`, `x${i}`]));
    const ws = workspace({ handler: { module: 'slow.mjs' }, state: { postgres: url, schema: 'cli' }, concurrency: 2, log: { level: 'info' } }, files);
    writeFileSync(path.join(ws.dir, 'slow.mjs'), SLOW);
    const env = (job: string) => ({ JOB_NAME: job, WAIT_MS: '10' });
    const first = spawnCli(['run', '-c', ws.configPath], { env: env('nightly-1') });
    await first.waitFor((l) => l.msg === 'handler started');

    const other = await runCli(['run', '-c', ws.configPath], { env: env('nightly-2') });
    expect(other.code, other.stderr).toBe(0);
    expect(finished(other)?.outcome).toBe('skipped-locked');
    // The lock it found held is the database's, not lock.path (unused on PostgreSQL).
    expect(other.lines.find((l) => l.msg === 'skipped: another run holds the lock')?.lock).toBe('postgres advisory lock (schema cli)');

    const sibling = await runCli(['run', '-c', ws.configPath], { env: env('nightly-1') });
    expect(sibling.code, sibling.stderr).toBe(0);
    expect(sibling.lines.some((l) => l.msg === 'joined the pass of this run group')).toBe(true);
    expect(finished(sibling)?.outcome).toBe('completed');
    expect((await first.exited).code).toBe(0);
    const firstRun = { lines: first.lines };

    const ledger = await openPostgresLedger({ url, schema: 'cli' });
    try {
      expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 1000, dead: 0 });
      expect((await ledger.totals()).lockSkips).toBe(1);
      // Both pods of nightly-1 did part of the work, and no item twice.
      const done = [firstRun, sibling].map((r) => (finished(r)?.counts as { succeeded: number } | undefined)?.succeeded ?? 0);
      expect(done[1]).toBeGreaterThan(0);
      expect(done[0]! + done[1]!).toBe(1000);
    } finally {
      await ledger.close();
    }
  });

  it('the server drops the lock of a SIGKILLed run: another Job starts at once', async () => {
    const ws = workspace({ handler: { module: 'slow.mjs' }, state: { postgres: url, schema: 'killed' } }, { 'a.txt': 'a' });
    writeFileSync(path.join(ws.dir, 'slow.mjs'), SLOW);
    const first = spawnCli(['run', '-c', ws.configPath], { env: { JOB_NAME: 'j1', WAIT_MS: '60000' } });
    await first.waitFor((l) => l.msg === 'handler started');
    first.child.kill('SIGKILL');
    await first.exited;
    const next = await runCli(['run', '-c', ws.configPath], { env: { JOB_NAME: 'j2', WAIT_MS: '10' } });
    expect(next.code, next.stderr).toBe(0);
    expect(next.lines.some((l) => l.msg === 'run lock taken (PostgreSQL advisory lock)')).toBe(true);
  });

  it.skipIf(!IPTABLES)('the server drops the lock of a pod whose node is lost (nothing ever reaches it again): another Job starts', async () => {
    // Before, the server held the lost session's pass lock until the kernel's keepalive gave
    // up (over two hours) and every fire meanwhile was skipped as an overrun.
    const schema = `l_${++n}`;
    const before = await lockSessions();
    const lost = await tryPostgresRunLock(lockOpts(schema, 'job-1', { probes: { idleSeconds: 1, intervalSeconds: 1, count: 2 } }));
    const sessions = await newLockSessions(before);
    expect(sessions).toHaveLength(1);
    // The node is gone: every packet of the lock's connection is dropped, both ways (and only those).
    const [client, pgPort] = [String(sessions[0]!.port), String(server.port)];
    const rules = [
      ['-s', '127.0.0.1', '--sport', client, '-d', '127.0.0.1', '--dport', pgPort],
      ['-s', '127.0.0.1', '--sport', pgPort, '-d', '127.0.0.1', '--dport', client],
    ];
    const iptables = (op: string, rule: string[]) => execFileSync('iptables', ['-w', op, 'INPUT', '-i', 'lo', '-p', 'tcp', ...rule, '-j', 'DROP']);
    for (const rule of rules) iptables('-I', rule);
    try {
      let next: Awaited<ReturnType<typeof tryPostgresRunLock>> = null;
      for (const deadline = Date.now() + 20_000; next === null && Date.now() < deadline; ) {
        next = await tryPostgresRunLock(lockOpts(schema, 'job-2'));
        if (next === null) await new Promise((r) => setTimeout(r, 250));
      }
      expect(next, "the lost node's session still holds the pass lock").not.toBeNull();
      await next!.release();
    } finally {
      for (const rule of rules) iptables('-D', rule);
    }
    await lost!.release();
  });
});
