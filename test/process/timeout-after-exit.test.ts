/**
 * A command handler that exited 0 just before handler.timeoutSeconds, its output written, but
 * whose exit cronsafe had not heard yet (the helper that forks handlers reports it: on a
 * loaded machine that report comes late), was taken as timed out: the attempt charged, its
 * finished output thrown away and the item run again (dead-lettered at the last attempt). A
 * drain's abort already judged such a child by its exit status (abort-after-exit.test.ts);
 * the timeout now does too. Here the handler stops its helper (SIGSTOP) before it exits, so
 * its exit cannot be reported until the timeout wakes the helper: the same order, every time.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, runCli, statusJson, workspace } from '../helpers/cli.js';
import { copyThenStopHelperScript, invocations } from '../helpers/proc.js';

describe('a handler that exited 0 just before its timeout, its exit not yet reported', () => {
  it('is done with its output, not charged as timed out and run again', async () => {
    const ws = workspace({ concurrency: 1, log: { level: 'info' } }, { 'a.txt': 'payload a\n' });
    const markers = path.join(ws.dir, 'markers');
    mkdirSync(markers);
    // Copies; the first time, stops its parent, the helper, and exits 0: a zombie whose exit
    // only the timeout's waking of the helper lets cronsafe hear.
    const script = copyThenStopHelperScript(ws.dir);
    // 5 s: the script is done (and the helper stopped) well before, under load too.
    configure(ws, { handler: { command: [script, '{path}', '{output}'], timeoutSeconds: 5 } });
    const env = { MARKER_DIR: markers };
    let helper: number | undefined;
    try {
      const r = await runCli(['run', '-c', ws.configPath], { env, timeoutMs: 60_000 });
      helper = Number(readFileSync(path.join(markers, 'helper'), 'utf8'));
      expect(r.code, r.stderr).toBe(0);
      expect(r.lines.filter((l) => /timed out/.test(String(l.msg)) || /timed out/.test(String(l.error ?? ''))), 'a.txt was taken as timed out').toEqual([]);
    } finally {
      if (helper !== undefined) {
        try {
          process.kill(helper, 'SIGCONT');
        } catch {
          /* gone with the run */
        }
      }
    }
    expect(readFileSync(path.join(ws.out, 'a.txt.out'), 'utf8')).toBe('payload a\n');
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
    // Its handler ran once: its success stood.
    expect(Object.fromEntries(invocations(path.join(markers, 'invocations')))).toEqual({ 'a.txt': 1 });
  }, 120_000);
});
