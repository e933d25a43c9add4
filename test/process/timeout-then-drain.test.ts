/**
 * An attempt that timed out and does not stop gets killAfterSeconds (a command handler's
 * group: SIGTERM, then SIGKILL; a module handler: its signal, then it is abandoned) before it
 * fails, charged. A drain that aborted it meanwhile (a SIGTERM's deadline) made it a hand-back,
 * uncharged, though it had timed out, the item's own doing; and a module handler's attempt
 * went on waiting out killAfterSeconds past the drain's budget, until the drain gave up on it.
 * Both are now charged as timed out, within the drain's budget.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, finished, runCli, spawnCli, statusJson, workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

describe('an attempt that timed out, then a drain', () => {
  it('module handler: is charged as timed out (here dead: maxAttempts 1), not handed back uncharged; nothing left, so exit 0', async () => {
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'process/timeout-ignores-module.mjs'), timeoutSeconds: 1, killAfterSeconds: 60 },
        concurrency: 1,
        retry: { maxAttempts: 1 },
        drain: { gracePeriodSeconds: 4, marginSeconds: 2 },
        log: { level: 'info' },
      },
      { 'hang.txt': 'h' },
    );
    const run = spawnCli(['run', '-c', ws.configPath], { env: { HANG_ID: 'hang.txt', HANG_DIR: ws.dir } });
    // Ready: its attempt has timed out (its signal aborted) and waits out killAfterSeconds.
    await until(() => existsSync(path.join(ws.dir, 'aborted')), 'the attempt to time out');
    run.child.kill('SIGTERM');
    const { code, signal } = await run.exited;
    expect(signal, run.stderr()).toBeNull();
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 0, dead: 1 });
    // Its drain left nothing to do: the pass is over (before, the claim handed back made it 75).
    expect(finished({ lines: run.lines })?.outcome, run.stderr()).toBe('completed');
    expect(code, run.stderr()).toBe(0);
    const dead = JSON.parse((await runCli(['dead-letter', 'list', '--json', '-c', ws.configPath])).stdout) as Array<{ id: string; lastError: string }>;
    expect(dead).toMatchObject([{ id: 'hang.txt', lastError: 'timed out after 1s' }]);
  });

  it('command handler: is charged as timed out (here dead: maxAttempts 1), not handed back uncharged; nothing left, so exit 0', async () => {
    // Ignores SIGTERM (its sleep dies of it, the shell notes it and goes on): only SIGKILL ends it.
    const script = 'trap \': > "$HANG_DIR/aborted"\' TERM; while :; do sleep 0.05; done';
    const ws = workspace(
      {
        handler: { command: ['sh', '-c', script], timeoutSeconds: 1, killAfterSeconds: 60 },
        concurrency: 1,
        retry: { maxAttempts: 1 },
        drain: { gracePeriodSeconds: 4, marginSeconds: 2 },
        log: { level: 'info' },
      },
      { 'hang.txt': 'h' },
    );
    const run = spawnCli(['run', '-c', ws.configPath], { env: { HANG_DIR: ws.dir } });
    // Ready: its attempt has timed out (its group got SIGTERM) and waits out killAfterSeconds.
    await until(() => existsSync(path.join(ws.dir, 'aborted')), 'the attempt to time out');
    run.child.kill('SIGTERM');
    const { code, signal } = await run.exited;
    expect(signal, run.stderr()).toBeNull();
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 0, dead: 1 });
    expect(finished({ lines: run.lines })?.outcome, run.stderr()).toBe('completed');
    expect(code, run.stderr()).toBe(0);
    const dead = JSON.parse((await runCli(['dead-letter', 'list', '--json', '-c', ws.configPath])).stdout) as Array<{ id: string; lastError: string }>;
    expect(dead).toMatchObject([{ id: 'hang.txt', lastError: 'timed out after 1s' }]);
  });
});
