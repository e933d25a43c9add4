import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, statusJson, workspace } from '../helpers/cli.js';
import { LIBFAKETIME, spawnFastCli } from '../helpers/faketime.js';

// The source directory unmounted (or removed) while the daemon idles with the growth trigger
// on: the growth check's scan fails. That is the environment's fault, which the next
// occurrence's pass reports; it is not an outage of the state store (which it was called,
// naming the SQLite file), and it must not count as a pass that did not complete.

const UNAVAILABLE = 'daemon: the state store is unavailable; trying again every tick';
const CANNOT_LOOK = 'daemon: cannot look for new files in the source; looking again after daemon.growth.cooldownSeconds (scheduled occurrences still run)';

describe.skipIf(LIBFAKETIME === undefined)('cronsafe daemon, source directory gone while idle', () => {
  it('the growth check says the source is missing, not that the state store is unavailable, and picks up once it is back', async () => {
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') },
        schedule: { cron: '0 * * * *', timeZone: 'UTC' },
        daemon: { growth: { enabled: true } }, // default cooldown: 300 s
      },
      { 'a.txt': 'a' },
    );
    const daemon = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 12:00:30', { timeoutMs: 90_000 });
    try {
      await daemon.waitFor((l) => l.msg === 'run finished', 30_000);
      rmSync(ws.source, { recursive: true, force: true });
      const seen = await daemon.waitFor((l) => l.msg === UNAVAILABLE || l.msg === CANNOT_LOOK, 30_000);
      expect(seen.msg).toBe(CANNOT_LOOK);
      expect(String(seen.err)).toContain(ws.source);
      expect(seen.cooldownSeconds).toBe(300);
      // Fake minutes go by (a tick is half a real second): it looks again each cooldown, but says so once.
      await new Promise((r) => setTimeout(r, 2_000));
      // Back, with a new file: the growth trigger still stands (it did not count the misses as passes).
      mkdirSync(ws.source);
      writeFileSync(path.join(ws.source, 'b.txt'), 'b');
      let grew = false;
      const growthPass = await daemon.waitFor((l) => {
        if (l.msg === 'daemon: the source has grown since the last completed pass; starting a pass') grew = true;
        return grew && l.msg === 'run finished';
      }, 30_000);
      expect(growthPass).toMatchObject({ outcome: 'completed', counts: { succeeded: 1 } });
    } finally {
      daemon.child.kill('SIGTERM');
    }
    expect((await daemon.exited).code, daemon.stderr()).toBe(0); // stopped while idle
    expect(daemon.lines.filter((l) => l.msg === CANNOT_LOOK)).toHaveLength(1);
    expect(daemon.lines.filter((l) => l.msg === UNAVAILABLE || String(l.msg).startsWith('daemon: standing down'))).toEqual([]);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
  });
});
