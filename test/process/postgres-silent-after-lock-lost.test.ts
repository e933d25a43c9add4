/**
 * A run whose run lock is lost while the database has gone silent (a partition that drops
 * packets, no reset): the lock session is reset (a middlebox timed it out), taking the lock
 * again gets no answer for the retry budget, so the run drains; its other sessions' writes
 * (results, hand-backs, the run's end) wait for answers that never come. Before, nothing
 * bounded that wait: no signal had come, so the drain's last resort was not armed, and the
 * process (and the Job with it, Forbid skipping every later fire) stayed until TCP gave up,
 * ~15 minutes. Now the last resort counts from the loss: exit 75 within the grace period.
 * Defaults throughout (drain 30 s / 5 s, retry budget 30 s, lease 90 s).
 */
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { spawnCli, statusJson, workspace, type Running } from '../helpers/cli.js';
import { PG_SKIP_REASON, type PgServer } from '../helpers/postgres.js';
import { postgresBehindRelay, relay, type Relay } from '../helpers/relay.js';
import { until } from '../helpers/wait.js';

const ITEMS = 200;
const HANDLER = `import { writeFileSync } from 'node:fs';
export default async function h(item, ctx) {
  writeFileSync(process.env.STARTED, '');
  await new Promise((r) => setTimeout(r, 100));
  writeFileSync(ctx.outputPath, item.id);
}
`;
// For the run after: without the tenth of a second, which kept items in flight at the loss;
// that run is about what the first left in the ledger, not its handler (~5 s at 4 at a time).
const NEXT_HANDLER = `import { writeFileSync } from 'node:fs';
export default async function h(item, ctx) {
  writeFileSync(ctx.outputPath, item.id);
}
`;

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL gone silent after the run lock was lost', () => {
  let server: PgServer;
  let link: Relay | undefined;
  const running: Running[] = [];
  postgresBehindRelay((s) => (server = s), () => ({ server, link, running }));

  it('the run drains and exits 75 within drain.gracePeriodSeconds of the loss, not when the network comes back; the next run does everything', async () => {
    const url = await server.createDatabase('silent');
    const files = Object.fromEntries(Array.from({ length: ITEMS }, (_, i) => [`item-${String(i).padStart(3, '0')}.txt`, `${i}`]));
    const ws = workspace({ handler: { module: 'handler.mjs' }, state: { postgres: url, schema: 'silent' }, log: { level: 'info' } }, files);
    writeFileSync(path.join(ws.dir, 'handler.mjs'), HANDLER);
    const started = path.join(ws.dir, 'started');
    link = await relay(server.port);
    const run = spawnCli(['run', '-c', ws.configPath], {
      cwd: ws.dir,
      env: { STARTED: started, CRONSAFE_STATE_POSTGRES: `postgres://postgres@127.0.0.1:${link.port}/silent` },
      timeoutMs: 400_000,
    });
    running.push(run);
    await until(() => existsSync(started) || run.child.exitCode !== null, 'the first handler to start', 60_000);
    expect(run.child.exitCode, run.stderr()).toBeNull();

    // The lock's session is reset; everything else (and every new connection) goes silent.
    link.cut((startup) => startup.includes('cronsafe-lock'));
    await run.waitFor((l) => l.msg === 'stopping the run: what it relies on was lost', 120_000);
    const lostAt = Date.now();
    // The default grace period is 30 s; a loaded machine gets 60 s of slack on top.
    const ended = await Promise.race([run.exited, new Promise<null>((r) => setTimeout(() => r(null), 90_000))]);
    expect(ended, `still running ${Math.round((Date.now() - lostAt) / 1000)} s after the loss, waiting on the silent database`).not.toBeNull();
    expect(ended?.code, run.stderr()).toBe(75);
    expect(run.stderr()).toMatch(/drain did not end within drain\.gracePeriodSeconds/);

    // The network back, a new Job takes over what the first left claimed (after the lease) and finishes.
    link.heal();
    link.close();
    link = undefined;
    writeFileSync(path.join(ws.dir, 'handler.mjs'), NEXT_HANDLER);
    const next = spawnCli(['run', '-c', ws.configPath], { cwd: ws.dir, env: { STARTED: started }, timeoutMs: 300_000 });
    running.push(next);
    const second = await next.exited;
    expect(second.code, next.stderr()).toBe(0);
    // Nothing lost or charged to death: all done, but for the first run's last claims (at most
    // its concurrency, 4), which wait out their 90 s lease for the run after.
    const items = (await statusJson(ws.configPath)).items;
    expect(items.dead).toBe(0);
    expect(items.pending).toBe(0);
    expect(items.claimed).toBeLessThanOrEqual(4);
    expect((items.done ?? 0) + (items.claimed ?? 0)).toBe(ITEMS);
  }, 420_000);
});
