/**
 * Issue 11: the pods of one pass start together (a Job's `parallelism`). The pod that
 * starts the pass ends the runs that never recorded an end (SIGKILL, OOM) as `died`; a
 * sibling that joined meanwhile, and recorded its start already, is alive and must stay so.
 * Real processes, a real server, default settings.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

/** Whether the process is stopped (state T in /proc/PID/stat). */
const stopped = (pid: number): boolean => /^\d+ \(.*\) T /s.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: the pod that starts a pass and its siblings', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("a sibling that joined before the first pod looked for dead runs is not marked 'died': both runs end 'completed'", async () => {
    const url = await server.createDatabase('joinruns');
    const files = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`d${i % 4}/item-${i}.txt`, String(i)]));
    const ws = workspace({ handler: { command: ['sh', '-c', 'sleep 0.05; echo ok > "$1"', 'h', '{path}', '{output}'] }, state: { postgres: url }, log: { level: 'info' } }, files);
    const env = { CRONSAFE_JOB_NAME: 'join-runs-1' };
    // The first pod takes the lock; held up right there (a slow node), its sibling joins and
    // records its start before the first one goes on.
    const a = spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 60_000 });
    await a.waitFor((l) => l.msg === 'run lock taken (PostgreSQL advisory lock)', 30_000);
    a.child.kill('SIGSTOP');
    const pidA = a.child.pid!;
    const deadline = Date.now() + 5_000;
    while (!stopped(pidA) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    const b = spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 60_000 });
    try {
      await b.waitFor((l) => l.msg === 'run started', 30_000);
    } finally {
      a.child.kill('SIGCONT');
    }
    const [ea, eb] = await Promise.all([a.exited, b.exited]);
    expect(ea.code, a.stderr()).toBe(0);
    expect(eb.code, b.stderr()).toBe(0);
    expect(b.lines.some((l) => l.msg === 'joined the pass of this run group'), b.stdout()).toBe(true);
    const died = a.lines.filter((l) => /marked runs that never finished as 'died'/.test(l.msg));
    expect(died, 'the first pod took a live sibling for dead').toEqual([]);
    const runs = await server.admin<{ owner: string; outcome: string }>(`SELECT owner, outcome FROM cronsafe.runs ORDER BY seq`, [], 'joinruns');
    expect(runs.map((r) => r.outcome), JSON.stringify(runs)).toEqual(['completed', 'completed']);
    const [items] = await server.admin<{ done: number }>(`SELECT count(*)::int AS done FROM cronsafe.items WHERE state = 'done'`, [], 'joinruns');
    expect(items?.done).toBe(40);
  }, 90_000);
});
