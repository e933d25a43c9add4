/**
 * A time flag given with an empty value (`--at "$WHEN"` with WHEN unset in a script) is a
 * usage error (exit 2) like any other bad value, never read as "not given": that answered
 * for now (schedule) or for the latest occurrence (run, plan) with exit 0. An empty
 * CRONSAFE_SCHEDULED_TIME still means unset, as an empty variable does in the shell.
 */
import { describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';

describe('empty time flags', () => {
  const ws = () => workspace({ handler: { command: ['true'] }, schedule: { cron: '*/5 * * * *', timeZone: 'Europe/London' } }, { 'a.txt': 'a' });

  it.each([
    [['schedule', '--at', ''], '--at'],
    [['schedule', '--json', '--at', ''], '--at'],
    [['run', '--scheduled-time', ''], '--scheduled-time'],
    [['plan', '--scheduled-time', ''], '--scheduled-time'],
    [['run', '--dry-run', '--scheduled-time', ''], '--scheduled-time'],
  ])('%j: exit 2 naming the flag, nothing run', async (args: string[], flag: string) => {
    const w = ws();
    const r = await runCli([...args, '-c', w.configPath]);
    expect(r.code, r.stdout + r.stderr).toBe(2);
    expect(r.stderr).toContain(`${flag}: expected an RFC 3339 time`);
    expect(r.lines.some((l) => l.msg === 'run started')).toBe(false);
  });

  it('an empty CRONSAFE_SCHEDULED_TIME is unset: the run takes the latest occurrence', async () => {
    const w = ws();
    const r = await runCli(['run', '-c', w.configPath], { env: { CRONSAFE_SCHEDULED_TIME: '' } });
    expect(r.code, r.stderr).toBe(0);
    expect(r.lines.find((l) => l.msg === 'run started')?.fire).toMatchObject({ source: 'latest-occurrence' });
  });
});
