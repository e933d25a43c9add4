import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, statusJson, workspace } from '../helpers/cli.js';
import { LIBFAKETIME, spawnFastCli } from '../helpers/faketime.js';

// A pass that fails (exit 1) is run again for its occurrence, as the Job controller runs a
// failed CronJob pod again: before, a daily job whose fire met a passing fault waited a day.
// The handler breaks the process once (an exception thrown from a timer: the run fails),
// then works. libfaketime (x60) makes the 10 s backoff pass in a sixth of a real second.

describe.skipIf(LIBFAKETIME === undefined)('cronsafe daemon, a pass that failed', () => {
  it('is run again for its occurrence after 10 s, and that pass finishes the backlog', async () => {
    const ws = workspace({ schedule: { cron: '0 0 * * *', timeZone: 'UTC' } }, { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' });
    const flag = path.join(ws.dir, 'break-once');
    const handler = path.join(ws.dir, 'handler.mjs');
    writeFileSync(flag, '');
    writeFileSync(
      handler,
      `import { existsSync, rmSync } from 'node:fs';
export default async function () {
  if (!existsSync(${JSON.stringify(flag)})) return;
  rmSync(${JSON.stringify(flag)});
  setTimeout(() => { throw new Error('broke the process once'); }, 0);
  await new Promise(() => {});
}
`,
    );
    configure(ws, { handler: { module: handler } });
    const daemon = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 12:00:30', { timeoutMs: 90_000 });
    let again;
    try {
      const first = await daemon.waitFor((l) => l.msg === 'run finished', 30_000);
      expect(first.outcome).toBe('failed');
      again = await daemon.waitFor((l) => l.msg === 'daemon: the pass of this occurrence failed; running it again', 30_000);
      const second = await daemon.waitFor((l) => l.msg === 'run finished' && l !== first, 30_000);
      expect(second.outcome).toBe('completed');
    } finally {
      daemon.child.kill('SIGTERM');
    }
    expect((await daemon.exited).code, daemon.stderr()).toBe(0);
    expect(existsSync(flag)).toBe(false);
    expect(again).toMatchObject({ occurrence: '2026-06-01T00:00:00.000Z', failures: 1 });
    // The retry is the occurrence's own (not the next day's), 10 s (fake) after the failure.
    const failedAt = Date.parse(daemon.lines.find((l) => l.msg === 'run finished')!.time as string);
    expect(Date.parse(again.time as string) - failedAt).toBeGreaterThanOrEqual(9_000);
    expect(daemon.lines.filter((l) => l.msg === 'run started')).toHaveLength(2);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 3, dead: 0 });
  }, 60_000);
});
