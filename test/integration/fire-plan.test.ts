import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import type { Ledger } from '../../src/ledger/types.js';
import { planFire } from '../../src/run/fire-plan.js';
import { workspace } from '../helpers/cli.js';
import { memoryLogger } from '../helpers/log.js';

const open: Ledger[] = [];
afterEach(async () => {
  for (const l of open.splice(0)) await l.close();
});

async function setup() {
  const ws = workspace({ handler: { command: ['true'] }, schedule: { cron: '0 * * * *', timeZone: 'UTC', refresh: 'every-occurrence' } });
  const ledger = await openSqliteLedger(ws.db);
  open.push(ledger);
  await ledger.startRun({ runId: 'r0', owner: 'o', startedAt: Date.parse('2026-06-01T10:00:01Z'), scheduledFor: Date.parse('2026-06-01T10:00:00Z') });
  return { config: loadConfig(ws.configPath), ledger };
}

describe('planFire schedule records', () => {
  const now = new Date('2026-06-01T14:00:05Z');

  it('the pod that owns the pass records missed occurrences', async () => {
    const { config, ledger } = await setup();
    const { log } = memoryLogger();
    const plan = await planFire(config, ledger, log, now, undefined, 'kubernetes');
    expect(plan.refresh).toEqual({ doneBefore: Date.parse('2026-06-01T14:00:00Z') });
    expect((await ledger.totals()).missed).toBe(3);
  });

  it('a pod that joined the pass records nothing (no double counting) but applies the same refresh', async () => {
    const { config, ledger } = await setup();
    const { log } = memoryLogger();
    const plan = await planFire(config, ledger, log, now, undefined, 'kubernetes', undefined, false);
    expect(plan.refresh).toEqual({ doneBefore: Date.parse('2026-06-01T14:00:00Z') });
    expect(plan.fire?.occurrence.toISOString()).toBe('2026-06-01T14:00:00.000Z');
    const stop = plan.watchOverruns();
    stop();
    expect(await ledger.totals()).toMatchObject({ missed: 0, overruns: 0, stale: 0 });
  });

  // The schedule the ledger's occurrences were counted under (src/ledger/schedule-record.ts).
  const CHANGED = 'schedule: schedule.cron or schedule.timeZone changed since the last recorded occurrence; of the occurrences since, only those of both schedules are counted as missed';

  it('a fire of a new schedule whose run was never recorded (killed at its start): the next fire counts its missed ones from it', async () => {
    const { config, ledger } = await setup();
    await ledger.recordSchedule({ cron: '0 0 * * *', timeZone: 'UTC', since: Date.parse('2026-06-01T00:00:00Z') });
    const first = memoryLogger();
    await planFire(config, ledger, first.log, now, undefined, 'kubernetes');
    expect(first.lines.find((l) => l.msg === CHANGED)).toMatchObject({ before: { cron: '0 0 * * *' }, cron: '0 * * * *' });
    expect((await ledger.totals()).missed).toBe(0); // 11:00-13:00 were no fires of the daily schedule
    // No run was recorded for 14:00; 15:00 and 16:00 came and went.
    const next = memoryLogger();
    await planFire(config, ledger, next.log, new Date('2026-06-01T17:00:05Z'), undefined, 'kubernetes');
    expect(next.lines.find((l) => l.msg === CHANGED)).toBeUndefined();
    expect((await ledger.totals()).missed).toBe(2);
  });

  it('a pod that joined the pass records no schedule: the pass owner\'s record stands', async () => {
    const { config, ledger } = await setup();
    await ledger.recordSchedule({ cron: '0 0 * * *', timeZone: 'UTC', since: Date.parse('2026-06-01T00:00:00Z') });
    await planFire(config, ledger, memoryLogger().log, now, undefined, 'kubernetes', undefined, false);
    const owner = memoryLogger();
    await planFire(config, ledger, owner.log, now, undefined, 'kubernetes');
    expect(owner.lines.find((l) => l.msg === CHANGED)).toBeDefined();
  });
});
