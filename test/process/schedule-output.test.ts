/**
 * `cronsafe schedule` writes its report like every other report (commands/sink.ts): a reader
 * that left before it was written (`cronsafe schedule | head -1`, a pipe already closed) is a
 * cut output, exit 1 with one line saying so, never Node's unhandled EPIPE trace.
 */
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { CLI, workspace } from '../helpers/cli.js';

describe('cronsafe schedule into a reader that is gone', () => {
  it.each([[[]], [['--json']]])('%j: exit 1, "output incomplete", no unhandled error', async (flags: string[]) => {
    const ws = workspace({ handler: { command: ['true'] }, schedule: { cron: '*/5 * * * *', timeZone: 'Europe/London' } });
    // The read end of its stdout closed at once: cronsafe needs far longer than that to start
    // and write (every write after it is EPIPE).
    const cli = spawn(process.execPath, [CLI, 'schedule', ...flags, '-c', ws.configPath], { stdio: ['ignore', 'pipe', 'pipe'] });
    cli.stdout.destroy();
    let stderr = '';
    cli.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const hard = setTimeout(() => cli.kill('SIGKILL'), 60_000);
    const code = await new Promise<number | null>((resolve) => cli.on('exit', (c) => resolve(c)));
    clearTimeout(hard);
    expect(stderr).not.toMatch(/Unhandled 'error' event/);
    expect(stderr).toMatch(/output incomplete: stdout was closed before everything was written \(EPIPE\)/);
    expect(code).toBe(1);
  });
});
