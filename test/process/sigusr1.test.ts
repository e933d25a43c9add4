/**
 * SIGUSR1 is Node's signal to start its inspector. With no listener of cronsafe's, a
 * SIGUSR1 sent to a run (a log-rotation script's `kill -USR1`, a sidecar's) or to the helper
 * that forks command handlers made that process listen on 127.0.0.1:9229 for a debugger,
 * with no authentication: any process that reaches the loopback (another user on the host,
 * every container of the pod) could run code as cronsafe. Both now ignore it; the run says so.
 */
import { existsSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { finished, spawnCli, statusJson, workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

/** What Node prints when SIGUSR1 started (or tried to start) its inspector. */
const INSPECTOR = /Debugger listening|Starting inspector/;

describe('SIGUSR1', () => {
  it('opens no debugger in the run or in its handler helper; the run goes on and completes (exit 0)', async () => {
    // The handler records its parent (the helper), says it started, and waits for the test.
    const script = 'echo "$PPID" > "$HOLD/helper.pid"; : > "$HOLD/held"; while [ ! -e "$HOLD/release" ]; do sleep 0.05; done; cat "$1" > "$2"';
    const ws = workspace({ handler: { command: ['sh', '-c', script, 'sh', '{path}', '{output}'] }, concurrency: 1 }, { 'a.txt': 'a', 'b.txt': 'b' });
    const hold = ws.dir;
    const run = spawnCli(['run', '-c', ws.configPath], { env: { HOLD: hold } });
    await until(() => existsSync(path.join(hold, 'held')), 'a handler to start');
    const helper = Number(readFileSync(path.join(hold, 'helper.pid'), 'utf8'));
    expect(helper).toBeGreaterThan(1);
    process.kill(helper, 'SIGUSR1');
    process.kill(run.child.pid!, 'SIGUSR1');
    // Ready: cronsafe has handled the signal, one way or the other.
    await until(() => /SIGUSR1 ignored/.test(run.stderr()) || INSPECTOR.test(run.stderr()), 'the run to handle SIGUSR1');
    await writeFile(path.join(hold, 'release'), '');
    const { code, signal } = await run.exited;
    expect(run.stderr()).not.toMatch(INSPECTOR);
    expect(run.stderr()).toMatch(/cronsafe: SIGUSR1 ignored/);
    expect(signal, run.stderr()).toBeNull();
    expect(code, run.stderr()).toBe(0);
    expect(finished({ lines: run.lines })?.outcome).toBe('completed');
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
  });
});
