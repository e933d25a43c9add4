/**
 * `cronsafe daemon` killed (OOM, a host reboot, `systemctl restart` past its timeout) or
 * stopped by a signal in the middle of an occurrence's pass, then started again (systemd's
 * Restart=): the restarted daemon must finish that pass, as the Job controller retries a
 * killed CronJob pod. Before, a run had "started since the occurrence", so the restarted
 * daemon idled until the next occurrence (a day, for a daily schedule), with the killed
 * pass's claims left in the ledger and the rest of the backlog waiting.
 */
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, FIXTURES, spawnCli, statusJson, workspace, type Workspace } from '../helpers/cli.js';
import { LIBFAKETIME, spawnFastCli } from '../helpers/faketime.js';
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

// A growth pass is no fire: it is never refused as stale, however long after the occurrence
// it starts. Stopped (`systemctl restart`) and resumed by the restarted daemon, it was judged
// as the occurrence's fire, hours late: `skipped: stale fire`, and the backlog it had found
// waited for the next occurrence (a day), the growth trigger seeing nothing new in it.
/**
 * A daemon workspace whose module handler marks `started` and then waits while `hold`
 * exists, for the items `waits` takes (all by default); growth passes on, no cooldown.
 */
function holdingWorkspace(graceSeconds: number, files: Record<string, string>, waitsFor?: string): { ws: Workspace; hold: string; started: string } {
  const ws = workspace(
    { concurrency: 1, schedule: { cron: '0 0 * * *', timeZone: 'UTC', graceSeconds }, daemon: { tickSeconds: 5, growth: { enabled: true, cooldownSeconds: 0 } } },
    files,
  );
  const hold = path.join(ws.dir, 'hold');
  const started = path.join(ws.dir, 'started');
  const handler = path.join(ws.dir, 'handler.mjs');
  writeFileSync(hold, '');
  writeFileSync(
    handler,
    `import { existsSync, writeFileSync } from 'node:fs';
export default async function (item) {
  if (${JSON.stringify(waitsFor ?? null)} !== null && item.id !== ${JSON.stringify(waitsFor ?? null)}) return;
  writeFileSync(${JSON.stringify(started)}, '');
  while (existsSync(${JSON.stringify(hold)})) await new Promise((r) => setTimeout(r, 20));
}
`,
  );
  configure(ws, { handler: { module: handler } });
  return { ws, hold, started };
}

/** SIGTERM the daemon once its growth pass has started a handler (exit 75), and let the handler go. */
async function stopDuringGrowthPass(daemon: ReturnType<typeof spawnFastCli>, started: string, hold: string): Promise<void> {
  await daemon.waitFor((l) => l.msg === 'daemon: the source has grown since the last completed pass; starting a pass', 30_000);
  await until(() => existsSync(started), 'the growth pass to start a handler', 30_000);
  daemon.child.kill('SIGTERM');
  expect((await daemon.exited).code, daemon.stderr()).toBe(75);
  rmSync(hold);
}

/** A daemon started at `at` finishes a pass: completed, never refused as a stale fire, exit 0 on SIGTERM. */
async function resumedAt(ws: Workspace, at: string): Promise<ReturnType<typeof spawnFastCli>> {
  const second = spawnFastCli(['daemon', '-c', ws.configPath], at);
  try {
    await second.waitFor((l) => l.msg === 'run finished', 30_000);
  } finally {
    second.child.kill('SIGTERM');
  }
  expect((await second.exited).code, second.stderr()).toBe(0);
  expect(second.lines.filter((l) => l.msg.startsWith('skipped: stale fire'))).toEqual([]);
  expect(second.lines.find((l) => l.msg === 'run finished')).toMatchObject({ outcome: 'completed' });
  return second;
}

describe.skipIf(LIBFAKETIME === undefined)('cronsafe daemon restarted in the middle of a growth pass, with graceSeconds', () => {
  it('resumes it as a growth pass, not refused as a stale fire, and finishes the backlog', async () => {
    const { ws, hold, started } = holdingWorkspace(300, { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' });
    // 12:00, twelve hours after the occurrence: its own fire is stale; the growth pass takes the files.
    const first = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 12:00:00');
    await stopDuringGrowthPass(first, started, hold);

    const second = await resumedAt(ws, '2026-06-01 13:00:00');
    expect(second.lines.find((l) => l.msg.startsWith('daemon: the last pass of this occurrence did not finish'))).toBeDefined();
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 3, dead: 0 });
  });
});

// The same, for a growth pass that started within graceSeconds of its occurrence (after that
// occurrence's own pass completed): the ledger's times cannot tell it from the fire, but the
// completed run of that occurrence before it can.
describe.skipIf(LIBFAKETIME === undefined)('cronsafe daemon restarted in the middle of a growth pass that started within graceSeconds', () => {
  it('resumes it as a growth pass when the occurrence\'s own pass had completed, not refused as a stale fire', async () => {
    // Only the late file waits: the occurrence's pass completes, the growth pass for d.txt hangs.
    const { ws, hold, started } = holdingWorkspace(3600, { 'a.txt': 'a', 'b.txt': 'b' }, 'd.txt');
    // 00:00:10: the occurrence is due and fresh; its pass completes a.txt and b.txt.
    const first = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 00:00:10');
    await first.waitFor((l) => l.msg === 'run finished' && l.outcome === 'completed', 30_000);
    writeFileSync(path.join(ws.source, 'd.txt'), 'd');
    await stopDuringGrowthPass(first, started, hold);

    // 02:00: past graceSeconds. Before: resumed as the occurrence's fire, `skipped: stale fire`,
    // and d.txt waited for the next day.
    await resumedAt(ws, '2026-06-01 02:00:00');
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 3, dead: 0 });
  });
});
