/**
 * A pod of a Job that starts after its siblings ended the Job's pass (scheduled late, or a
 * replacement the Job made for a pod that failed) belongs to that Job's fire, as a pod that
 * joins the pass while it runs does (postgres-join-fire.test.ts). Before, it started a new
 * pass planned from its own start: past the next occurrence, with `schedule.refresh:
 * every-occurrence`, it ran again every item its siblings had just finished. The clocks are
 * libfaketime's, each starting at a set wall time and running at normal speed.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';
import { LIBFAKETIME } from '../helpers/faketime.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

/** Logs "<id> <pod>" to $EVENTS. */
const HANDLER = `import { appendFileSync, writeFileSync } from 'node:fs';
export default async function h(item, ctx) {
  appendFileSync(process.env.EVENTS, \`\${item.id} \${process.env.POD}\\n\`);
  writeFileSync(ctx.outputPath, process.env.POD);
}
`;

const N = 12;
const events = (file: string): string[] => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : []);

describe.skipIf(PG_SKIP_REASON !== undefined || LIBFAKETIME === undefined)('PostgreSQL: a pod that starts after its Job ended the pass', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('past the next occurrence, with refresh every-occurrence: runs for its Job\'s fire, so nothing runs twice; the next Job runs them all', async () => {
    const url = await server.createDatabase('latepod');
    const files = Object.fromEntries(Array.from({ length: N }, (_, i) => [`item-${i}.txt`, String(i)]));
    const ws = workspace(
      {
        handler: { module: 'handler.mjs' },
        state: { postgres: url, schema: 'lp' },
        schedule: { cron: '* * * * *', timeZone: 'UTC', refresh: 'every-occurrence' },
        log: { level: 'info' },
      },
      files,
    );
    writeFileSync(path.join(ws.dir, 'handler.mjs'), HANDLER);
    const eventsFile = path.join(ws.dir, 'events');
    const pod = (job: string, name: string, at: string, variable = 'CRONSAFE_JOB_NAME') =>
      runCli(['run', '-c', ws.configPath], { cwd: ws.dir, env: { [variable]: job, POD: name, EVENTS: eventsFile, LD_PRELOAD: LIBFAKETIME!, FAKETIME: `@${at}` }, timeoutMs: 60_000 });

    // Job qc-600 (the 10:00 fire): its pod A runs the whole pass and exits.
    const a = await pod('qc-600', 'A', '2026-03-02 10:00:30');
    expect(a.code, a.stderr).toBe(0);
    expect(events(eventsFile)).toHaveLength(N);

    // B, a pod of the same Job whose clock says it started after 10:01: the pass is over.
    const b = await pod('qc-600', 'B', '2026-03-02 10:01:10');
    expect(b.code, b.stderr).toBe(0);
    const ids = events(eventsFile).map((e) => e.split(' ')[0]);
    expect(ids.filter((id, i) => ids.indexOf(id) !== i), 'items run twice for the fire of Job qc-600').toEqual([]);
    expect(events(eventsFile).filter((e) => e.endsWith(' B'))).toEqual([]);
    const runs = await server.admin<{ scheduled_for: string }>('SELECT scheduled_for::text FROM lp.runs ORDER BY started_at', [], 'latepod');
    expect(runs.map((r) => Number(r.scheduled_for))).toEqual([Date.UTC(2026, 2, 2, 10, 0), Date.UTC(2026, 2, 2, 10, 0)]);

    // The next Job (the 10:01 fire) is another group: it runs every item again, as the policy says.
    const c = await pod('qc-601', 'C', '2026-03-02 10:01:20');
    expect(c.code, c.stderr).toBe(0);
    expect(events(eventsFile).filter((e) => e.endsWith(' C'))).toHaveLength(N);

    // A JOB_NAME that every build shares (Jenkins's) names no one fire: each run is its own.
    for (const [name, at] of [['D', '2026-03-02 10:02:10'], ['E', '2026-03-02 10:03:10']] as const) {
      const r = await pod('nightly-build', name, at, 'JOB_NAME');
      expect(r.code, r.stderr).toBe(0);
      expect(events(eventsFile).filter((e) => e.endsWith(` ${name}`))).toHaveLength(N);
    }
  }, 120_000);
});
