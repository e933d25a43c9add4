/**
 * A pod killed again and again soon after it starts (SIGKILL of the whole tree: node loss,
 * the OOM killer) on PostgreSQL, with the retry settings users get (maxAttempts 5). The
 * suspects (items charged twice, the last time by a dead pod) must take turns: the kills
 * are not their doing. Only the lease is short, so that each run takes the killed one's
 * claims back without a 90 s wait.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresLedger } from '../../src/ledger/postgres/index.js';
import { configure, FIXTURES, runCli, spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';
import { invocations, killTree } from '../helpers/proc.js';
import { until } from '../helpers/wait.js';

const LOGGED_COPY = path.join(FIXTURES, 'process/logged-copy.sh');
const startsIn = (log: string): number => [...invocations(log).values()].reduce((a, b) => a + b, 0);

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a pod killed again and again soon after its start (the defaults users get)', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('charges the suspects in turn: no good item is dead-lettered by 10 kills, and a clean run finishes them all', async () => {
    const url = await server.createDatabase('evictionloop');
    const files: Record<string, string> = {};
    for (let i = 0; i < 6; i++) files[`item-${i}`] = `payload ${i}\n`;
    const ws = workspace({ state: { postgres: url, schema: 'evict' }, concurrency: 4, lease: { seconds: 3, renewSeconds: 1 } }, files);
    const log = path.join(ws.dir, 'invocations.log');
    // Every attempt outlasts the time before its kill.
    configure(ws, { handler: { command: ['/bin/sh', LOGGED_COPY, '{path}', '{output}'], env: { INVOCATIONS: log, DELAY: '30' } } });
    const ledger = await openPostgresLedger({ url, schema: 'evict' });
    const leasesOver = async (): Promise<void> => {
      const [row] = await server.admin<{ t: string }>(`SELECT coalesce(max(lease_until), 0) AS t FROM evict.items WHERE state = 'claimed'`, [], 'evictionloop');
      const last = Number(row?.t ?? 0);
      await until(() => Date.now() > last + 50, 'the killed run’s leases to expire', 30_000);
    };
    try {
      for (let k = 1; k <= 10; k++) {
        await leasesOver();
        const before = startsIn(log);
        const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
        // Killed as soon as its first attempt has begun.
        await until(() => startsIn(log) > before, `an attempt started (round ${k})`, 60_000);
        killTree(run.child.pid!);
        await run.exited;
      }
      await leasesOver();
      configure(ws, { handler: { command: ['/bin/sh', LOGGED_COPY, '{path}', '{output}'], env: { INVOCATIONS: log, DELAY: '0.01' } } });
      const clean = await runCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
      expect(clean.code, clean.stderr).toBe(0);
      const started = invocations(log);
      for (const id of Object.keys(files)) {
        const rec = (await ledger.get(id))!;
        // Before: the pod's start reclaimed the item in flight at the kill and, before its scan
        // had marked the other suspects as the pass's, took it as the only suspect there was:
        // the same item was charged at every kill from the third on, dead at the seventh.
        expect(rec, `${id} (started ${started.get(id) ?? 0} times)`).toMatchObject({ state: 'done' });
        // Its last attempt, the clean run's, succeeded: the kills charged the others.
        expect(rec.attempts - rec.released - 1, `attempts of ${id} charged by the kills`).toBeLessThan(5);
      }
    } finally {
      await ledger.close();
    }
  }, 300_000);
});
