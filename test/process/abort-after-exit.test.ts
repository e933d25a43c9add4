/**
 * A second SIGTERM (or the drain's deadline) aborts the attempts still running. A command
 * handler that had exited 0 just before, its output written, but whose exit cronsafe had not
 * heard yet (the helper that forks handlers reports it: on a loaded machine that report comes
 * tens of milliseconds late) was taken as interrupted: its finished output thrown away, its
 * claim handed back, and the item run a second time by the next run. Seen with `sleep 0.1`
 * handlers and two SIGTERMs 0-0.3 s apart: one run in ten ran an item twice at load 8-18.
 * Here the handler stops its helper (SIGSTOP) before it exits, so its exit cannot be
 * reported until the abort wakes the helper: the same order, every time.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, runCli, spawnCli, statusJson, workspace } from '../helpers/cli.js';
import { copyThenStopHelperScript, invocations } from '../helpers/proc.js';
import { filesIn, until } from '../helpers/wait.js';

/** The state letter of /proc/<pid>/stat (`Z` for a zombie), or undefined when it is gone. */
function procState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
  } catch {
    return undefined;
  }
}

describe('a handler that exited 0 just before a second SIGTERM', () => {
  it('is done with its output, not handed back and run again', async () => {
    const ws = workspace({ concurrency: 1, log: { level: 'info' } }, { 'a.txt': 'payload a\n', 'b.txt': 'payload b\n' });
    const markers = path.join(ws.dir, 'markers');
    mkdirSync(markers);
    // Copies; for item a.txt, the first time, stops its parent, the helper, and exits 0.
    const script = copyThenStopHelperScript(ws.dir, '[ "$CRONSAFE_ITEM_ID" = a.txt ]');
    configure(ws, { handler: { command: [script, '{path}', '{output}'] } });
    const env = { MARKER_DIR: markers };
    const run = spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 60_000 });
    let helper: number | undefined;
    try {
      await until(() => filesIn(markers).includes('helper'), 'the first handler to stop its helper', 30_000);
      helper = Number(readFileSync(path.join(markers, 'helper'), 'utf8'));
      const pid = Number(readFileSync(path.join(markers, 'pid'), 'utf8'));
      // Exited (a zombie: its stopped parent cannot reap it), its exit not reported.
      await until(() => procState(pid) === 'Z', 'the handler to exit');
      run.child.kill('SIGTERM');
      await run.waitFor((l) => l.msg.startsWith('drain: stopped claiming'), 30_000);
      run.child.kill('SIGTERM');
      const { code } = await run.exited;
      // 75 with b.txt left pending, 0 when b.txt ran before a.txt (the scan's order).
      expect([0, 75], run.stderr()).toContain(code);
    } finally {
      if (helper !== undefined) {
        try {
          process.kill(helper, 'SIGCONT');
        } catch {
          /* gone with the run */
        }
      }
      run.child.kill('SIGKILL');
    }
    expect(run.lines.filter((l) => l.itemId === 'a.txt' && /interrupted/.test(l.msg)), 'a.txt was taken as interrupted').toEqual([]);
    expect(readFileSync(path.join(ws.out, 'a.txt.out'), 'utf8')).toBe('payload a\n');
    const next = await runCli(['run', '-c', ws.configPath], { env });
    expect(next.code, next.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
    // a.txt's handler ran once: its success in the drained run stood.
    expect(Object.fromEntries(invocations(path.join(markers, 'invocations')))).toEqual({ 'a.txt': 1, 'b.txt': 1 });
  }, 120_000);
});
