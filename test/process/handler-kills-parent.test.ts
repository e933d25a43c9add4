import { mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, statusJson, workspace } from '../helpers/cli.js';

describe('a handler that kills its parent process (kill -9 $PPID)', () => {
  it('is charged and dead-lettered like any poison item, not taken for an environment fault that stops every run', async () => {
    // Its parent is the helper that forks cronsafe's children: killing it must cost the item
    // an attempt, as crashing cronsafe would, or the item stops every run and is never charged.
    const script = 'if [ "$1" = poison.txt ]; then kill -9 "$PPID"; sleep 1; fi; exit 0';
    const files = Object.fromEntries(['a', 'b', 'c', 'd'].map((n) => [`${n}.txt`, n]));
    const ws = workspace(
      {
        handler: { command: ['sh', '-c', script, 'sh', '{id}'] },
        concurrency: 1,
        retry: { maxAttempts: 2, backoffSeconds: 0, backoffMaxSeconds: 0 },
        log: { level: 'info' },
      },
      { ...files, 'poison.txt': 'p' },
    );
    const r = await runCli(['run', '-c', ws.configPath], { timeoutMs: 30_000 });
    expect(r.code, r.stderr).toBe(0);
    const dead = r.lines.filter((l) => l.msg === 'item dead-lettered');
    expect(dead.map((l) => l.itemId)).toEqual(['poison.txt']);
    expect(String(dead[0]?.error)).toMatch(/exited \(SIGKILL\).*did the handler kill its parent process/);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 4, dead: 1 });
  });

  it("leaves no directory of FIFOs (cronsafe-io-*) in the temp directory: the killed helper could not remove its own", async () => {
    // The helper removes the directory of its children's FIFOs at its exit, which a SIGKILL
    // never reaches: each helper killed left one in $TMPDIR (the pod's /tmp emptyDir) for good.
    const ws = workspace({ handler: { command: ['sh', '-c', 'echo hi > /dev/stdout; [ "$1" != poison.txt ] || kill -9 "$PPID"; sleep 1', 'sh', '{id}'] }, concurrency: 1, retry: { maxAttempts: 1 } }, { 'a.txt': 'a', 'poison.txt': 'p' });
    const tmp = path.join(ws.dir, 'tmp');
    mkdirSync(tmp);
    const r = await runCli(['run', '-c', ws.configPath], { timeoutMs: 30_000, env: { TMPDIR: tmp } });
    expect(r.code, r.stderr).toBe(0);
    expect(r.lines.filter((l) => l.msg === 'item dead-lettered').map((l) => l.itemId)).toEqual(['poison.txt']);
    expect(r.lines.filter((l) => l.stream === 'stdout').map((l) => l.msg)).toContain('hi');
    expect(readdirSync(tmp)).toEqual([]);
  });
});
