/**
 * killed-while-draining.test.ts on PostgreSQL: a pod whose grace is shorter than
 * drain.gracePeriodSeconds is SIGKILLed after its drain began. Its claims are taken back
 * when their lease expires (here by the next run), and they were charged as a crash's:
 * with the default retry.maxAttempts, a good item in flight at every such eviction was
 * dead-lettered by evictions alone. The stop is recorded in the ledger when the drain
 * begins, and the reclaim hands them back uncharged.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresLedger } from '../../src/ledger/postgres/index.js';
import { FIXTURES, finished, runCli, spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';
import { killTree } from '../helpers/proc.js';
import { filesIn, until } from '../helpers/wait.js';

const slow = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];
const ids = ['a.txt', 'b.txt'];

describe.skipIf(PG_SKIP_REASON !== undefined)('a pod SIGKILLed while it drained (PostgreSQL, default retry and drain)', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('charges nothing: seven such evictions in a row dead-letter no item, and the next clean run does them', async () => {
    const url = await server.createDatabase('killeddraining');
    // A short lease, so that each next run takes the dead pod's claims back at once.
    const ws = workspace({ handler: { command: slow }, concurrency: 2, state: { postgres: url }, lease: { seconds: 2, renewSeconds: 1 } }, Object.fromEntries(ids.map((id) => [id, id])));
    const markers = path.join(ws.dir, 'markers');
    const ledger = await openPostgresLedger({ url, schema: 'cronsafe' });
    // The dead pod's claims are taken back once their lease ran out (no lock proves it gone).
    const leasesOver = async () => {
      for (const id of ids) {
        const rec = await ledger.get(id);
        if (rec?.state === 'claimed' && (rec.leaseUntil ?? 0) >= Date.now()) return false;
      }
      return true;
    };
    for (let round = 0; round < 7; round++) {
      if (round > 0) await until(leasesOver, 'the killed pod\'s leases to run out');
      const before = filesIn(markers).length;
      const run = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '120000' }, timeoutMs: 60_000 });
      const started = await Promise.race([until(() => filesIn(markers).length > before, 'a handler to start').then(() => true), run.exited.then(() => false)]);
      if (!started) throw new Error(`round ${round}: the run ended before a handler started: ${JSON.stringify(await ledger.get('a.txt'))} ${JSON.stringify(run.lines.map((l) => l.msg))}`);
      run.child.kill('SIGTERM');
      await run.waitFor((l) => l.msg === 'drain: stopped claiming; in-flight items may finish');
      // Over the network the record is committed a round trip after the drain began.
      await run.waitFor((l) => String(l.msg).startsWith('stop recorded in the ledger'));
      killTree(run.child.pid!);
      await run.exited;
    }
    await until(leasesOver, "the killed pod's leases to run out");
    const clean = await runCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '10' }, timeoutMs: 60_000 });
    expect(clean.code, clean.stderr).toBe(0);
    expect(finished(clean)?.items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
    try {
      for (const id of ids) {
        const rec = await ledger.get(id);
        expect(rec!.attempts, id).toBeGreaterThan(5);
        // Only the clean run's own attempt is charged; every evicted one was handed back.
        expect(rec!.attempts - rec!.released, id).toBe(1);
      }
    } finally {
      await ledger.close();
    }
  }, 180_000);
});
