/**
 * The lease guard (docs/postgres.md, "A pod cut off from the database"): pod A is cut off
 * from PostgreSQL while its handler runs; once A's lease has expired, pod B of the same
 * pass takes the item over and commits its output. When A's handler then finishes, still
 * cut off, A must not rename its output over B's: it discards it and hands the claim back
 * (fenced, so the hand-back changes nothing once the database is back).
 *
 * The cut: A reaches the server through a TCP relay that this test holds. Cut, it stops
 * forwarding in both directions (bytes and closes are held, new connections get no
 * answer), as a network partition does; healed, it delivers what it held. Stopping A's
 * backends (SIGSTOP) would not do: A's pool opens a new connection when a renewal finds
 * the others busy, and that renewal reaches the server before anyone could stop its
 * backend, extending the lease that was to expire.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, finished, spawnCli, statusJson, workspace, type LogLine, type Running } from '../helpers/cli.js';
import { PG_SKIP_REASON, type PgServer } from '../helpers/postgres.js';
import { postgresBehindRelay, relay, type Relay } from '../helpers/relay.js';
import { filesUnder, until } from '../helpers/wait.js';

const DB = 'leaseguard';
const ID = 'item.txt';
/** Short, so the test waits seconds for the lease to expire (renewed every second). */
const LEASE = { seconds: 3, renewSeconds: 1 };

/**
 * Logs "<id> <attempt> <pod> started" to $EVENTS, waits for the file $GATE when one is set,
 * writes "from <pod>" to {output}, then logs "... wrote".
 */
const HANDLER = `#!/bin/sh
printf '%s %s %s started\\n' "$CRONSAFE_ITEM_ID" "$CRONSAFE_ATTEMPT" "$POD" >> "$EVENTS"
if [ -n "$GATE" ]; then while [ ! -e "$GATE" ]; do sleep 0.05; done; fi
printf 'from %s\\n' "$POD" > "$2"
printf '%s %s %s wrote\\n' "$CRONSAFE_ITEM_ID" "$CRONSAFE_ATTEMPT" "$POD" >> "$EVENTS"
`;

/**
 * The same log as HANDLER, as a module. With FREEZE set, the process stops itself
 * (SIGSTOP) just after the handler has returned: past the lease guard's check, while its
 * output is synced, before it is renamed into place. A pause of the whole pod there (a
 * long GC, a CPU-throttled or frozen container, a VM migrated) is what this stands for.
 */
const FREEZING_HANDLER = `import { appendFileSync, writeFileSync } from 'node:fs';
export default async function h(item, ctx) {
  appendFileSync(process.env.EVENTS, \`\${item.id} \${item.attempt} \${process.env.POD} started\\n\`);
  writeFileSync(ctx.outputPath, \`from \${process.env.POD}\\n\`);
  if (process.env.FREEZE) setImmediate(() => process.kill(process.pid, 'SIGSTOP'));
}
`;

/** Whether the process is stopped (state T in /proc/PID/stat). */
const stopped = (pid: number): boolean => /^\d+ \(.*\) T /s.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));

const events = (file: string): string[] => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : []);

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a pod cut off from the database does not overwrite its successor', () => {
  let server: PgServer;
  let link: Relay | undefined;
  const running: Running[] = [];
  postgresBehindRelay((s) => (server = s), () => ({ server, link, running }));

  type Backend = { pid: number; state: string | null; in_xact: boolean };
  /** Every session on the test database: before B starts, all of them are A's. */
  const backends = () =>
    server.admin<Backend>(`SELECT pid, state, xact_start IS NOT NULL AS in_xact FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [DB]);
  const row = async () =>
    (await server.admin<{ state: string; owner: string | null; done_by: string | null; attempts: number }>(`SELECT state, owner, done_by, attempts FROM lg.items WHERE id = $1`, [ID], DB))[0];

  /**
   * Cut A off between two statements: a cut inside a transaction (a renewal is BEGIN,
   * UPDATE ... FOR UPDATE, COMMIT) would leave the row locked, and no sibling could take it.
   */
  async function cutBetweenStatements(r: Relay): Promise<void> {
    const poll = () => new Promise((res) => setTimeout(res, 20));
    for (let tries = 0; tries < 20; tries++) {
      r.cut();
      // A statement the server already has runs to its end; only its answer is held.
      let seen = await backends();
      for (const deadline = Date.now() + 5_000; seen.some((b) => b.state === 'active') && Date.now() < deadline; seen = await backends()) await poll();
      if (seen.every((b) => b.state === 'idle' && !b.in_xact)) return;
      r.heal();
      for (const deadline = Date.now() + 5_000; (await backends()).some((b) => b.in_xact) && Date.now() < deadline; ) await poll();
    }
    throw new Error('could not cut A off between two statements');
  }

  it('A, cut off past its lease, discards its late output; B took the item over and its output stands', async () => {
    const url = await server.createDatabase(DB);
    const ws = workspace(
      {
        state: { postgres: url, schema: 'lg' },
        concurrency: 1,
        lease: LEASE,
        log: { level: 'info' },
      },
      { [ID]: 'payload' },
    );
    writeFileSync(path.join(ws.dir, 'handler.sh'), HANDLER);
    configure(ws, { handler: { command: ['/bin/sh', path.join(ws.dir, 'handler.sh'), '{path}', '{output}'] } });
    const eventsFile = path.join(ws.dir, 'events');
    const gate = path.join(ws.dir, 'gate');
    const output = path.join(ws.out, `${ID}.out`);
    link = await relay(server.port);
    const base = { CRONSAFE_RUN_GROUP: 'lease-guard', EVENTS: eventsFile };

    // A, through the relay, starts the item; its handler waits for the gate.
    const a = spawnCli(['run', '-c', ws.configPath], {
      cwd: ws.dir,
      env: { ...base, POD: 'A', GATE: gate, CRONSAFE_STATE_POSTGRES: `postgres://postgres@127.0.0.1:${link.port}/${DB}` },
      timeoutMs: 150_000,
    });
    running.push(a);
    await until(() => events(eventsFile).includes(`${ID} 1 A started`) || a.child.exitCode !== null, "A's handler to start", 60_000);
    expect(a.child.exitCode, a.stdout() + a.stderr()).toBeNull();
    const aTag = `:${a.child.pid}:`;
    expect((await row())?.owner).toContain(aTag);

    await cutBetweenStatements(link);

    // B, same Job (run group), joins the pass, waits out A's lease, takes the item over.
    const b = spawnCli(['run', '-c', ws.configPath], { cwd: ws.dir, env: { ...base, POD: 'B', GATE: '' }, timeoutMs: 120_000 });
    running.push(b);
    const eb = await b.exited;
    expect(eb.code, b.stderr()).toBe(0);
    const bTag = `:${b.child.pid}:`;
    expect(b.lines.some((l) => /lease expired/.test(l.msg)), 'B reclaimed the expired claim').toBe(true);
    expect(events(eventsFile)).toEqual([`${ID} 1 A started`, `${ID} 2 B started`, `${ID} 2 B wrote`]);
    expect(readFileSync(output, 'utf8')).toBe('from B\n');
    expect(a.child.exitCode, 'A is still running, cut off').toBeNull();

    // A's handler finishes, still cut off: its output is committed or discarded (its temp file goes).
    writeFileSync(gate, '');
    const tmp = path.join(ws.out, '.cronsafe-tmp');
    await until(() => events(eventsFile).includes(`${ID} 1 A wrote`) && filesUnder(tmp).length === 0, "A's attempt to commit or discard its output", 60_000);
    expect(readFileSync(output, 'utf8'), "A's late output overwrote B's").toBe('from B\n');

    // Back on the network: A's hung calls land (its hand-back is fenced) and it ends. Why its
    // attempt ended is said once the ledger answered the hand-back (results.ts), not before.
    link.heal();
    const guarded = (l: LogLine) => l.itemId === ID && typeof l.reason === 'string' && l.reason.includes('lease may have run out');
    const warn = await a.waitFor(guarded, 20_000);
    expect(warn.level).toBe('warn');
    const ea = await a.exited;
    expect(ea.code, a.stderr()).toBe(0);
    // Its hand-back reached a ledger where B had the item done: rejected, nothing changed.
    expect(a.lines.some((l) => /^stale claim/.test(l.msg) && String(l.reason).includes(`${ID} is done`)), a.stdout()).toBe(true);
    expect(finished(a)).toMatchObject({ outcome: 'completed', counts: { succeeded: 0, released: 0, fenced: 1 } });
    expect(finished(b)).toMatchObject({ outcome: 'completed', counts: { succeeded: 1 } });

    expect(readFileSync(output, 'utf8')).toBe('from B\n');
    const final = await row();
    expect(final).toMatchObject({ state: 'done', attempts: 2 });
    expect(final?.done_by).toContain(bTag);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 0, claimed: 0, done: 1, dead: 0 });
    // Nothing of A's left: no stray file beside the outputs, nothing in the temp directory.
    expect(filesUnder(ws.out)).toEqual([`${ID}.out`]);
  }, 240_000);

  it('A, paused between its lease check and the rename of its output, discards it once it resumes past its lease', async () => {
    const db = 'leasepause';
    const url = await server.createDatabase(db);
    const ws = workspace(
      { state: { postgres: url, schema: 'lp' }, concurrency: 1, lease: LEASE, log: { level: 'info' }, handler: { module: 'handler.mjs' } },
      { [ID]: 'payload' },
    );
    writeFileSync(path.join(ws.dir, 'handler.mjs'), FREEZING_HANDLER);
    const eventsFile = path.join(ws.dir, 'events');
    const output = path.join(ws.out, `${ID}.out`);
    const base = { CRONSAFE_RUN_GROUP: 'lease-pause', EVENTS: eventsFile };

    const a = spawnCli(['run', '-c', ws.configPath], { cwd: ws.dir, env: { ...base, POD: 'A', FREEZE: '1' }, timeoutMs: 150_000 });
    running.push(a);
    const aPid = a.child.pid!;
    await until(() => a.child.exitCode !== null || stopped(aPid), 'A to stop itself after its handler', 60_000);
    expect(a.child.exitCode, a.stdout() + a.stderr()).toBeNull();
    expect(existsSync(output), 'A renamed its output before it stopped').toBe(false);

    // B joins the pass, waits out A's lease, takes the item over and commits its own output.
    const b = spawnCli(['run', '-c', ws.configPath], { cwd: ws.dir, env: { ...base, POD: 'B' }, timeoutMs: 120_000 });
    running.push(b);
    const eb = await b.exited;
    expect(eb.code, b.stderr()).toBe(0);
    expect(events(eventsFile)).toEqual([`${ID} 1 A started`, `${ID} 2 B started`]);
    expect(readFileSync(output, 'utf8')).toBe('from B\n');

    // A resumes: its output, synced while it was stopped, must not be renamed over B's.
    a.child.kill('SIGCONT');
    const ea = await a.exited;
    expect(ea.code, a.stderr()).toBe(0);
    expect(readFileSync(output, 'utf8'), "A's late output overwrote B's").toBe('from B\n');
    expect(a.lines.some((l) => l.itemId === ID && String(l.reason).includes('lease may have run out')), a.stdout()).toBe(true);
    const [final] = await server.admin<{ state: string; attempts: number; done_by: string }>(`SELECT state, attempts, done_by FROM lp.items WHERE id = $1`, [ID], db);
    expect(final).toMatchObject({ state: 'done', attempts: 2 });
    expect(final?.done_by).toContain(`:${b.child.pid}:`);
    expect(filesUnder(ws.out)).toEqual([`${ID}.out`]);
  }, 240_000);
});
