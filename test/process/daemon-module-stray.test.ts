/**
 * A module handler's code outlives the pass that loaded it (a timer it left, its client's
 * events). While a pass runs, a stray process.exit or unhandled rejection fails that pass
 * (exit-guard.ts); between a daemon's passes there was no guard: `process.exit(0)` ended
 * `cronsafe daemon` with exit 0 and no word (systemd's Restart=on-failure would not start it
 * again), and an unhandled rejection with Node's raw stack. Either now ends it with exit 1,
 * said in the log and on stderr.
 */
import path from 'node:path';
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { FIXTURES, spawnCli, statusJson, workspace } from '../helpers/cli.js';

describe('cronsafe daemon with a module handler whose code misbehaves between passes', () => {
  for (const kind of ['exit', 'rejection'] as const) {
    it(`a stray ${kind === 'exit' ? 'process.exit(0)' : 'unhandled rejection'} between passes ends the daemon with exit 1, said in the log`, async () => {
      const ws = workspace(
        {
          handler: { module: path.join(FIXTURES, 'handlers/module-stray-later.mjs') },
          schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' },
          daemon: { tickSeconds: 1 },
        },
        { 'a.scc': 'a', 'b.scc': 'b' },
      );
      const trigger = path.join(ws.dir, 'go');
      const daemon = spawnCli(['daemon', '-c', ws.configPath], { timeoutMs: 60_000, env: { STRAY_TRIGGER: trigger, STRAY_KIND: kind } });
      try {
        await daemon.waitFor((l) => l.msg === 'run finished' && l.outcome === 'completed', 30_000);
        writeFileSync(trigger, '');
        await daemon.waitFor((l) => l.msg === 'handler code broke the process between passes; stopping the daemon', 30_000);
      } finally {
        daemon.child.kill('SIGTERM');
      }
      const { code, signal } = await daemon.exited;
      // Before: exit 0 and no line at all (exit), or exit 1 with Node's stack and no log line (rejection).
      expect({ code, signal }, daemon.stderr()).toEqual({ code: 1, signal: null });
      const why = kind === 'exit' ? 'handler code called process.exit(0) while no attempt was running' : 'handler code left a promise rejection unhandled: late rejection from handler code';
      expect(daemon.stderr()).toContain(`cronsafe: daemon failed: ${why}`);
      expect(daemon.lines.some((l) => l.msg === 'daemon stopped')).toBe(false);
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
    });
  }
});
