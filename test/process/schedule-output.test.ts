/**
 * `cronsafe schedule` writes its report like every other report (commands/sink.ts): a reader
 * that left before it was written (`cronsafe schedule | head -1`, a pipe already closed) is a
 * cut output, exit 1 with one line saying so, never Node's unhandled EPIPE trace.
 */
import { describe, expect, it } from 'vitest';
import { intoClosedPipe, workspace } from '../helpers/cli.js';

describe('cronsafe schedule into a reader that is gone', () => {
  it.each([[[]], [['--json']]])('%j: exit 1, "output incomplete", no unhandled error', async (flags: string[]) => {
    const ws = workspace({ handler: { command: ['true'] }, schedule: { cron: '*/5 * * * *', timeZone: 'Europe/London' } });
    const { code, stderr } = await intoClosedPipe(['schedule', ...flags, '-c', ws.configPath]);
    expect(stderr).not.toMatch(/Unhandled 'error' event/);
    expect(stderr).toMatch(/output incomplete: stdout was closed before everything was written \(EPIPE\)/);
    expect(code).toBe(1);
  });
});
