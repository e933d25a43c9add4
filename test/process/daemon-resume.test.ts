/**
 * `cronsafe daemon` killed (OOM, a host reboot, `systemctl restart` past its timeout) or
 * stopped by a signal in the middle of an occurrence's pass, then started again (systemd's
 * Restart=): the restarted daemon must finish that pass, as the Job controller retries a
 * killed CronJob pod. Before, a run had "started since the occurrence", so the restarted
 * daemon idled until the next occurrence (a day, for a daily schedule), with the killed
 * pass's claims left in the ledger and the rest of the backlog waiting.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, FIXTURES, spawnCli, statusJson, workspace } from '../helpers/cli.js';
import { invocations, killTree } from '../helpers/proc.js';
import { until } from '../helpers/wait.js';

const LOGGED_COPY = path.join(FIXTURES, 'process/logged-copy.sh');

describe('cronsafe daemon restarted in the middle of a pass', () => {
  it.each([['SIGKILL of the whole tree'], ['SIGTERM (a drain, exit 75)']])('%s: the restarted daemon finishes the occurrence at once', async (how) => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 40; i++) files[`item-${String(i).padStart(2, '0')}`] = `payload ${i}\n`;
    // A yearly occurrence long past (no graceSeconds: never stale): the next one is months away.
    const ws = workspace({ concurrency: 2, schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' }, daemon: { tickSeconds: 1 } }, files);
    const log = path.join(ws.dir, 'invocations.log');
    configure(ws, { handler: { command: ['/bin/sh', LOGGED_COPY, '{path}', '{output}'], env: { INVOCATIONS: log, DELAY: '0.2' } } });

    const first = spawnCli(['daemon', '-c', ws.configPath], { timeoutMs: 60_000 });
    await until(() => [...invocations(log).values()].reduce((a, b) => a + b, 0) >= 4, 'the first pass to start a few handlers', 30_000);
    if (how.startsWith('SIGKILL')) {
      killTree(first.child.pid!);
      await first.exited;
    } else {
      first.child.kill('SIGTERM');
      expect((await first.exited).code).toBe(75);
    }
    const left = (await statusJson(ws.configPath)).items;
    expect(left.done).toBeLessThan(40);

    const second = spawnCli(['daemon', '-c', ws.configPath], { timeoutMs: 60_000 });
    try {
      await second.waitFor((l) => l.msg === 'run finished', 30_000);
      expect(second.lines.find((l) => l.msg === 'run finished')).toMatchObject({ outcome: 'completed' });
    } finally {
      second.child.kill('SIGTERM');
    }
    expect((await second.exited).code).toBe(0);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 40, dead: 0 });
  });
});
