/**
 * Claims left by the pod of an earlier pass (another run group: the Job before), killed just
 * before this pass began, with live leases then: this pass's start cannot take them back. Once
 * their lease runs out while this pass is still going, the pass takes them over and does them,
 * instead of ending `completed` with them still claimed by a dead pod until the next run.
 * Real processes, a real server, SIGKILL.
 */
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnCli, workspace, type LogLine, type Running } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

/**
 * 60 ms per item. TEST_HANG_FIRST=n: the first n items a process starts wait until aborted
 * (a pod stuck on slow items). TEST_GATE=file: item `gate.txt` waits until that file exists.
 */
const HANDLER = `import { writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
let started = 0;
export default async function h(item, ctx) {
  const hang = started++ < Number(process.env.TEST_HANG_FIRST ?? 0);
  if (item.id === 'gate.txt' && process.env.TEST_GATE) {
    while (!existsSync(process.env.TEST_GATE)) await new Promise((r) => setTimeout(r, 50));
  }
  await new Promise((resolve, reject) => {
    const t = setTimeout(resolve, hang ? 600000 : 60);
    ctx.signal?.addEventListener('abort', () => { clearTimeout(t); reject(new Error('aborted')); }, { once: true });
  });
  await writeFile(ctx.outputPath, String(process.pid));
}
`;

async function pollUntil(cond: () => Promise<boolean>, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: claims of an earlier pass whose pod was killed', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("expire during the next pass: that pass takes them over and does them, not the run after it", async () => {
    const url = await server.createDatabase('earlier');
    const files = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`item-${i}.txt`, String(i)]));
    // The lease docs/postgres.md recommends with PostgreSQL: 30 s, renewed every 10 s.
    const ws = workspace(
      { handler: { module: 'handler.mjs' }, state: { postgres: url, schema: 'earlier' }, concurrency: 4, lease: { seconds: 30, renewSeconds: 10 }, log: { level: 'info' } },
      files,
    );
    writeFileSync(path.join(ws.dir, 'handler.mjs'), HANDLER);
    const count = async (where: string): Promise<number> => {
      // 0 until A's start has made the schema.
      const [made] = await server.admin<{ t: string | null }>(`SELECT to_regclass('earlier.items')::text AS t`, [], 'earlier');
      if (!made?.t) return 0;
      const [r] = await server.admin<{ n: number }>(`SELECT count(*)::int AS n FROM earlier.items WHERE ${where}`, [], 'earlier');
      return r?.n ?? 0;
    };

    // The Job before: its pod hangs on its first 4 items (all its slots), and is killed.
    const a = spawnCli(['run', '-c', ws.configPath], { env: { CRONSAFE_RUN_GROUP: 'job-a', TEST_HANG_FIRST: '4' }, timeoutMs: 120_000 });
    await pollUntil(async () => (await count(`state = 'claimed'`)) >= 4, "A's 4 claims", 60_000);
    a.child.kill('SIGKILL');
    expect((await a.exited).signal).toBe('SIGKILL');

    // The next Job: it starts while A's leases are live, so its start takes nothing back. Its
    // item gate.txt holds the pass open until the test has seen A's leases run out.
    writeFileSync(path.join(ws.source, 'gate.txt'), 'gate');
    const gate = path.join(ws.dir, 'gate-open');
    const b: Running = spawnCli(['run', '-c', ws.configPath], { env: { CRONSAFE_RUN_GROUP: 'job-b', TEST_GATE: gate }, timeoutMs: 150_000 });
    await b.waitFor((l) => l.msg === 'run started', 60_000);
    const aliveAtStart = await count(`state = 'claimed' AND lease_until >= ${Date.now()}`);
    // (Had B's start come after A's leases ran out, it took them back then: nothing of A's is live either.)
    await pollUntil(async () => (await count(`state = 'claimed' AND owner NOT LIKE '%:' || ${b.child.pid} || ':%' AND lease_until >= ${Date.now()}`)) === 0, "A's leases to expire", 90_000);
    writeFileSync(gate, '');
    expect(existsSync(gate)).toBe(true);
    const eb = await b.exited;

    const fin = b.lines.find((l: LogLine) => l.msg === 'run finished') as unknown as { outcome: string; items: Record<string, number> } | undefined;
    const report = JSON.stringify({ aliveAtStart, fin, claimed: await count(`state = 'claimed'`) });
    expect(eb.code, b.stderr()).toBe(0);
    expect(fin?.outcome, report).toBe('completed');
    // Before: B ended `completed` with A's 4 items still claimed by the dead pod.
    expect(fin?.items, report).toMatchObject({ pending: 0, claimed: 0, done: 41, dead: 0 });
    expect(await count(`state = 'done'`)).toBe(41);
    // A's 4 attempts started: charged once each, then done by B.
    expect(await count(`attempts - released = 2 AND state = 'done' AND done_by LIKE '%:' || ${b.child.pid} || ':%'`), report).toBe(4);
  }, 200_000);
});
