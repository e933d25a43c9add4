import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, statusJson, workspace, type LogLine } from '../helpers/cli.js';
import { LIBFAKETIME, passRunAgain, spawnFastCli } from '../helpers/faketime.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';

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
    const { first, again } = await passRunAgain(daemon, 'failed');
    expect(existsSync(flag)).toBe(false);
    // The retry is the occurrence's own (not the next day's), 10 s (fake) after the failure.
    const failedAt = Date.parse(first.time as string);
    expect(Date.parse(again.time as string) - failedAt).toBeGreaterThanOrEqual(9_000);
    expect(daemon.lines.filter((l) => l.msg === 'run started')).toHaveLength(2);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 3, dead: 0 });
  }, 60_000);
});

describe.skipIf(LIBFAKETIME === undefined || PG_SKIP_REASON !== undefined)('cronsafe daemon on PostgreSQL, a failed pass whose retry cannot write the ledger', () => {
  const db = usePostgresDatabase('daemon_retry_read_only');

  it('tries the retry again at each tick, not in a loop, and runs it once the ledger takes writes again', async () => {
    // The retry's pass could not write the ledger (new sessions read-only: a failover onto a
    // standby, a full disk on the server) while the daemon's own reads worked. The retry stayed
    // due: the daemon ran it again at once, and again, passes back to back for the whole outage.
    const ws = workspace({ state: { postgres: db.url }, schedule: { cron: '0 0 * * *', timeZone: 'UTC' }, daemon: { tickSeconds: 5 } }, { 'a.txt': 'a' });
    const breaking = path.join(ws.dir, 'breaking');
    const go = path.join(ws.dir, 'go');
    const handler = path.join(ws.dir, 'handler.mjs');
    writeFileSync(
      handler,
      `import { existsSync, writeFileSync } from 'node:fs';
export default async function () {
  if (existsSync(${JSON.stringify(breaking)})) return;
  writeFileSync(${JSON.stringify(breaking)}, '');
  while (!existsSync(${JSON.stringify(go)})) await new Promise((r) => setTimeout(r, 20));
  setTimeout(() => { throw new Error('broke the process once'); }, 0);
  await new Promise(() => {});
}
`,
    );
    configure(ws, { handler: { module: handler } });
    const readOnly = (on: boolean) => db.server.admin(`ALTER DATABASE daemon_retry_read_only ${on ? 'SET default_transaction_read_only = on' : 'RESET default_transaction_read_only'}`);
    const daemon = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 12:00:30', { timeoutMs: 90_000 });
    const again = (l: LogLine) => l.msg === 'daemon: the pass of this occurrence failed; running it again';
    try {
      await daemon.waitFor((l) => l.msg === 'run started', 30_000);
      while (!existsSync(breaking)) await new Promise((r) => setTimeout(r, 20));
      await readOnly(true); // new sessions only: the pass under way keeps its connections
      writeFileSync(go, '');
      await daemon.waitFor((l) => l.msg === 'daemon: the state store is unavailable; trying again every tick', 30_000);
      await daemon.waitFor(() => daemon.lines.filter(again).length >= 4, 30_000);
      await readOnly(false);
      await daemon.waitFor((l) => l.msg === 'run finished' && l.outcome === 'completed', 30_000);
      await daemon.waitFor((l) => l.msg === 'daemon: the state store is available again', 30_000);
    } finally {
      daemon.child.kill('SIGTERM');
    }
    expect((await daemon.exited).code, daemon.stderr()).toBe(0);
    // Once per tick (5 s), as the outage's line says: never back to back.
    const at = daemon.lines.filter(again).map((l) => Date.parse(l.time as string));
    for (let i = 1; i < at.length; i++) expect(at[i]! - at[i - 1]!).toBeGreaterThanOrEqual(4_000);
    expect(daemon.lines.filter((l) => l.msg === 'daemon: the state store is unavailable; trying again every tick')).toHaveLength(1);
  }, 90_000);
});
