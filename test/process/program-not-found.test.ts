import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, finished, runCli, statusJson, workspace } from '../helpers/cli.js';

/**
 * A handler whose shell cannot find the program it runs (`sh -c 'qc-tool "$1"'` in an image
 * without qc-tool: validate checks `sh`, not what it runs). Every attempt exits 127. Charged,
 * that dead-lettered the whole backlog in retry.maxAttempts runs (the default 3), each ending
 * `completed`, exit 0, with nobody told. It is the environment's fault until an attempt of
 * the pass succeeds: the pass stops uncharged, exit 1, saying why.
 */
const files = (n: number): Record<string, string> => Object.fromEntries(Array.from({ length: n }, (_, i) => [`item-${String(i).padStart(2, '0')}.txt`, 'x']));

describe('handler.command whose shell cannot find its program (exit 127)', () => {
  it('stops the pass with exit 1 and charges nothing, run after run: the backlog is not dead-lettered', async () => {
    const ws = workspace({ handler: { command: ['sh', '-c', 'cronsafe-no-such-qc-tool "$1"', 'sh', '{path}'] } }, files(20));
    for (let run = 1; run <= 3; run++) {
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(1);
      const end = finished(r);
      expect(end).toMatchObject({ outcome: 'failed' });
      expect(JSON.stringify(r.lines)).toMatch(/handler\.command exited 127 \(the shell's \\"command not found\\"\) and no attempt of this pass has succeeded/);
      const s = await statusJson(ws.configPath);
      expect(s.items, `after run ${run}`).toMatchObject({ pending: 20, claimed: 0, dead: 0 });
    }
  }, 60_000);

  it('is the item\'s own failure once an attempt of the pass has succeeded: charged, the pass goes on (exit 0)', async () => {
    // The one item exits 127 late, after the others have succeeded: it waits for one of them
    // to have exited (a mark each leaves on its way out), then a second more, however loaded the machine.
    const ws = workspace({}, { ...files(5), 'odd-one.txt': 'x' });
    const mark = path.join(ws.dir, 'succeeded');
    configure(ws, { handler: { command: ['sh', '-c', 'case "$1" in *odd*) while [ ! -e "$2" ]; do sleep 0.05; done; sleep 1; exit 127;; esac; touch "$2"', 'sh', '{path}', mark] } });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)).toMatchObject({ outcome: 'completed' });
    const failed = r.lines.find((l) => l.msg === 'item failed; will retry');
    expect(failed).toMatchObject({ itemId: 'odd-one.txt' });
    expect((await statusJson(ws.configPath)).items).toMatchObject({ done: 5, pending: 1, dead: 0 });
  }, 30_000);
});
