/**
 * A module handler (or a library it imports) that removes the process's SIGTERM and SIGINT
 * listeners, taking shutdown for itself, removed cronsafe's drain with them: the next SIGTERM
 * killed the run at once with the signal's default action (exit 143), the attempts running
 * left claimed, and the next run charged them as a crash's. cronsafe's own listeners are
 * kept while a module handler is loaded: the stop drains as any other (exit 75).
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, finished, spawnCli, statusJson, workspace } from '../helpers/cli.js';

const items = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`item-${String(i).padStart(2, '0')}.txt`, `item ${i}`]));

describe('a module handler that removes the stop signals\' listeners', () => {
  for (const [when, sig] of [['import', 'SIGTERM'], ['attempt', 'SIGINT']] as const) {
    it(`at ${when}: ${sig} still drains: exit 75, nothing left claimed, the attempts running finish`, async () => {
      const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/takes-signals-module.mjs') } }, items);
      const run = spawnCli(['run', '-c', ws.configPath], { env: { TAKE_SIGNALS: when, WAIT_MS: '2000' }, timeoutMs: 120_000 });
      await run.waitFor((l) => l.msg === 'handler started', 60_000);
      run.child.kill(sig);
      const { code, signal } = await run.exited;
      expect(signal, run.stderr()).toBeNull();
      expect(code, run.stderr()).toBe(75);
      expect(finished({ lines: run.lines })?.outcome).toBe('drained');
      const { pending = 0, claimed, done = 0, dead } = (await statusJson(ws.configPath)).items;
      expect(claimed).toBe(0);
      expect(dead).toBe(0);
      expect(done).toBeGreaterThan(0);
      expect(pending + done).toBe(20);
    }, 150_000);
  }
});
