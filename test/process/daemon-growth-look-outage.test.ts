import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, growthPassFinished, runCli, spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

// A look for new files (daemon.growth) whose ledger read failed (an outage, a table the role
// could not read for a while) was taken for a pass that failed: it counted toward
// growth.maxIncompletePasses, so three such looks stood the growth trigger down ("after
// passes that did not complete", though none had started) until a pass completed, the next
// occurrence's (a year away here): files that came meanwhile waited for it.

const STAND_DOWN = 'daemon: standing down the growth trigger after passes that did not complete; scheduled occurrences still run';

describe.skipIf(PG_SKIP_REASON !== undefined)('cronsafe daemon, a look for new files that could not read the ledger', () => {
  const db = usePostgresDatabase('growth_look');

  it('is no failed pass: the growth trigger does not stand down, and the first look that reads the ledger again starts a growth pass', async () => {
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') },
        state: { postgres: db.url, schema: 'qc' },
        // No occurrence comes due while the test runs: only growth passes.
        schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' },
        daemon: { tickSeconds: 0.2, growth: { enabled: true, cooldownSeconds: 0.5 } },
      },
      { 'a.txt': 'a' },
    );
    // The owner makes the ledger (and runs the latest occurrence); the daemon runs as a role with the documented grants.
    const first = await runCli(['run', '-c', ws.configPath], { timeoutMs: 30_000 });
    expect(first.code, first.stderr).toBe(0);
    await db.server.admin(
      'CREATE ROLE worker LOGIN; GRANT USAGE ON SCHEMA qc TO worker; GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA qc TO worker',
      [],
      'growth_look',
    );
    const rollbacks = async (): Promise<number> =>
      Number((await db.server.admin<{ n: string }>("SELECT xact_rollback AS n FROM pg_stat_database WHERE datname = 'growth_look'"))[0]!.n);
    const daemon = spawnCli(['daemon', '-c', ws.configPath], { env: { CRONSAFE_STATE_POSTGRES: db.url.replace('postgres@', 'worker@') }, timeoutMs: 90_000 });
    try {
      await daemon.waitFor((l) => l.msg === 'daemon started', 20_000);
      // The looks' read of the items fails (permission denied); the daemon's reads of the runs still work.
      const before = await rollbacks();
      await db.server.admin('REVOKE SELECT ON qc.items FROM worker', [], 'growth_look');
      await daemon.waitFor((l) => l.msg === 'daemon: the state store is unavailable; trying again every tick', 20_000);
      // More looks failed since (each is a statement rolled back) than maxIncompletePasses (3),
      // or the trigger stood down (after three: there were no more looks then).
      await until(async () => daemon.lines.some((l) => l.msg === STAND_DOWN) || (await rollbacks()) - before >= 6, 'six looks that failed', 30_000);
      expect(daemon.lines.filter((l) => l.msg === STAND_DOWN)).toEqual([]);
      await db.server.admin('GRANT SELECT ON qc.items TO worker', [], 'growth_look');
      writeFileSync(path.join(ws.source, 'b.txt'), 'b');
      const pass = await growthPassFinished(daemon);
      expect(pass).toMatchObject({ outcome: 'completed', counts: { succeeded: 1 } });
      expect(daemon.lines.filter((l) => l.msg === STAND_DOWN)).toEqual([]);
    } finally {
      daemon.child.kill('SIGTERM');
    }
    expect((await daemon.exited).code, daemon.stderr()).toBe(0);
  }, 120_000);
});
