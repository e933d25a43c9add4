/**
 * Issue 11: on PostgreSQL a pass is shared until it ends. Every pod of a run group keeps
 * claiming while items it could claim are pending, whoever scanned them, and a pod that
 * joins late still gets its share. Real processes, a real server, a handler that mostly
 * waits (like I/O), default retry settings.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnCli, workspace, type LogLine, type Running, type Workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

/**
 * ~60 ms of waiting per item, then a small output naming the process. With
 * TEST_HANG_FIRST=n in its environment, the first n items a process starts wait (up to 60 s)
 * until the attempt is aborted: a pod stuck on slow items that a forced stop hands back.
 */
const IO_HANDLER = `import { writeFile } from 'node:fs/promises';
let started = 0;
export default async function io(item, ctx) {
  const hang = started++ < Number(process.env.TEST_HANG_FIRST ?? 0);
  await new Promise((resolve, reject) => {
    const t = setTimeout(resolve, hang ? 60000 : 60);
    ctx.signal?.addEventListener('abort', () => { clearTimeout(t); reject(new Error('aborted')); }, { once: true });
  });
  await writeFile(ctx.outputPath, String(process.pid));
}
`;

interface Finished {
  outcome: string;
  counts: { succeeded: number };
  /** The ledger's counts as the process saw them at its very end. */
  items: { pending: number; claimed: number; done: number; dead: number };
}

/** A workspace of `n` small files for run group `schema`, with the I/O-like module handler. */
function backlog(url: string, schema: string, n: number, extra: Record<string, unknown> = {}): Workspace {
  const files = Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i % 10}/item-${i}.txt`, String(i)]));
  // concurrency 4 is the default on a 2-core machine; set so the test means the same anywhere.
  const ws = workspace({ handler: { module: 'handler.mjs' }, state: { postgres: url, schema }, concurrency: 4, log: { level: 'info' }, ...extra }, files);
  writeFileSync(path.join(ws.dir, 'handler.mjs'), IO_HANDLER);
  return ws;
}

const finishedLine = (r: Running): Finished => {
  const l = r.lines.find((x: LogLine) => x.msg === 'run finished');
  if (!l) throw new Error(`no 'run finished' line; stderr:\n${r.stderr()}`);
  return l as unknown as Finished;
};

/** The queue size a process runs with, from its `run started` config summary. */
const queueSizeOf = (r: Running): number => {
  const l = r.lines.find((x) => x.msg === 'run started') as { config?: { queueSize?: number } } | undefined;
  const q = l?.config?.queueSize;
  if (typeof q !== 'number') throw new Error(`no queueSize in 'run started'`);
  return q;
};

async function pollUntil(cond: () => Promise<boolean>, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a pass is shared by its pods until it ends (issue 11)', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  const pendingNow = async (db: string, schema: string): Promise<number> => {
    const [r] = await server.admin<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${schema}.items WHERE state = 'pending' AND available_at <= $1`,
      [Date.now()],
      db,
    );
    return r?.n ?? 0;
  };
  const doneNow = async (db: string, schema: string): Promise<number> => {
    const [r] = await server.admin<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.items WHERE state = 'done'`, [], db);
    return r?.n ?? 0;
  };

  it('4 processes over 3,000 items: none exits while items it could claim are pending; each does >= 1/8', async () => {
    const ITEMS = 3000;
    const PROCESSES = 4;
    const url = await server.createDatabase('share4');
    const ws = backlog(url, 'share4', ITEMS);
    const env = { CRONSAFE_RUN_GROUP: 'share-4' };
    const runs = Array.from({ length: PROCESSES }, () => spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 280_000 }));
    // The ledger at each exit, seen from outside (the logged snapshot is the process's own).
    const pendingAtExit = runs.map((r) => r.exited.then(() => pendingNow('share4', 'share4')));
    const exits = await Promise.all(runs.map((r) => r.exited));
    const external = await Promise.all(pendingAtExit);

    const fins = runs.map(finishedLine);
    for (const [i, e] of exits.entries()) expect(e.code, runs[i]!.stderr()).toBe(0);
    expect(fins.map((f) => f.outcome)).toEqual(Array(PROCESSES).fill('completed'));
    // What may still be pending when a pod ends: candidates waiting in the others' channels.
    const allowance = (PROCESSES - 1) * queueSizeOf(runs[0]!);
    const report = JSON.stringify({ pendingLogged: fins.map((f) => f.items.pending), pendingExternal: external, done: fins.map((f) => f.counts.succeeded) });
    for (const f of fins) expect(f.items.pending, `pending at a pod's exit: ${report}`).toBeLessThanOrEqual(allowance);
    for (const n of external) expect(n, `pending seen at a pod's exit: ${report}`).toBeLessThanOrEqual(allowance);
    // A fair share: at least half of 1/N each.
    for (const f of fins) expect(f.counts.succeeded, `items per process: ${report}`).toBeGreaterThanOrEqual(ITEMS / (2 * PROCESSES));
    expect(fins.reduce((s, f) => s + f.counts.succeeded, 0)).toBe(ITEMS);
    expect(await doneNow('share4', 'share4')).toBe(ITEMS);
  }, 300_000);

  it("a pod that stops with claims takes nothing with it: a sibling takes what it hands back, whoever scanned it", async () => {
    // One discovery batch (256 items): each pod's scan is over once it has claimed anything.
    const ITEMS = 256;
    const url = await server.createDatabase('handback');
    const ws = backlog(url, 'handback', ITEMS);
    const env = { CRONSAFE_RUN_GROUP: 'hand-back' };
    const doneBy = async (r: Running): Promise<number> => {
      const [row] = await server.admin<{ n: number }>(`SELECT count(*)::int AS n FROM handback.items WHERE state = 'done' AND done_by LIKE $1`, [`%:${r.child.pid}:%`], 'handback');
      return row?.n ?? 0;
    };
    // B scans alone and starts two items that hang: they stay claimed by B while A scans.
    const b = spawnCli(['run', '-c', ws.configPath], { env: { ...env, TEST_HANG_FIRST: '2' }, timeoutMs: 150_000 });
    await b.waitFor((l) => l.msg === 'run started', 60_000);
    await pollUntil(async () => (await doneBy(b)) >= 10, 'B to complete 10 items', 60_000);
    const a = spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 150_000 });
    await a.waitFor((l) => l.msg === 'run started', 60_000);
    await pollUntil(async () => (await doneBy(a)) >= 5, 'A to complete 5 items', 60_000);
    // A forced stop (second signal) aborts B's hanging attempts and hands them back.
    b.child.kill('SIGTERM');
    await b.waitFor((l) => /drain: stopped claiming/.test(l.msg), 30_000);
    b.child.kill('SIGTERM');
    const eb = await b.exited;
    const aExit = a.exited.then(() => pendingNow('handback', 'handback'));
    const ea = await a.exited;
    const external = await aExit;
    expect(eb.code, b.stderr()).toBe(75);
    expect(ea.code, a.stderr()).toBe(0);
    const [fa, fb] = [finishedLine(a), finishedLine(b)];
    const report = JSON.stringify({ a: { done: fa.counts.succeeded, items: fa.items }, b: { done: fb.counts.succeeded, counts: fb.counts }, external });
    // The two hanging attempts at least (others in flight at the second signal too).
    expect((fb.counts as { released?: number }).released, report).toBeGreaterThanOrEqual(2);
    expect(fa.outcome).toBe('completed');
    // B is gone: nothing of the pass may be left pending when A ends.
    expect(fa.items.pending, `pending at A's exit: ${report}`).toBe(0);
    expect(external, `pending seen at A's exit: ${report}`).toBe(0);
    expect(await doneNow('handback', 'handback')).toBe(ITEMS);
    // B scanned them (alone, before A started) and handed them back: A did them.
    const handedBack = await server.admin<{ done_by: string }>(`SELECT done_by FROM handback.items WHERE released > 0`, [], 'handback');
    expect(handedBack.length, report).toBeGreaterThanOrEqual(2);
    for (const r of handedBack) expect(r.done_by, report).toContain(`:${a.child.pid}:`);
  }, 200_000);

  it('a pod killed while it holds claims: its sibling waits for their lease to expire, takes them over and finishes the pass', async () => {
    const ITEMS = 256;
    const url = await server.createDatabase('killed');
    // The lease docs/postgres.md recommends with PostgreSQL: 30 s, renewed every 10 s.
    const ws = backlog(url, 'killed', ITEMS, { lease: { seconds: 30, renewSeconds: 10 } });
    const env = { CRONSAFE_RUN_GROUP: 'killed' };
    const doneBy = async (r: Running): Promise<number> => {
      const [row] = await server.admin<{ n: number }>(`SELECT count(*)::int AS n FROM killed.items WHERE state = 'done' AND done_by LIKE $1`, [`%:${r.child.pid}:%`], 'killed');
      return row?.n ?? 0;
    };
    // B starts two items that hang, then A joins; B dies without a word (SIGKILL: no hand-back).
    const b = spawnCli(['run', '-c', ws.configPath], { env: { ...env, TEST_HANG_FIRST: '2' }, timeoutMs: 150_000 });
    await b.waitFor((l) => l.msg === 'run started', 60_000);
    await pollUntil(async () => (await doneBy(b)) >= 10, 'B to complete 10 items', 60_000);
    const a = spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 150_000 });
    await a.waitFor((l) => l.msg === 'run started', 60_000);
    await pollUntil(async () => (await doneBy(a)) >= 5, 'A to complete 5 items', 60_000);
    b.child.kill('SIGKILL');
    const eb = await b.exited;
    const ea = await a.exited;
    expect(eb.signal).toBe('SIGKILL');
    expect(ea.code, a.stderr()).toBe(0);
    const fa = finishedLine(a);
    const taken = await server.admin<{ attempts: number; done_by: string | null }>(`SELECT attempts, done_by FROM killed.items WHERE attempts > 1`, [], 'killed');
    const report = JSON.stringify({ a: { done: fa.counts.succeeded, items: fa.items }, taken });
    expect(fa.outcome).toBe('completed');
    expect(fa.items, `ledger at A's exit: ${report}`).toMatchObject({ pending: 0, claimed: 0, done: ITEMS });
    expect(a.lines.some((l) => /lease expired/.test(l.msg)), report).toBe(true);
    // B's claims (the two hanging at least): charged, taken over and done by A.
    expect(taken.length, report).toBeGreaterThanOrEqual(2);
    for (const r of taken) expect(r.done_by, report).toContain(`:${a.child.pid}:`);
    expect(await doneNow('killed', 'killed')).toBe(ITEMS);
  }, 200_000);

  it('a pod waiting for its siblings stops waiting at once on SIGTERM, and exits 75: the pass is not over', async () => {
    const ITEMS = 64;
    const url = await server.createDatabase('waitstop');
    const ws = backlog(url, 'waitstop', ITEMS);
    const env = { CRONSAFE_RUN_GROUP: 'wait-stop' };
    const claimedBy = async (r: Running): Promise<number> => {
      const [row] = await server.admin<{ n: number }>(`SELECT count(*)::int AS n FROM waitstop.items WHERE state = 'claimed' AND owner LIKE $1`, [`%:${r.child.pid}:%`], 'waitstop');
      return row?.n ?? 0;
    };
    // B starts two items that hang for 60 s; A joins and does everything else.
    const b = spawnCli(['run', '-c', ws.configPath], { env: { ...env, TEST_HANG_FIRST: '2' }, timeoutMs: 150_000 });
    await b.waitFor((l) => l.msg === 'run started', 60_000);
    await pollUntil(async () => (await claimedBy(b)) >= 2, 'B to hold its two hanging items', 60_000);
    const a = spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 150_000 });
    await a.waitFor((l) => l.msg === 'run started', 60_000);
    // Everything but B's two is done: A has nothing left and waits for B's claims.
    await pollUntil(async () => (await doneNow('waitstop', 'waitstop')) === ITEMS - 2, 'all but the hanging items to be done', 60_000);
    await new Promise((r) => setTimeout(r, 1000));
    expect(a.child.exitCode, 'A must wait while a sibling holds claims of the pass').toBeNull();
    const stopped = Date.now();
    a.child.kill('SIGTERM');
    const ea = await a.exited;
    const waited = Date.now() - stopped;
    b.child.kill('SIGKILL');
    await b.exited;
    // B still held claims of the pass: they may come back (B drained or evicted next), so
    // the pass is not done. Exit 0 would tell a work-queue Job so, and no pod would replace
    // B; 75 (podFailurePolicy Ignore) brings a pod that joins the pass and finishes it.
    expect(ea.code, a.stderr()).toBe(75);
    expect(finishedLine(a).outcome).toBe('drained');
    expect(a.lines.some((l) => /other pods still hold claims/.test(l.msg)), a.stdout()).toBe(true);
    // Far less than the 60 s B's items hang: the stop ended the wait, not B.
    expect(waited).toBeLessThan(20_000);
  }, 200_000);

  it('a pod that joins 2 s after the first does a fair share of what was left, and neither leaves work behind', async () => {
    const ITEMS = 1200;
    const url = await server.createDatabase('late');
    const ws = backlog(url, 'late', ITEMS);
    const env = { CRONSAFE_RUN_GROUP: 'late-join' };
    const first = spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 200_000 });
    const started = Date.now();
    await first.waitFor((l) => l.msg === 'run started', 60_000);
    // Join mid-pass: 2 s in, once the first pod is really working.
    await pollUntil(async () => Date.now() - started >= 2000 && (await doneNow('late', 'late')) > 0, 'the first pod to complete items', 60_000);
    const second = spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 200_000 });
    await second.waitFor((l) => l.msg === 'run started', 60_000);
    const doneAtJoin = await doneNow('late', 'late');
    const firstExit = first.exited.then(() => pendingNow('late', 'late'));
    const secondExit = second.exited.then(() => pendingNow('late', 'late'));
    const [e1, e2] = await Promise.all([first.exited, second.exited]);
    const external = await Promise.all([firstExit, secondExit]);
    expect(e1.code, first.stderr()).toBe(0);
    expect(e2.code, second.stderr()).toBe(0);

    const [f1, f2] = [finishedLine(first), finishedLine(second)];
    const report = JSON.stringify({ doneAtJoin, done: [f1.counts.succeeded, f2.counts.succeeded], pending: [f1.items.pending, f2.items.pending], external });
    expect(ITEMS - doneAtJoin, `the first pod must not have finished before the second joined: ${report}`).toBeGreaterThan(ITEMS / 4);
    expect([f1.outcome, f2.outcome]).toEqual(['completed', 'completed']);
    const allowance = queueSizeOf(first);
    for (const f of [f1, f2]) expect(f.items.pending, `pending at a pod's exit: ${report}`).toBeLessThanOrEqual(allowance);
    for (const n of external) expect(n, `pending seen at a pod's exit: ${report}`).toBeLessThanOrEqual(allowance);
    // At least half of an even split of what was left when it joined.
    expect(f2.counts.succeeded, `the late pod's share: ${report}`).toBeGreaterThanOrEqual((ITEMS - doneAtJoin) / 4);
    expect(f1.counts.succeeded + f2.counts.succeeded).toBe(ITEMS);
    expect(await doneNow('late', 'late')).toBe(ITEMS);
  }, 240_000);
});
