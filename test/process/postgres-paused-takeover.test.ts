/**
 * A pod paused past its lease (SIGSTOP: a frozen container, a node stalled, a long GC)
 * while a sibling of the same run group takes its claim over, then resumed (SIGCONT). On
 * resume its renewal finds the claim taken over and aborts its attempt; the hand-back of
 * that attempt is fenced (the claim is the sibling's now) and changes nothing. Before, the
 * paused pod still logged "item interrupted; claim handed back (attempt not charged)" of an
 * item it no longer held: nothing was handed back, and the sibling's attempt is the one
 * that counts. The ledger must not show the hand-back either (no `released` on the
 * sibling's attempt, no released count in the run's totals or the counters).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configure, finished, spawnCli, workspace, type Running } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

const DB = 'pausedtakeover';
const SCHEMA = 'pt';
const ID = 'item.txt';
/** Short, so the test waits seconds for the lease to expire (renewed every second). */
const LEASE = { seconds: 3, renewSeconds: 1 };

/** Logs "<id> <attempt> <pod> started" to $EVENTS, then runs until the file $GATE exists. */
const HANDLER = `#!/bin/sh
printf '%s %s %s started\\n' "$CRONSAFE_ITEM_ID" "$CRONSAFE_ATTEMPT" "$POD" >> "$EVENTS"
while [ ! -e "$GATE" ]; do sleep 0.05; done
printf 'from %s\\n' "$POD" > "$2"
`;

const events = (file: string): string[] => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : []);

/** Whether the process is stopped (state T in /proc/PID/stat). */
const stopped = (pid: number): boolean => /^\d+ \(.*\) T /s.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a pod paused past its lease while a sibling takes its claim over', () => {
  let server: PgServer;
  const running: Running[] = [];
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    for (const r of running) {
      if (r.child.exitCode !== null || r.child.signalCode !== null) continue;
      r.child.kill('SIGCONT');
      r.child.kill('SIGKILL');
    }
    await server?.stop();
  });

  type Row = { state: string; owner: string | null; attempts: number; released: number; done_by: string | null };
  const row = async () => (await server.admin<Row>(`SELECT state, owner, attempts, released, done_by FROM ${SCHEMA}.items WHERE id = $1`, [ID], DB))[0];

  type Backend = { state: string | null; in_xact: boolean };
  /** Every session on the test database: before B starts, all of them are A's. */
  const backends = () =>
    server.admin<Backend>(`SELECT state, xact_start IS NOT NULL AS in_xact FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [DB]);

  /**
   * Stop A between two statements: stopped inside a transaction, A would keep the item's row
   * locked, and no sibling could take the claim over (a pod frozen mid-transaction is the
   * server's idle_in_transaction_session_timeout's to end, not what this test is about).
   */
  async function pauseBetweenStatements(a: Running): Promise<void> {
    const pid = a.child.pid!;
    for (let tries = 0; tries < 50; tries++) {
      a.child.kill('SIGSTOP');
      await until(() => stopped(pid), 'A to stop', 20_000);
      // A statement the server already has runs to its end (A's answer waits in the socket).
      let seen = await backends();
      for (const deadline = Date.now() + 5_000; seen.some((b) => b.state === 'active') && Date.now() < deadline; seen = await backends()) {
        await new Promise((r) => setTimeout(r, 20));
      }
      if (seen.every((b) => b.state === 'idle' && !b.in_xact)) return;
      a.child.kill('SIGCONT');
      await new Promise((r) => setTimeout(r, 50 + tries * 10));
    }
    throw new Error('could not stop A between two statements');
  }

  it('A, resumed, says its claim was taken over and hands nothing back; only B\'s attempt counts', async () => {
    const url = await server.createDatabase(DB);
    const ws = workspace({ state: { postgres: url, schema: SCHEMA }, concurrency: 1, lease: LEASE, log: { level: 'info' } }, { [ID]: 'payload' });
    writeFileSync(path.join(ws.dir, 'handler.sh'), HANDLER);
    configure(ws, { handler: { command: ['/bin/sh', path.join(ws.dir, 'handler.sh'), '{path}', '{output}'] } });
    const eventsFile = path.join(ws.dir, 'events');
    const base = { CRONSAFE_RUN_GROUP: 'paused-takeover', EVENTS: eventsFile };
    const gateA = path.join(ws.dir, 'gate-a'); // never opened: A's attempt ends only by its abort
    const gateB = path.join(ws.dir, 'gate-b');

    const a = spawnCli(['run', '-c', ws.configPath], { cwd: ws.dir, env: { ...base, POD: 'A', GATE: gateA }, timeoutMs: 150_000 });
    running.push(a);
    await until(() => events(eventsFile).includes(`${ID} 1 A started`) || a.child.exitCode !== null, "A's handler to start", 60_000);
    expect(a.child.exitCode, a.stdout() + a.stderr()).toBeNull();
    await pauseBetweenStatements(a);

    // B, same run group, joins the pass, waits out A's lease and takes the item over.
    const b = spawnCli(['run', '-c', ws.configPath], { cwd: ws.dir, env: { ...base, POD: 'B', GATE: gateB }, timeoutMs: 150_000 });
    running.push(b);
    await until(() => events(eventsFile).includes(`${ID} 2 B started`) || b.child.exitCode !== null, "B's handler to start on the item", 90_000);
    expect(b.child.exitCode, b.stdout() + b.stderr()).toBeNull();
    expect(b.lines.some((l) => /lease expired/.test(l.msg)), b.stdout()).toBe(true);

    // A resumes: its renewal finds the claim B's, its attempt is aborted, its hand-back fenced.
    // A waits for B's claim to end its pass (a sibling's claim may still come back done), so
    // A's fenced write ("stale claim") is what says its hand-back is over.
    a.child.kill('SIGCONT');
    await a.waitFor((l) => /^stale claim/.test(l.msg) && l.itemId === ID, 60_000);
    const aboutItem = a.lines.filter((l) => l.itemId === ID);
    expect(aboutItem.filter((l) => /handed back/.test(l.msg) && !/nothing handed back/.test(l.msg)).map((l) => l.msg), a.stdout()).toEqual([]);
    const taken = aboutItem.find((l) => /taken over by another owner/.test(l.msg));
    expect(taken, a.stdout()).toBeDefined();
    expect(taken).toMatchObject({ level: 'warn' });
    expect(taken?.msg).toMatch(/nothing handed back/);
    expect(String(taken?.reason)).toMatch(/interrupted/);

    // B's attempt is untouched by A's: still claimed by B on attempt 2, nothing released.
    const held = await row();
    expect(held).toMatchObject({ state: 'claimed', attempts: 2, released: 0 });
    expect(held?.owner).toContain(`:${b.child.pid}:`);

    writeFileSync(gateB, '');
    const [ea, eb] = await Promise.all([a.exited, b.exited]);
    expect(ea.code, a.stderr()).toBe(0);
    expect(eb.code, b.stderr()).toBe(0);
    expect(finished(a)).toMatchObject({ counts: { succeeded: 0, released: 0, fenced: 1 } });
    expect(finished(b)).toMatchObject({ counts: { succeeded: 1, released: 0, fenced: 0 } });
    const done = await row();
    expect(done).toMatchObject({ state: 'done', attempts: 2, released: 0 });
    expect(done?.done_by).toContain(`:${b.child.pid}:`);
    const counters = await server.admin<{ name: string; value: string }>(
      `SELECT split_part(name, ':', 1) AS name, sum(value)::text AS value FROM ${SCHEMA}.counters GROUP BY 1`,
      [],
      DB,
    );
    const counter = (name: string) => Number(counters.find((c) => c.name === name)?.value ?? 0);
    expect(counter('items_released'), JSON.stringify(counters)).toBe(0);
    expect(counter('items_fenced'), JSON.stringify(counters)).toBe(1);
    expect(counter('items_done'), JSON.stringify(counters)).toBe(1);
    expect(readFileSync(path.join(ws.out, `${ID}.out`), 'utf8')).toBe('from B\n');
  }, 240_000);
});
