import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURES, finished, runCli, spawnCli, statusJson, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

interface RunView {
  runId: string;
  outcome: string | null;
  startedAt: number;
  finishedAt: number | null;
}

/**
 * A SIGKILLed run never records its end. The next run proves it dead (it holds the lock;
 * PostgreSQL: it started the pass alone) and marks it `died`, so status stops calling it
 * running.
 */
async function killThenRunAgain(state?: Record<string, unknown>): Promise<void> {
  const ws = workspace(
    { handler: { module: path.join(FIXTURES, 'process/wait-module.mjs') }, ...(state ? { state } : {}), log: { level: 'info' } },
    { 'a.scc': 'a', 'b.scc': 'b' },
  );
  const first = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
  const started = await first.waitFor((l) => l.msg === 'run started');
  await first.waitFor((l) => l.msg === 'handler started');
  first.child.kill('SIGKILL');
  expect((await first.exited).signal).toBe('SIGKILL');

  const before = (await statusJson(ws.configPath)).recentRuns as RunView[];
  expect(before).toHaveLength(1);
  expect(before[0]).toMatchObject({ runId: started.runId, outcome: null, finishedAt: null });
  const text = await runCli(['status', '-c', ws.configPath]);
  expect(text.stdout).toMatch(/ running +\(counts when it ends\) /);

  const second = await runCli(['run', '-c', ws.configPath], { env: { WAIT_MS: '0' } });
  expect(second.code, second.stderr).toBe(0);
  expect(finished(second)).toMatchObject({ outcome: 'completed' });
  const marked = second.lines.find((l) => l.msg === "marked runs that never finished as 'died' (their process is gone)");
  expect(marked?.runs).toEqual([started.runId]);

  const after = (await statusJson(ws.configPath)).recentRuns as RunView[];
  const dead = after.find((r) => r.runId === started.runId);
  expect(dead).toMatchObject({ outcome: 'died' });
  expect(dead!.finishedAt).toBeGreaterThanOrEqual(dead!.startedAt);
  expect((await runCli(['status', '-c', ws.configPath])).stdout).toMatch(/ died +\(no counts: it never recorded its end\) /);
}

describe('runs killed with SIGKILL are marked died by the next run', () => {
  it('SQLite', async () => {
    await killThenRunAgain();
  }, 90_000);

  describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL', () => {
    let server: PgServer;
    beforeAll(async () => {
      server = await startPostgres();
    });
    afterAll(async () => {
      await server?.stop();
    });
    it('a run that starts the pass alone marks the runs of earlier passes', async () => {
      await killThenRunAgain({ postgres: await server.createDatabase('died'), schema: 'died' });
    }, 90_000);
  });
});
