/**
 * A push carries what the ledger says now, or nothing. On PostgreSQL the pods of one pass
 * push to one Pushgateway group; a pod whose ledger read fails at its final push must not
 * PUT the values it read earlier over a newer pod's push: the group's counters would go
 * back (a reset to Prometheus), and increase() would count each whole total again.
 * Two in-process RunMetrics over one real SQLite ledger file stand for the two pods; a real
 * Pushgateway holds the group.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { startRunMetrics } from '../../src/metrics/index.js';
import { FIXTURES, workspace } from '../helpers/cli.js';
import { memoryLogger } from '../helpers/log.js';
import { until } from '../helpers/wait.js';
import { find, PUSHGATEWAY, scrape, startPushgateway, type Server } from '../helpers/prom.js';

const GATED = path.join(FIXTURES, 'handlers/module-gated.mjs');

describe.skipIf(!PUSHGATEWAY)('a push whose ledger read failed (real Pushgateway, real SQLite ledger)', () => {
  let gw: Server;
  beforeAll(async () => {
    gw = await startPushgateway();
  });
  afterAll(async () => {
    await gw?.stop();
  });

  const completed = async (job: string) =>
    find(await scrape(gw.url), 'cronsafe_runs_total', { job, outcome: 'completed' }).map((s) => s.value);

  it('does not push the last values read over a newer push to the group: no counter goes back', async () => {
    const job = 'stale-final-push';
    const ws = workspace({ name: job, handler: { module: GATED }, metrics: { pushgateway: gw.url, pushIntervalSeconds: 3600 } });
    const config = loadConfig(ws.configPath);
    const t0 = Date.now();

    // Pod A starts its run and pushes (no completed run in the ledger yet).
    const a = { ...memoryLogger(), ledger: await openSqliteLedger(ws.db) };
    await a.ledger.startRun({ runId: 'run-a', owner: 'pod-a', startedAt: t0 });
    const metricsA = await startRunMetrics({ config, ledger: a.ledger, log: a.log });
    metricsA.runStarted();
    let seen: number[] = [];
    await until(async () => (seen = await completed(job)).length === 1, "pod A's first push");
    expect(seen).toEqual([0]);

    // Pod B (same ledger) completes a run and pushes after A: completed = 1 in the group.
    const b = { ...memoryLogger(), ledger: await openSqliteLedger(ws.db) };
    await b.ledger.startRun({ runId: 'run-b', owner: 'pod-b', startedAt: t0 + 1 });
    await b.ledger.finishRun('run-b', t0 + 2, 'completed', {});
    const metricsB = await startRunMetrics({ config, ledger: b.ledger, log: b.log });
    await metricsB.runFinished('completed');
    await metricsB.close();
    expect(await completed(job)).toEqual([1]);

    // A loses its ledger (store gone), then its final push: nothing read now, nothing pushed.
    await a.ledger.close();
    await metricsA.runFinished('failed');
    await metricsA.close();
    expect(await completed(job), JSON.stringify(a.lines.filter((l) => String(l.msg).startsWith('metrics')))).toEqual([1]);
    const skipped = a.lines.filter((l) => l.msg === 'metrics: not pushing, the ledger could not be read (the Pushgateway keeps what was pushed last)');
    expect(skipped).toHaveLength(1);
    expect(skipped[0]!.level).toBe(40);
    await b.ledger.close();
  });
});
