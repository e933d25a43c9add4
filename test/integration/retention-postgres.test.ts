import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { openPostgresLedger, type PostgresLedger } from '../../src/ledger/postgres/index.js';
import type { RunOutcome } from '../../src/ledger/types.js';
import { runPass, type PassDeps } from '../../src/runner/pass.js';
import { workspace } from '../helpers/cli.js';
import { memoryLogger } from '../helpers/log.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';
import { metricTotals, seedDone } from '../helpers/retention.js';

const DAY = 24 * 3600 * 1000;
const T = Date.UTC(2026, 10, 30, 12);
const never = new AbortController().signal;

describe.skipIf(PG_SKIP_REASON !== undefined)('retention with the defaults on PostgreSQL (real server, real passes over a directory)', () => {
  const pg = usePostgresDatabase('retention');

  it('a pass prunes old runs and done items whose files are gone; the metric totals do not move', async () => {
    const present = Array.from({ length: 10 }, (_, i) => `keep-${i}.txt`);
    const ws = workspace({ handler: { command: ['true'] } }, Object.fromEntries(present.map((f) => [f, 'x'])));
    const config = loadConfig(ws.configPath);
    const ledger: PostgresLedger = await openPostgresLedger({ url: pg.url, schema: 'retention' });
    try {
      const gone = Array.from({ length: 20_000 }, (_, i) => `gone/${String(i).padStart(6, '0')}.scc`);
      await seedDone(ledger, [...present, ...gone], T - 40 * DAY);
      const pass = async (runId: string, at: number) => {
        const { log } = memoryLogger();
        const deps: PassDeps = { config, ledger, handler: { run: async () => undefined }, log, runId, owner: `o-${runId}`, stop: never, force: never, now: () => at };
        return runPass(deps);
      };

      // 31 days ago a complete scan found only the 10 files still there.
      const a = await pass('pass-a', T - 31 * DAY);
      expect(a.scan).toBe('complete');
      expect(a.pruned).toMatchObject({ markedMissing: 20_000, forgotten: 0 });

      const outcomes: RunOutcome[] = ['completed', 'failed', 'drained'];
      for (let i = 0; i < 3000; i++) {
        const at = T - 60 * DAY + Math.floor((i * 59 * DAY) / 3000);
        await ledger.startRun({ runId: `run-${i}`, owner: 'o', startedAt: at, scheduledFor: at });
        await ledger.finishRun(`run-${i}`, at + 1000, outcomes[i % 3]!, {});
      }
      for (let i = 0; i < 1500; i++) await ledger.recordEvent('overrun', T - 50 * DAY + i, {}, T - 50 * DAY + i);
      const totals = await metricTotals(ledger, T);
      expect(totals.join('\n')).toMatch(/cronsafe_runs_total\{job="test-job",outcome="completed"\} 1000/);
      const last = await ledger.lastOccurrenceRecorded();

      const b = await pass('pass-b', T);
      expect(b.outcome).toBe('completed');
      expect(b.pruned).toMatchObject({ runs: 2000, events: 1500, forgotten: 20_000, stopped: false });
      expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 10, dead: 0 });
      expect(await ledger.recentRuns(10_000)).toHaveLength(1000);
      expect(await metricTotals(ledger, T)).toEqual(totals);
      expect(await ledger.lastOccurrenceRecorded()).toBe(last);
      expect(await pg.server.admin<{ n: string }>('SELECT count(*) AS n FROM retention.items', [], 'retention')).toEqual([{ n: '10' }]);
      expect(await pg.server.admin<{ n: string }>('SELECT count(*) AS n FROM retention.runs', [], 'retention')).toEqual([{ n: '1000' }]);
    } finally {
      await ledger.close();
    }
  }, 180_000);
});
