/**
 * A handler that exited but left a process in its group that ignores SIGTERM: cronsafe ends
 * it (SIGTERM, then SIGKILL after handler.killAfterSeconds) before the attempt settles. When a
 * drain's deadline came meanwhile, the SIGKILL still waited for killAfterSeconds, past the
 * time the drain gives aborted handlers: the run gave up on the attempt and handed it back,
 * the handler's success and output thrown away (exit 75, the item run again), or, with a short
 * drain.marginSeconds, was ended by the drain's last resort with its claim left behind. The
 * SIGKILL now comes within the drain's budget, and the attempt counts as its exit status says.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, finished, spawnCli, statusJson, workspace } from '../helpers/cli.js';
import { alive, until } from '../helpers/wait.js';

/** Gone, or a zombie waiting for PID 1 to reap it. */
const ended = (pid: number): boolean => {
  if (!alive(pid)) return true;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
};

describe('a drain while cronsafe ends what an exited handler left in its group', () => {
  it('the leftover is killed within the drain budget, and the handler success is committed', async () => {
    const ws = workspace({}, { 'a.txt': 'a' });
    const pidFile = path.join(ws.dir, 'leftover.pid');
    const script = path.join(ws.dir, 'leaves.sh');
    // Writes its output, exits 0, and leaves behind a child that ignores SIGTERM.
    writeFileSync(script, `#!/bin/sh\necho done > "$1"\n(trap '' TERM; exec sleep 60) >/dev/null 2>&1 &\necho $! > "${pidFile}"\n`, { mode: 0o755 });
    configure(ws, { handler: { command: [script, '{output}'], killAfterSeconds: 20 }, drain: { gracePeriodSeconds: 6, marginSeconds: 3 } });
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 30_000 });
    await run.waitFor((l) => l.msg.startsWith('handler exited but left processes in its group'));
    const leftover = Number(readFileSync(pidFile, 'utf8'));
    run.child.kill('SIGTERM');
    const { code, signal } = await run.exited;
    expect(signal).toBeNull();
    // Before: exit 75, "some handlers did not stop in time", the item pending again and its
    // output discarded; with a shorter margin the drain's last resort ("drain did not end").
    expect(run.stderr()).not.toContain('drain did not end');
    expect(run.lines.some((l) => l.msg.startsWith('drain: some handlers did not stop in time'))).toBe(false);
    expect(code, run.stderr()).toBe(0);
    expect(finished({ lines: run.lines })?.counts).toMatchObject({ succeeded: 1, released: 0 });
    expect(readFileSync(path.join(ws.out, 'a.txt.out'), 'utf8')).toBe('done\n');
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
    await until(() => ended(leftover), 'the leftover to be gone', 5_000);
  }, 60_000);

  it('so are its pipes, held by a process that left its group (setsid), given up on within the budget', async () => {
    const ws = workspace({}, { 'a.txt': 'a' });
    const pids = path.join(ws.dir, 'pids');
    const script = path.join(ws.dir, 'holds.sh');
    // Writes its output and exits 0; a process in a session of its own keeps its stdout open.
    writeFileSync(script, `#!/bin/sh\necho done > "$1"\nsetsid sh -c 'echo $$ >> "${pids}"; exec sleep 60' &\necho $$ >> "${pids}"\n`, { mode: 0o755 });
    configure(ws, { handler: { command: [script, '{output}'], killAfterSeconds: 20 }, drain: { gracePeriodSeconds: 6, marginSeconds: 3 } });
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 30_000 });
    const both = (): number[] => (existsSync(pids) ? readFileSync(pids, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number) : []);
    await until(() => both().length === 2, 'the handler and the holder to start');
    const [a, b] = both() as [number, number];
    // The handler has exited (its parent reaps it at once) while the holder keeps its pipes.
    await until(() => ended(a) || ended(b), 'the handler to exit');
    const holder = ended(a) ? b : a;
    try {
      run.child.kill('SIGTERM');
      const { code } = await run.exited;
      expect(run.lines.some((l) => l.msg.startsWith('drain: some handlers did not stop in time'))).toBe(false);
      expect(code, run.stderr()).toBe(0);
      expect(readFileSync(path.join(ws.out, 'a.txt.out'), 'utf8')).toBe('done\n');
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
    } finally {
      // It left the group on purpose: cronsafe does not end it (documented), the test does.
      process.kill(holder, 'SIGKILL');
    }
  }, 60_000);
});
