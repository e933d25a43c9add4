/**
 * The runner paused past handler.timeoutSeconds (SIGSTOP, a frozen event loop) while its
 * command handler, which runs on in its own process group, exits in time: on resume the
 * timeout timer fires before the helper's report of that exit (it waits in the channel) is
 * read. The attempt succeeded, and must not be charged as "timed out" (nor, at
 * retry.maxAttempts, dead-lettered) with its finished output thrown away.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, finished, spawnCli, statusJson, workspace } from '../helpers/cli.js';
import { alive, filesIn, until } from '../helpers/wait.js';

describe('the runner paused past the handler timeout', () => {
  it('a handler that exited in time while the runner was stopped is done, not timed out', async () => {
    const ws = workspace({ concurrency: 1, retry: { maxAttempts: 1 }, log: { level: 'info' } }, { 'a.txt': 'payload\n' });
    const markers = path.join(ws.dir, 'markers');
    const script = path.join(ws.dir, 'gated-copy.sh');
    // Announces itself, waits for the gate, copies, exits.
    writeFileSync(script, '#!/bin/sh\necho $$ > "$MARKER_DIR/started"\nwhile [ ! -e "$MARKER_DIR/gate" ]; do sleep 0.02; done\ncat "$1" > "$2"\n', { mode: 0o755 });
    mkdirSync(markers);
    configure(ws, { handler: { command: [script, '{path}', '{output}'], timeoutSeconds: 1 } });
    const run = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers }, timeoutMs: 30_000 });
    try {
      await until(() => filesIn(markers).includes('started') && readFileSync(path.join(markers, 'started'), 'utf8').trim() !== '', 'the handler to start');
      const startedAt = Date.now();
      const pid = Number(readFileSync(path.join(markers, 'started'), 'utf8').trim());
      run.child.kill('SIGSTOP');
      writeFileSync(path.join(markers, 'gate'), '');
      await until(() => !alive(pid), 'the handler to exit (at once: its copy is all that is left)');
      // The runner stays stopped past the 1 s timeout: the point of the test.
      await until(() => Date.now() - startedAt > 1500, 'the timeout to pass while the runner is stopped');
    } finally {
      run.child.kill('SIGCONT');
    }
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(0);
    expect(finished(run)).toMatchObject({ outcome: 'completed', counts: { succeeded: 1, failed: 0, deadLettered: 0 } });
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
    expect(readFileSync(path.join(ws.out, 'a.txt.out'), 'utf8')).toBe('payload\n');
  }, 30_000);
});
