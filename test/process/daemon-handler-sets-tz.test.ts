/**
 * A module handler runs in cronsafe's process: one that set `process.env.TZ` (for its own
 * local dates) moved the schedule of a daemon with no schedule.timeZone to that zone from the
 * next tick on, silently: `daemon started` said UTC, and `0 1 * * *` then fired at 01:00 in
 * Tokyo (16:00 UTC), not at 01:00 UTC. The machine's zone is the one cronsafe started with.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, workspace } from '../helpers/cli.js';
import { LIBFAKETIME, spawnFastCli } from '../helpers/faketime.js';

const DUE = 'daemon: occurrence due; starting a pass';

describe.skipIf(LIBFAKETIME === undefined)('cronsafe daemon whose module handler sets process.env.TZ', () => {
  it('keeps the zone it started with: the next occurrence fires at 01:00 UTC', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/set-tz-module.mjs') }, schedule: { cron: '0 1 * * *' } }, { 'a.txt': 'a' });
    // 00:45 UTC, 60x: the first pass (yesterday's 01:00) at once, the next occurrence 15 s away
    // (a loaded machine took 6 s to start a daemon); with the handler's zone, it is 15 h away.
    const daemon = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 00:45:00', { env: { TZ: 'UTC' }, timeoutMs: 90_000 });
    try {
      expect(await daemon.waitFor((l) => l.msg === 'daemon started', 30_000)).toMatchObject({ timeZone: 'UTC', timeZoneFrom: 'TZ' });
      const first = await daemon.waitFor((l) => l.msg === DUE, 30_000);
      expect(first.occurrence).toBe('2026-05-31T01:00:00.000Z');
      await daemon.waitFor((l) => l.msg === 'run finished', 30_000);
      const second = await daemon.waitFor((l) => l.msg === DUE && l !== first, 60_000);
      expect(second.occurrence).toBe('2026-06-01T01:00:00.000Z');
      await daemon.waitFor((l) => l.msg === 'run finished' && daemon.lines.indexOf(l) > daemon.lines.indexOf(second), 30_000);
    } finally {
      daemon.child.kill('SIGTERM');
    }
    expect((await daemon.exited).code, daemon.stderr()).toBe(0);
  }, 120_000);
});
