import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, workspace } from '../helpers/cli.js';
import { LIBFAKETIME, spawnFastCli } from '../helpers/faketime.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';

// A daemon stays up for years, so a database restart or failover longer than the ledger's
// retry budget (30 s) must be waited out, not end it (exit 1) with nobody to start it again.
// libfaketime (x60) makes the budget pass in half a real second; PostgreSQL keeps real time.

/** The daemon's outage lines in order: 'down' (unavailable) and 'back' (available again). */
const outageSaid = (daemon: ReturnType<typeof spawnFastCli>): string[] =>
  daemon.lines.filter((l) => l.msg === 'daemon: the state store is unavailable; trying again every tick' || l.msg === 'daemon: the state store is available again').map((l) => (l.msg.endsWith('again') ? 'back' : 'down'));

describe.skipIf(PG_SKIP_REASON !== undefined || LIBFAKETIME === undefined)('cronsafe daemon on PostgreSQL, database down between passes', () => {
  const db = usePostgresDatabase('daemon_outage');

  it('waits the outage out, says so once, and runs the next occurrence once the database is back', async () => {
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') },
        state: { postgres: db.url },
        schedule: { cron: '* * * * *', timeZone: 'UTC' },
        daemon: { tickSeconds: 5 },
      },
      { 'a.txt': 'a' },
    );
    const daemon = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 12:00:30', { timeoutMs: 90_000 });
    try {
      await daemon.waitFor((l) => l.msg === 'run finished' && l.outcome === 'completed', 30_000);
      const halted = daemon.lines.length;
      await db.server.halt();
      try {
        // Under the old code the daemon exited 1 here (the retry budget ran out).
        await daemon.waitFor((l) => l.msg === 'daemon: the state store is unavailable; trying again every tick' && daemon.lines.indexOf(l) >= halted, 30_000);
        // Fake minutes go by: occurrences come due while the database is down.
        await new Promise((r) => setTimeout(r, 3_000));
      } finally {
        await db.server.start();
      }
      await daemon.waitFor((l) => l.msg === 'daemon: the state store is available again', 30_000);
      const back = daemon.lines.length;
      // The next occurrence runs, and completes, once the database is back.
      await daemon.waitFor((l) => l.msg === 'run finished' && l.outcome === 'completed' && daemon.lines.indexOf(l) >= back, 30_000);
    } finally {
      daemon.child.kill('SIGTERM');
    }
    const { code } = await daemon.exited;
    expect(code, daemon.stderr()).toBe(0);
    // Said once for the outage, not at every tick (the old code said it, and "available
    // again", about 36 times here). A second time only after an "available again": the fast
    // shutdown can let one read through on a session it has not cut yet (seen once in CI).
    const said = outageSaid(daemon);
    const why = daemon.lines.map((l) => `${String(l.time)} ${l.msg} ${String(l.err ?? '')}`).join('\n');
    expect(said.filter((m) => m === 'down').length, why).toBeGreaterThanOrEqual(1);
    expect(said.filter((m) => m === 'down').length, why).toBeLessThanOrEqual(2);
    expect(said.join(' ').includes('down down'), why).toBe(false);
    // No pass ends for the outage itself: one that starts meets it at its start and is run
    // again (no run finished). One that is under way when the server goes (at x60 a pass every
    // real second) fails with it, and so may one whose connect outlasts its 10 s timeout,
    // which is 0.17 real s here at a load of 25: seen in both ways, so not asserted.
  }, 120_000);
});

describe.skipIf(PG_SKIP_REASON !== undefined || LIBFAKETIME === undefined)('cronsafe daemon on PostgreSQL, database down at its own read', () => {
  const db = usePostgresDatabase('daemon_read_outage');

  it("names what the daemon's own read could not do once, then the driver's reason", async () => {
    // No occurrence comes due: the outage meets the daemon's read of the last run, between passes.
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') }, state: { postgres: db.url }, schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' }, daemon: { tickSeconds: 1 } });
    const daemon = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 12:00:30', { timeoutMs: 90_000 });
    let outage;
    try {
      // The year's occurrence, at start (completed: no retry of it pending to meet the outage).
      await daemon.waitFor((l) => l.msg === 'run finished' && l.outcome === 'completed', 30_000);
      // Before it, the daemon may have said the store was unavailable already: at x60 the
      // driver's 10 s connect timeout is 0.17 real s, which a connect outlasts at a load of 25.
      const halted = daemon.lines.length;
      await db.server.halt();
      try {
        outage = await daemon.waitFor((l) => l.msg === 'daemon: the state store is unavailable; trying again every tick' && daemon.lines.indexOf(l) >= halted, 30_000);
      } finally {
        await db.server.start();
      }
    } finally {
      daemon.child.kill('SIGTERM');
    }
    expect((await daemon.exited).code, daemon.stderr()).toBe(0);
    expect(String(outage.err)).toMatch(/^state store unavailable \(postgres\): read the last run: [^:\s]/);
  }, 120_000);
});

describe.skipIf(PG_SKIP_REASON !== undefined || LIBFAKETIME === undefined)('cronsafe daemon on PostgreSQL, database down when it starts', () => {
  const db = usePostgresDatabase('daemon_start_outage');

  it('waits for the database (a host booting, the unit started before PostgreSQL), then runs the due occurrence', async () => {
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') },
        state: { postgres: db.url },
        // Daily: the stop below finds the daemon idle. Every minute (a real second here), the
        // next minute's pass could have started when the database came back near its start,
        // and the stop drained it (75).
        schedule: { cron: '0 12 * * *', timeZone: 'UTC' },
        daemon: { tickSeconds: 5 },
      },
      { 'a.txt': 'a', 'b.txt': 'b' },
    );
    await db.server.halt();
    let daemon;
    try {
      daemon = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 12:00:30', { timeoutMs: 90_000 });
      // Under the old code the daemon exited 1 here: its first open gave up on the refused connection.
      const outage = await daemon.waitFor((l) => l.msg === 'daemon: the state store is unavailable; trying again every tick', 30_000);
      expect(String(outage.err)).toMatch(/^state store unavailable \(postgres\): .*ECONNREFUSED/);
    } finally {
      await db.server.start();
    }
    try {
      await daemon.waitFor((l) => l.msg === 'daemon: the state store is available again', 30_000);
      const finished = await daemon.waitFor((l) => l.msg === 'run finished', 30_000);
      expect(finished.outcome).toBe('completed');
      expect(finished.counts).toMatchObject({ succeeded: 2, failed: 0 });
    } finally {
      daemon.child.kill('SIGTERM');
    }
    expect((await daemon.exited).code, daemon.stderr()).toBe(0);
    // Said once for the outage, not at every tick. Once more only after an "available again":
    // at x60 the driver's 10 s connect timeout is 0.17 real s, which a pass's connect outlasted
    // at a load of 25 once the server was back (that pass was run again and completed).
    const said = outageSaid(daemon);
    const why = daemon.lines.map((l) => `${String(l.time)} ${l.msg} ${String(l.err ?? '')}`).join('\n');
    expect(said[0], why).toBe('down');
    expect(said.join(' ').includes('down down'), why).toBe(false);
  }, 120_000);

  it('waits for a database reached by its Unix socket too (the socket file is not there until the server starts)', async () => {
    // A local PostgreSQL is usually reached by its socket (host=/var/run/postgresql). Until the
    // server starts its socket file does not exist: connect ENOENT, which the old code took for
    // a refusal and exited 1 at once, the very start it was to wait for.
    const url = `postgres://postgres@/daemon_start_outage?host=${encodeURIComponent(db.server.dir)}&port=${db.server.port}`;
    const ws = workspace(
      // Daily, as above (the stop finds the daemon idle), and a day later: the test above ran
      // 2026-06-01's occurrence in this database.
      { handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') }, state: { postgres: url }, schedule: { cron: '0 12 * * *', timeZone: 'UTC' }, daemon: { tickSeconds: 5 } },
      { 'a.txt': 'a' },
    );
    await db.server.halt();
    let daemon;
    try {
      daemon = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-02 12:00:30', { timeoutMs: 90_000 });
      const outage = await daemon.waitFor((l) => l.msg === 'daemon: the state store is unavailable; trying again every tick', 30_000);
      expect(String(outage.err)).toMatch(/ENOENT/);
    } finally {
      await db.server.start();
    }
    try {
      const finished = await daemon.waitFor((l) => l.msg === 'run finished', 30_000);
      expect(finished.outcome).toBe('completed');
    } finally {
      daemon.child.kill('SIGTERM');
    }
    expect((await daemon.exited).code, daemon.stderr()).toBe(0);
  }, 120_000);

  it('a database that refuses it once it is up (no such database) ends it then: exit 1, naming it, not a wait for ever', async () => {
    // Down at start, so the refusal comes only once the server is up. The old code took it
    // for the outage it had already logged (ECONNREFUSED) and waited for ever, saying nothing more.
    const url = db.url.replace(/\/[^/?]+(\?|$)/, '/no_such_database_yet$1');
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') }, state: { postgres: url }, schedule: { cron: '* * * * *', timeZone: 'UTC' }, daemon: { tickSeconds: 5 } });
    await db.server.halt();
    let daemon;
    try {
      daemon = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 12:00:30', { timeoutMs: 60_000 });
      await daemon.waitFor((l) => l.msg === 'daemon: the state store is unavailable; trying again every tick', 30_000);
    } finally {
      await db.server.start();
    }
    // A guard, not a wait: the old code never ended on its own (SIGTERM: exit 0).
    const guard = setTimeout(() => daemon.child.kill('SIGTERM'), 15_000);
    const { code } = await daemon.exited.finally(() => clearTimeout(guard));
    expect(code, daemon.stderr()).toBe(1);
    expect(daemon.stderr()).toMatch(/cronsafe: state store unavailable \(postgres\): .*"no_such_database_yet" does not exist/);
    expect(daemon.stderr()).not.toMatch(/\n\s+at /);
  }, 90_000);

  it('a database that answers with a refusal (no such database) still ends it at once: exit 1, one line naming it', async () => {
    const url = db.url.replace(/\/[^/?]+(\?|$)/, '/no_such_database$1');
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') }, state: { postgres: url }, schedule: { cron: '* * * * *', timeZone: 'UTC' } });
    const daemon = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 12:00:30', { timeoutMs: 60_000 });
    const { code } = await daemon.exited;
    expect(code).toBe(1);
    expect(daemon.stderr()).toMatch(/state store unavailable \(postgres\): .*no_such_database/);
    expect(daemon.stderr()).not.toMatch(/\n\s+at /);
  }, 90_000);
});
