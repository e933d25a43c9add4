/**
 * Items first recorded by a run whose clock was ahead (a node's clock skewed, a clock later
 * stepped back) were recorded available from that clock's "now", in the future of every run
 * after it: the next run with the right clock left them pending, and `cronsafe plan` said
 * they were backing off, though none had ever failed. An item never charged has nothing to
 * back off from: the next run takes it at once, on SQLite and on PostgreSQL.
 *
 * The first run (clock an hour ahead, libfaketime) finds three items and is drained
 * (SIGTERM, twice) while its one slot runs the first: that one is handed back (never charged),
 * the other two were never attempted (recorded on SQLite; on PostgreSQL a new item may be
 * recorded only by its claim, and test/contract's discovery by a clock ahead covers them).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, configure, runCli, spawnCliRaw, statusJson, workspace } from '../helpers/cli.js';
import { LIBFAKETIME } from '../helpers/faketime.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

const IDS = ['a.txt', 'b.txt', 'c.txt'];

/** Logs the item's id to $EVENTS; with $HOLD set, runs until that file exists (a drain ends it). */
const HANDLER = `#!/bin/sh
printf '%s\\n' "$CRONSAFE_ITEM_ID" >> "$EVENTS"
if [ -n "$HOLD" ]; then while [ ! -e "$HOLD" ]; do sleep 0.05; done; fi
printf 'ok\\n' > "$2"
`;

const events = (file: string): string[] => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : []);

interface PlanJson {
  wouldAttempt: number;
  new: { count: number };
  pending: { count: number };
  retryWaiting: { count: number };
  nextRetryAt: string | null;
}

/** `state`: the config's, else the workspace's SQLite ledger. */
async function clockAheadThenRight(state?: Record<string, unknown>): Promise<void> {
  const ws = workspace({ ...(state ? { state } : {}), concurrency: 1, log: { level: 'info' } }, Object.fromEntries(IDS.map((id) => [id, id])));
  writeFileSync(path.join(ws.dir, 'handler.sh'), HANDLER);
  configure(ws, { handler: { command: ['/bin/sh', path.join(ws.dir, 'handler.sh'), '{path}', '{output}'] } });
  const eventsFile = path.join(ws.dir, 'events');

  // The first run, its clock an hour ahead: drained while its first item runs.
  const ahead = spawnCliRaw(process.execPath, [CLI, 'run', '-c', ws.configPath], {
    cwd: ws.dir,
    env: { LD_PRELOAD: LIBFAKETIME!, FAKETIME: '+1h', EVENTS: eventsFile, HOLD: path.join(ws.dir, 'never') },
    timeoutMs: 120_000,
  });
  await until(() => events(eventsFile).length > 0 || ahead.child.exitCode !== null, 'the first run to start an item', 60_000);
  expect(ahead.child.exitCode, ahead.stdout() + ahead.stderr()).toBeNull();
  // A second SIGTERM aborts the attempt at once (the first lets it finish, up to the drain's grace).
  ahead.child.kill('SIGTERM');
  await ahead.waitFor((l) => /^drain: stopped claiming/.test(l.msg), 30_000);
  ahead.child.kill('SIGTERM');
  const first = await ahead.exited;
  expect(first.code, ahead.stderr()).toBe(75);
  expect(events(eventsFile)).toHaveLength(1);
  expect(ahead.lines.filter((l) => /claim handed back/.test(l.msg)).map((l) => l.itemId), ahead.stdout()).toEqual(events(eventsFile));
  // SQLite records every item found; PostgreSQL records a new item when it claims it (or a
  // claim that takes nothing records the pod's new ids): the drain may leave some unrecorded.
  const recorded = (await statusJson(ws.configPath)).items;
  expect(recorded).toMatchObject({ claimed: 0, done: 0, dead: 0 });
  expect(recorded.pending).toBeGreaterThanOrEqual(1);
  if (state === undefined) expect(recorded.pending).toBe(3);

  // The clock is right again: none of them has failed, so none is backing off.
  const plan = await runCli(['plan', '-c', ws.configPath, '--json'], { cwd: ws.dir, timeoutMs: 60_000 });
  expect(plan.code, plan.stderr).toBe(0);
  const p = JSON.parse(plan.stdout) as PlanJson;
  expect({ pending: p.pending.count, new: p.new.count, retryWaiting: p.retryWaiting.count, wouldAttempt: p.wouldAttempt, nextRetryAt: p.nextRetryAt }).toEqual({
    pending: recorded.pending,
    new: 3 - recorded.pending!,
    retryWaiting: 0,
    wouldAttempt: 3,
    nextRetryAt: null,
  });

  writeFileSync(eventsFile, '');
  const second = await runCli(['run', '-c', ws.configPath], { cwd: ws.dir, env: { EVENTS: eventsFile }, timeoutMs: 90_000 });
  expect(second.code, second.stderr).toBe(0);
  expect(events(eventsFile).sort(), second.stdout).toEqual(IDS);
  expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 0, claimed: 0, done: 3, dead: 0 });
  for (const id of IDS) expect(readFileSync(path.join(ws.out, `${id}.out`), 'utf8')).toBe('ok\n');
}

describe.skipIf(LIBFAKETIME === undefined)('items first recorded by a run whose clock was ahead', () => {
  it('SQLite: the next run, its clock right, attempts them at once; plan does not call them backing off', async () => {
    await clockAheadThenRight();
  }, 240_000);

  describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL', () => {
    const pg = usePostgresDatabase('clockahead');

    it('the next run, its clock right, attempts them at once; plan does not call them backing off', async () => {
      await clockAheadThenRight({ postgres: pg.url, schema: 'ca' });
    }, 240_000);
  });
});
