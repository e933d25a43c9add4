/**
 * A handler whose children move to a process group of their own inside its session: coreutils
 * `timeout` called from a shell (`sh -c 'timeout 600 qc-tool "$1"'`: it calls setpgid), a
 * shell's job control (`set -m`), Go's `Setpgid`, Python's `process_group=0`. Only the
 * handler's group was signalled: on a timeout, a drain or cronsafe's death they ran on after
 * the attempt had failed or been handed back, beside its retry, writing outputs nobody commits.
 * They never left the handler's session (only setsid does), and the session is ended now.
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { configure, runCli, spawnCli, statusJson, workspace, type Workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

/** /proc/<pid>/stat's state, pgrp and session, or undefined once it is gone. */
function stat(pid: number): { state: string; pgrp: number; session: number } | undefined {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const [state, , pgrp, session] = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return { state: state!, pgrp: Number(pgrp), session: Number(session) };
  } catch {
    return undefined;
  }
}

/** Alive and not a zombie (a killed orphan may wait for PID 1 to reap it). */
const running = (pid: number): boolean => {
  const s = stat(pid);
  return s !== undefined && s.state !== 'Z';
};

const started: number[] = [];
afterEach(() => {
  // Before the fix they outlive the test: end them here, not in a later test's machine.
  for (const pid of started.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
});

/**
 * A handler that runs, through `timeout` (its own group), a child that ignores SIGTERM and
 * holds the handler's stdout; the child's pid is written to pids/<item>.
 */
function setUp(config: Record<string, unknown>): { ws: Workspace; pids: string } {
  const ws = workspace(config, { 'a.txt': 'a' });
  const pids = path.join(ws.dir, 'pids');
  mkdirSync(pids);
  const script = path.join(ws.dir, 'qc.sh');
  writeFileSync(
    script,
    `#!/bin/sh\ntimeout 600 sh -c 'trap "" TERM; echo $$ > "$0.tmp" && mv "$0.tmp" "$0"; exec sleep 600' "${pids}/$(basename "$1")"\n`,
    { mode: 0o755 },
  );
  configure(ws, { handler: { command: [script, '{path}'], killAfterSeconds: 1, ...(config.handler ?? {}) } });
  return { ws, pids };
}

/** The child's pid once written, checked to be in another group of the same session as its handler. */
async function childOf(pids: string): Promise<number> {
  await until(() => readdirSync(pids).includes('a.txt'), 'the handler to start its child');
  const pid = Number(readFileSync(path.join(pids, 'a.txt'), 'utf8'));
  started.push(pid);
  const s = stat(pid)!;
  expect(s.pgrp).not.toBe(s.session); // not the handler's group (the handler leads its session)
  return pid;
}

describe("a handler's child in a process group of its own, inside the handler's session", () => {
  it('is ended at the timeout with the handler: nothing runs on after the attempt failed', async () => {
    const { ws, pids } = setUp({ handler: { timeoutSeconds: 5 }, retry: { maxAttempts: 1 } });
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    const pid = await childOf(pids);
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(0);
    expect(run.lines.find((l) => l.msg === 'item dead-lettered')?.error).toContain('timed out');
    await until(() => !running(pid), 'the child to be ended with the timed-out handler', 10_000);
  }, 90_000);

  it('is ended by a drain: the claim is handed back with nothing left running', async () => {
    // The drain's deadline comes 1 s after the stop; the margin after it (the kill, the wait
    // for the child that ignores SIGTERM, the hand-back) is 6 s: with 2, the last resort (a
    // third of a second before the grace period) came first at a load of 25, and the claim
    // was left to its lease, as the last resort is meant to leave it.
    const { ws, pids } = setUp({ drain: { gracePeriodSeconds: 7, marginSeconds: 6 } });
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    const pid = await childOf(pids);
    run.child.kill('SIGTERM');
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(75);
    await until(() => !running(pid), 'the child to be ended by the drain', 10_000);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 1, claimed: 0 });
  }, 90_000);

  it('is ended when cronsafe is killed alone (kill -9): its helper ends the whole session', async () => {
    const { ws, pids } = setUp({});
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    const pid = await childOf(pids);
    process.kill(run.child.pid!, 'SIGKILL');
    await run.exited;
    await until(() => !running(pid), 'the child to be ended with cronsafe', 10_000);
    const next = await runCli(['status', '-c', ws.configPath, '--json']);
    expect(next.code, next.stderr).toBe(0);
  }, 90_000);
});
