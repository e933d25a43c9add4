/**
 * A command handler's parent is cronsafe's helper that forks the children (spawn-server.ts).
 * One that stops it (`kill -STOP $PPID`) froze the reports of every child of that helper:
 * the attempt waited for its exit past handler.timeoutSeconds, for ever, so the run never
 * ended (and under `concurrencyPolicy: Forbid` no later one started) and the item was never
 * charged, and the helper stayed stopped after cronsafe was gone. A timeout (or a drain's
 * abort) now resumes the helper: the attempt times out and is charged like any other.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runCli, statusJson, workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';
import { HELPER_FLAG } from '../../src/runner/handlers/process-group.js';

/** Live helper processes started with MARK=`mark` in their environment. */
function helpersMarked(mark: string): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((name) => {
      try {
        return readFileSync(`/proc/${name}/cmdline`, 'latin1').split('\0')[1] === HELPER_FLAG && readFileSync(`/proc/${name}/environ`, 'latin1').split('\0').includes(`MARK=${mark}`);
      } catch {
        return false; // gone, or a zombie
      }
    })
    .map(Number);
}

describe('a handler that stops its parent process (kill -STOP $PPID)', () => {
  it('times out and is charged like any poison item; the run ends and leaves no helper behind', async () => {
    // Runs on after stopping it (one that exits 0 instead is judged by its exit status:
    // timeout-after-exit.test.ts).
    const script = 'if [ "$1" = poison.txt ]; then kill -STOP "$PPID"; sleep 60; fi; exit 0';
    const ws = workspace(
      {
        handler: { command: ['sh', '-c', script, 'sh', '{id}'], timeoutSeconds: 1, killAfterSeconds: 1 },
        concurrency: 1,
        retry: { maxAttempts: 1 },
        log: { level: 'info' },
      },
      { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c', 'poison.txt': 'p' },
    );
    const mark = ws.dir;
    try {
      const r = await runCli(['run', '-c', ws.configPath], { timeoutMs: 30_000, env: { MARK: mark } });
      // Before: the run never ended (killed by this test's hard timeout: code null).
      expect(r.code, r.stderr).toBe(0);
      const dead = r.lines.filter((l) => l.msg === 'item dead-lettered');
      expect(dead.map((l) => [l.itemId, l.error])).toEqual([['poison.txt', 'timed out after 1s']]);
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 3, dead: 1 });
      await until(() => helpersMarked(mark).length === 0, 'the helpers to end with cronsafe');
    } finally {
      for (const pid of helpersMarked(mark)) process.kill(pid, 'SIGKILL');
    }
  });
});
