import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { configure, FIXTURES, finished, runCli, spawnCli, workspace, type Workspace } from '../helpers/cli.js';
import { invocations } from '../helpers/proc.js';
import { until } from '../helpers/wait.js';

const HELD_COPY = path.join(FIXTURES, 'process/held-copy.sh');

interface Group {
  count: number;
  first: string[];
}
interface PlanJson {
  ledger: string;
  scan: string;
  scanned: number;
  wouldAttempt: number;
  new: Group;
  pending: Group;
  refresh: Group;
  retryWaiting: Group;
  claimed: Group;
  dead: Group;
  done: Group;
  nextRetryAt: string | null;
  gone: number;
}

function setup(files: string[], env: Record<string, string> = {}): Workspace & { log: string } {
  const ws = workspace({}, Object.fromEntries(files.map((f) => [f, f])));
  const log = path.join(ws.dir, 'invocations.log');
  configure(ws, { handler: { command: ['/bin/sh', HELD_COPY, '{path}', '{output}'], env: { INVOCATIONS: log, HOLD_DIR: ws.dir, ...env } } });
  return Object.assign(ws, { log });
}

const add = (ws: Workspace, ...files: string[]) => {
  for (const f of files) {
    mkdirSync(path.dirname(path.join(ws.source, f)), { recursive: true });
    writeFileSync(path.join(ws.source, f), f);
  }
};

async function plan(ws: Workspace, ...args: string[]): Promise<PlanJson> {
  const r = await runCli(['plan', '-c', ws.configPath, '--json', ...args], { timeoutMs: 60_000 });
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as PlanJson;
}

/** Every row of every ledger table, as text: equal dumps mean an unchanged ledger. */
function dump(db: string): string {
  const conn = new Database(db, { readonly: true });
  try {
    const tables = conn.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`).pluck().all() as string[];
    return JSON.stringify(tables.map((t) => [t, conn.prepare(`SELECT * FROM "${t}" ORDER BY 1`).all()]));
  } finally {
    conn.close();
  }
}

/** Names, sizes and mtimes under a directory (a changed output directory shows here). */
function listing(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return (readdirSync(dir, { recursive: true }) as string[]).sort().map((f) => {
    const s = statSync(path.join(dir, f));
    return `${f} ${s.isDirectory() ? 'dir' : s.size} ${s.mtimeMs}`;
  });
}

let running: ReturnType<typeof spawnCli> | undefined;
afterEach(() => {
  running?.child.kill('SIGKILL');
  running = undefined;
});

describe('cronsafe plan / run --dry-run (real scan, real SQLite ledger)', () => {
  it('against a backlog: counts match what the next pass does, and nothing changed', async () => {
    const ws = setup(['done/1.txt', 'done/2.txt', 'done/3.txt', 'bad/1.txt', 'dead/1.txt'], { FAIL_GLOB: 'bad/*' });
    // dead/1 is dead-lettered before any run (one charged failure with maxAttempts 1).
    const seed = await openSqliteLedger(ws.db, { job: 'test-job' });
    const now = Date.now();
    await seed.discover([{ id: 'dead/1.txt' }], { runId: 'seed', now });
    const claims = await seed.claim(['dead/1.txt'], { owner: 'seed', runId: 'seed', now, leaseMs: 60_000 });
    await seed.fail(claims.map((claim) => ({ claim, error: 'seeded' })), { now, retry: { maxAttempts: 1, backoffMs: 0, backoffMaxMs: 0 } });
    await seed.close();
    // The defaults (retry.backoffSeconds 30): bad/1 fails and backs off for 15 to 30 s.
    const first = finished(await runCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 }));
    expect(first).toMatchObject({ outcome: 'completed' });
    // A pending item (found by a scan that stopped before its attempt), and new files.
    add(ws, 'pending/1.txt', 'new/1.txt', 'new/2.txt', 'new/3.txt', 'new/4.txt');
    const more = await openSqliteLedger(ws.db);
    await more.discover([{ id: 'pending/1.txt' }], { runId: 'seed', now: Date.now() });
    await more.close();

    const ledgerBefore = dump(ws.db);
    const outBefore = listing(ws.out);
    const stateBefore = readdirSync(ws.state).sort();
    const p = await plan(ws, '--limit', '2');
    expect(p).toMatchObject({ ledger: 'found', scan: 'complete', scanned: 10, wouldAttempt: 5, gone: 0 });
    expect(p.new.count).toBe(4);
    expect(p.new.first).toHaveLength(2);
    expect(p.pending).toEqual({ count: 1, first: ['pending/1.txt'] });
    expect(p.refresh).toEqual({ count: 0, first: [] });
    expect(p.retryWaiting).toEqual({ count: 1, first: ['bad/1.txt'] });
    expect(Date.parse(p.nextRetryAt ?? '')).toBeGreaterThan(Date.now());
    expect(p.dead).toEqual({ count: 1, first: ['dead/1.txt'] });
    expect(p.claimed.count).toBe(0);
    expect(p.done.count).toBe(3);
    // The alias says the same; the text form names the groups.
    const alias = await runCli(['run', '--dry-run', '--json', '--limit', '2', '-c', ws.configPath]);
    expect(alias.code, alias.stderr).toBe(0);
    expect({ ...(JSON.parse(alias.stdout) as PlanJson), nextRetryAt: null }).toEqual({ ...p, nextRetryAt: null });
    const text = await runCli(['plan', '-c', ws.configPath]);
    expect(text.stdout).toMatch(/^would attempt 5 \(new \+ pending \+ due for refresh\)$/m);
    expect(text.stdout).toMatch(/^retry-waiting +1 +\(backing off/m);

    expect(dump(ws.db)).toBe(ledgerBefore);
    expect(listing(ws.out)).toEqual(outBefore);
    expect(readdirSync(ws.state).sort()).toEqual(stateBefore);

    const next = finished(await runCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 }));
    const ran = invocations(ws.log);
    // bad/1's backoff (15 to 30 s from the first run's failure) may be over by this run on a
    // loaded machine (the test took 29 s at a load of 25): then this run rightly tries it
    // again, which the plan, made before, did not count. Only then.
    const retried = ran.get('bad/1.txt')! - 1;
    expect(retried === 0 || Date.now() >= Date.parse(p.nextRetryAt ?? ''), `bad/1 tried again before ${p.nextRetryAt}`).toBe(true);
    expect(next).toMatchObject({ outcome: 'completed', counts: { scanned: p.scanned, claimed: p.wouldAttempt + retried, succeeded: p.wouldAttempt } });
    expect(retried === 0 || retried === 1).toBe(true);
    expect(ran.has('dead/1.txt')).toBe(false);
    expect([...ran.keys()].filter((id) => id.startsWith('new/') || id.startsWith('pending/')).sort()).toEqual(
      ['new/1.txt', 'new/2.txt', 'new/3.txt', 'new/4.txt', 'pending/1.txt'],
    );
  }, 180_000);

  it('before the first run: every item new, and no state file or output directory is created', async () => {
    const ws = setup(['a.txt', 'b/c.txt']);
    const p = await plan(ws);
    expect(p).toMatchObject({ ledger: 'none', scanned: 2, wouldAttempt: 2, new: { count: 2 } });
    expect(existsSync(ws.state)).toBe(false);
    expect(existsSync(ws.out)).toBe(false);
  });

  it('while a run holds the lock and a claim: answers at once, claims nothing, and the run is not disturbed', async () => {
    const ws = setup(['held.txt', 'other.txt'], { HOLD_ID: 'held.txt' });
    running = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    await until(() => existsSync(path.join(ws.dir, 'held')), 'the held item to start');
    await until(() => invocations(ws.log).has('other.txt'), 'the other item to start');
    const p = await plan(ws);
    expect(p.claimed).toEqual({ count: 1, first: ['held.txt'] });
    expect(p.wouldAttempt).toBe(0);
    writeFileSync(path.join(ws.dir, 'release'), '');
    expect((await running.exited).code).toBe(0);
    expect(Object.fromEntries(invocations(ws.log))).toEqual({ 'held.txt': 1, 'other.txt': 1 });
  }, 120_000);

  it('a fire a run now would skip as stale: would attempt 0 and forget none, as that run processes nothing', async () => {
    const ws = setup(['a.txt', 'b.txt']);
    configure(ws, { schedule: { cron: '*/5 * * * *', timeZone: 'UTC', graceSeconds: 60 } });
    const stale = new Date(Date.now() - 3_600_000);
    stale.setUTCMinutes(0, 0, 0);
    const at = ['--scheduled-time', stale.toISOString()];
    const json = await runCli(['plan', '--json', ...at, '-c', ws.configPath]);
    expect(json.code, json.stderr).toBe(0);
    const plan = JSON.parse(json.stdout) as PlanJson & { fire: { skip?: string } };
    expect(plan.fire.skip).toBe('stale');
    expect(plan.wouldAttempt).toBe(0);
    expect(plan.gone).toBe(0);
    expect(plan.new.count).toBe(2); // where each item stands is still said
    const text = await runCli(['plan', ...at, '-c', ws.configPath]);
    expect(text.stdout).toContain('would attempt 0 (the fire is skipped)');
    // And the run at that fire does what the plan said.
    const run = await runCli(['run', ...at, '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);
    expect(invocations(ws.log).size).toBe(0);
  });

  it('bad input is a usage error (exit 2) naming it', async () => {
    const ws = setup(['a.txt']);
    const cases: Array<[string[], RegExp]> = [
      [['plan', '--limit', '0'], /--limit <n>' argument '0' is invalid\. out of range: the allowed range is 1 to 9007199254740991/],
      [['run', '--json'], /run: --json only applies with --dry-run/],
      [['plan', '--scheduled-time', 'yesterday'], /--scheduled-time: expected an RFC 3339 time/],
    ];
    for (const [args, message] of cases) {
      const r = await runCli([...args, '-c', ws.configPath]);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toMatch(message);
    }
    expect(existsSync(ws.state)).toBe(false);
  });
});
