import { existsSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, statusJson, workspace } from '../helpers/cli.js';
import { LIBFAKETIME, spawnFastCli, stopFastDaemon } from '../helpers/faketime.js';

// cronsafe's temp directory in output.directory (.cronsafe-tmp) replaced by a link while the
// daemon idled (a flipper on it in round 35; in life a restore or an `ln -s` by hand): the next
// pass's start refused it, rightly (a link there would have cronsafe empty its target), but the
// refusal (UnsafeOwnDirectory) ended the daemon, exit 1, where output.directory itself replaced
// by a file fails the pass and the daemon goes on. It is the environment's fault as that is.

describe.skipIf(LIBFAKETIME === undefined)('cronsafe daemon, its temp directory replaced by a link while idle', () => {
  it('fails that pass in one line and carries on once the link is gone', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'handlers/module-ok.mjs') }, schedule: { cron: '* * * * *', timeZone: 'UTC' } }, { 'a.txt': 'a' });
    const temp = path.join(ws.out, '.cronsafe-tmp');
    const daemon = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 12:00:30', { timeoutMs: 90_000 });
    try {
      const first = await daemon.waitFor((l) => l.msg === 'run finished', 30_000);
      expect(first.outcome).toBe('completed');
      expect(existsSync(temp)).toBe(true);
      rmSync(temp, { recursive: true });
      symlinkSync(temp, temp);
      const refused = (l: { msg: string; outcome?: unknown; err?: unknown }): boolean =>
        l.msg === 'run finished' && l.outcome === 'failed' && ((l.err as { message?: string } | undefined)?.message ?? '').startsWith(`cronsafe's own directory ${temp} is a symbolic link`);
      const failed = await daemon.waitFor(refused, 30_000);
      expect(failed).toMatchObject({ exitCode: 1 });
      // Before: the daemon exited here (1).
      writeFileSync(path.join(ws.source, 'b.txt'), 'b');
      rmSync(temp);
      await daemon.waitFor((l) => l.msg === 'run finished' && l.outcome === 'completed' && daemon.lines.indexOf(l) > daemon.lines.indexOf(failed), 30_000);
    } catch (err) {
      daemon.child.kill('SIGTERM');
      throw err;
    }
    await stopFastDaemon(daemon);
    expect(daemon.stderr()).toContain(`cronsafe: run failed: cronsafe's own directory ${temp} is a symbolic link`);
    expect(daemon.stderr()).not.toContain('fatal');
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
  }, 60_000);
});
