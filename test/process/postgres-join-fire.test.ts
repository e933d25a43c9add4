/**
 * A pod that joins its run group's pass on PostgreSQL belongs to the fire that pass runs
 * for. Before, it planned its fire from its own start: a pod of the Job that started after
 * the next occurrence (scheduled late, or retried by the Job) took that later occurrence for
 * its fire, and with `schedule.refresh: every-occurrence` made every item its siblings had
 * finished in this very pass pending again and ran it a second time. The clocks are
 * libfaketime's, each starting at a set wall time and running at normal speed.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnCli, workspace, type Running } from '../helpers/cli.js';
import { LIBFAKETIME } from '../helpers/faketime.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

/** Logs "<id> <pod>" to $EVENTS; past the first $HOLD_AFTER items a pod starts, waits for the file $GATE. */
const HANDLER = `import { appendFileSync, existsSync, writeFileSync } from 'node:fs';
let started = 0;
export default async function h(item, ctx) {
  if (process.env.GATE && started++ >= Number(process.env.HOLD_AFTER)) {
    while (!existsSync(process.env.GATE)) await new Promise((r) => setTimeout(r, 50));
  }
  appendFileSync(process.env.EVENTS, \`\${item.id} \${process.env.POD}\\n\`);
  writeFileSync(ctx.outputPath, process.env.POD);
}
`;

const N = 40;
const events = (file: string): string[] => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : []);

describe.skipIf(PG_SKIP_REASON !== undefined || LIBFAKETIME === undefined)('PostgreSQL: a pod joining a pass runs for the fire of that pass', () => {
  let server: PgServer;
  const running: Running[] = [];
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    for (const r of running) if (r.child.exitCode === null) r.child.kill('SIGKILL');
    await server?.stop();
  });

  it('joined after the next occurrence, with refresh every-occurrence: no item of the pass runs twice', async () => {
    const url = await server.createDatabase('joinfire');
    const files = Object.fromEntries(Array.from({ length: N }, (_, i) => [`item-${i}.txt`, String(i)]));
    const ws = workspace(
      {
        handler: { module: 'handler.mjs' },
        state: { postgres: url, schema: 'jf' },
        concurrency: 1,
        schedule: { cron: '* * * * *', timeZone: 'UTC', refresh: 'every-occurrence' },
        log: { level: 'info' },
      },
      files,
    );
    writeFileSync(path.join(ws.dir, 'handler.mjs'), HANDLER);
    const eventsFile = path.join(ws.dir, 'events');
    const gate = path.join(ws.dir, 'gate');
    const base = { CRONSAFE_RUN_GROUP: 'join-fire', EVENTS: eventsFile, LD_PRELOAD: LIBFAKETIME! };

    // A starts the pass 10 s before a minute's occurrence, finishes 5 items, then holds.
    const a = spawnCli(['run', '-c', ws.configPath], {
      cwd: ws.dir,
      env: { ...base, POD: 'A', GATE: gate, HOLD_AFTER: '5', FAKETIME: '@2026-03-02 10:00:50' },
      timeoutMs: 120_000,
    });
    running.push(a);
    await until(() => events(eventsFile).length >= 5 || a.child.exitCode !== null, 'A to finish 5 items', 60_000);
    expect(a.child.exitCode, a.stderr()).toBeNull();

    // B, a pod of the same Job whose clock says it started after 10:01, joins that pass.
    const b = spawnCli(['run', '-c', ws.configPath], { cwd: ws.dir, env: { ...base, POD: 'B', FAKETIME: '@2026-03-02 10:01:10' }, timeoutMs: 120_000 });
    running.push(b);
    await b.waitFor((l) => l.msg === 'joined the pass of this run group', 60_000);
    await until(() => events(eventsFile).some((e) => e.endsWith(' B')) || b.child.exitCode !== null, 'B to run an item', 60_000);
    writeFileSync(gate, '');

    const [ea, eb] = await Promise.all([a.exited, b.exited]);
    expect(ea.code, a.stderr()).toBe(0);
    expect(eb.code, b.stderr()).toBe(0);
    const ids = events(eventsFile).map((e) => e.split(' ')[0]);
    const twice = ids.filter((id, i) => ids.indexOf(id) !== i);
    expect(twice, 'items run twice in one pass').toEqual([]);
    expect(new Set(ids).size).toBe(N);
  }, 180_000);
});
