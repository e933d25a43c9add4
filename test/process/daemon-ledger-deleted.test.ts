import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, growthPassFinished, GROWTH_PASS, workspace } from '../helpers/cli.js';
import { LIBFAKETIME, spawnFastCli } from '../helpers/faketime.js';

// The SQLite ledger deleted while the daemon idles (an operator starting over): the next run
// makes a new one. The daemon's own connection, open since its start, kept reading the deleted
// file (and kept it on the disk): its growth check never saw the items the new ledger holds,
// so it started a pass every cooldown, for ever, over items already done.

const DUE = 'daemon: occurrence due; starting a pass';

describe.skipIf(LIBFAKETIME === undefined)('cronsafe daemon, ledger deleted while idle', () => {
  it('reads the ledger the next run made: one growth pass for the new file, not one per cooldown', async () => {
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') },
        schedule: { cron: '*/15 * * * *', timeZone: 'UTC' },
        daemon: { growth: { enabled: true } }, // default cooldown: 300 s, three per 15 minutes
      },
      { 'a.txt': 'a' },
    );
    const daemon = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 12:00:30', { timeoutMs: 90_000 });
    try {
      await daemon.waitFor((l) => l.msg === 'run finished', 30_000);
      for (const suffix of ['', '-wal', '-shm']) rmSync(`${ws.db}${suffix}`, { force: true });
      writeFileSync(path.join(ws.source, 'b.txt'), 'b');
      const growthPass = await growthPassFinished(daemon);
      expect(growthPass).toMatchObject({ outcome: 'completed', counts: { succeeded: 2 } }); // a new ledger: both again
      // Two more occurrences (12:15, 12:30): cooldowns enough for more growth passes, had the daemon any reason.
      let due = 0;
      await daemon.waitFor((l) => l.msg === DUE && ++due === 2, 45_000);
      await daemon.waitFor((l) => l.msg === 'run finished' && due === 2 && l.time !== growthPass.time, 30_000);
    } finally {
      daemon.child.kill('SIGTERM');
    }
    await daemon.exited;
    expect(daemon.lines.filter((l) => l.msg === GROWTH_PASS).map((l) => l.time)).toHaveLength(1);
  });
});
