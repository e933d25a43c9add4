import { existsSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { CLI, FIXTURES, finished, runCli, spawnCliRaw, statusJson, workspace } from '../helpers/cli.js';
import { LIBFAKETIME, spawnFastCli, stopFastDaemon } from '../helpers/faketime.js';

// libfaketime (Debian's faketime) runs the real CLI on an accelerated clock (x60: a minute a
// second), so that once-per-occurrence firing and overruns are seen on real processes in
// seconds. Preloaded directly (not via the faketime wrapper, which forks) so that signals
// reach node itself.
const hasFaketime = LIBFAKETIME !== undefined;
const fast = (start: string, args: string[], env: Record<string, string> = {}) => spawnFastCli(args, start, { env });

/** `YYYY-MM-DD hh:mm:ss` (UTC) of `at`, as libfaketime takes it. */
const fakeClock = (at: Date): string => at.toISOString().slice(0, 19).replace('T', ' ');

/**
 * runCli on a clock that starts at `start` (UTC, `YYYY-MM-DD hh:mm:ss`) and runs at the real
 * rate (libfaketime); on the real clock where libfaketime is not installed.
 */
async function runCliAt(start: string, args: string[]) {
  if (!hasFaketime) return runCli(args);
  const r = spawnFastCli(args, start, { rate: 1 });
  const { code } = await r.exited;
  return { code, lines: r.lines, stderr: r.stderr() };
}

async function ledgerOf(db: string) {
  return openSqliteLedger(db);
}

describe.skipIf(!hasFaketime)('cronsafe daemon (real process, accelerated clock)', () => {
  it('fires once per occurrence however many ticks see it', async () => {
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') },
        schedule: { cron: '* * * * *', timeZone: 'UTC', refresh: 'every-occurrence' },
        daemon: { tickSeconds: 5 }, // ~12 ticks per occurrence
      },
      { 'a.txt': 'a', 'b.txt': 'b' },
    );
    const daemon = fast('2026-06-01 12:00:30', ['daemon', '-c', ws.configPath]);
    // Three passes, one after the first having run an item again (every-occurrence, below).
    let finishedRuns = 0;
    let redone = false;
    await daemon.waitFor((l) => {
      if (l.msg !== 'run finished') return false;
      if (++finishedRuns > 1 && l.outcome === 'completed' && (l.counts as { succeeded: number }).succeeded > 0) redone = true;
      return finishedRuns >= 3 && redone;
    }, 30_000);
    // Between passes 0; a pass the stop landed in is drained (75): at x60 one starts every second.
    await stopFastDaemon(daemon);

    const due = daemon.lines.filter((l) => l.msg === 'daemon: occurrence due; starting a pass').map((l) => String(l.occurrence));
    expect(new Set(due).size).toBe(due.length); // never the same occurrence twice
    for (const o of due) expect(o).toMatch(/T12:\d\d:00\.000Z$/);
    const sorted = [...due].sort();
    expect(due).toEqual(sorted);
    const runs = daemon.lines.filter((l) => l.msg === 'run started');
    expect(runs.length).toBe(due.length);
    // Each line names the job once (the daemon's logger binds it; a pass's must not again).
    const started = daemon.stdout().split('\n').filter((l) => l.includes('"msg":"run started"'));
    expect(started.length).toBe(runs.length);
    for (const l of started) expect(l.match(/"job":/g), l).toHaveLength(1);
    // every-occurrence: a pass re-does an item done before its occurrence, not one the pass
    // before it finished after (at x60 a loaded machine's 1 s is a fake minute, and the two
    // items may finish either side of it). By the `item done` lines: an item done over 3 fake
    // seconds (50 real ms) before the occurrence is re-done, one done later than 3 s after is
    // not; one within 3 s of it may go either way (the ledger's time is not the line's).
    const SLACK_MS = 3000;
    const doneAt = new Map<string, number>();
    const expected = new Map<string, { min: number; max: number }>();
    for (const l of daemon.lines) {
      if (l.msg === 'item done') doneAt.set(String(l.itemId), Date.parse(String(l.time)));
      if (l.msg !== 'run started') continue;
      const occurrence = Date.parse((l.fire as { occurrence: string }).occurrence);
      const range = { min: 0, max: 0 };
      for (const id of ['a.txt', 'b.txt']) {
        const t = doneAt.get(id);
        if (t === undefined || t < occurrence - SLACK_MS) range.min++;
        if (t === undefined || t < occurrence + SLACK_MS) range.max++;
      }
      expected.set(String(l.runId), range);
    }
    const completed = daemon.lines.filter((l) => l.msg === 'run finished' && l.outcome === 'completed');
    expect((completed[0]?.counts as { succeeded: number }).succeeded).toBe(2);
    for (const r of completed) {
      const n = (r.counts as { succeeded: number }).succeeded;
      const range = expected.get(String(r.runId));
      expect(range, String(r.runId)).toBeDefined();
      expect(n, `${String(r.runId)}: ${JSON.stringify(range)}`).toBeGreaterThanOrEqual(range!.min);
      expect(n, `${String(r.runId)}: ${JSON.stringify(range)}`).toBeLessThanOrEqual(range!.max);
    }
  });

  it('a growth pass later than graceSeconds after the occurrence runs: it is not a fire, so it is never stale', async () => {
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') },
        schedule: { cron: '0 * * * *', timeZone: 'UTC', graceSeconds: 900 },
        daemon: { growth: { enabled: true, cooldownSeconds: 960 } },
      },
      { 'a.txt': 'a' },
    );
    // 12:00 is half a minute old, within its 15 min of grace: its pass runs. The growth pass
    // comes a cooldown (16 min) after that pass, past 12:15, when a fire for 12:00 would be
    // stale. The grace is the start-up's time, at x60 15 s: a loaded machine (six of these
    // on two cores) took 6 s to start the daemon, and the 5 s it had made 12:00's pass stale.
    const daemon = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 12:00:30', { timeoutMs: 110_000 });
    const first = await daemon.waitFor((l) => l.msg === 'run finished', 45_000);
    expect(first.outcome, daemon.stderr()).toBe('completed');
    writeFileSync(path.join(ws.source, 'b.txt'), 'b');
    let growthAt = '';
    await daemon.waitFor((l) => {
      if (l.msg === 'daemon: the source has grown since the last completed pass; starting a pass') growthAt = String(l.time);
      return growthAt !== '' && l.msg === 'run finished';
    }, 45_000);
    daemon.child.kill('SIGTERM');
    expect((await daemon.exited).code, daemon.stderr()).toBe(0);
    expect(Date.parse(growthAt)).toBeGreaterThan(Date.parse('2026-06-01T12:15:00Z'));
    expect(daemon.lines.filter((l) => String(l.msg).startsWith('skipped: stale fire')).map((l) => [l.time, l.occurrence])).toEqual([]);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
  }, 120_000);

  it('growth: a new file triggers a pass even when done files were moved out of the source (fewer files than the ledger knows)', async () => {
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') },
        schedule: { cron: '0 * * * *', timeZone: 'UTC' },
        daemon: { growth: { enabled: true } },
      },
      { 'a.txt': 'a', 'b.txt': 'b' },
    );
    const daemon = fast('2026-06-01 12:05:00', ['daemon', '-c', ws.configPath]);
    await daemon.waitFor((l) => l.msg === 'run finished', 30_000);
    // The inbox pattern: processed files leave the source, a new one arrives.
    rmSync(path.join(ws.source, 'a.txt'));
    rmSync(path.join(ws.source, 'b.txt'));
    writeFileSync(path.join(ws.source, 'c.txt'), 'c');
    let grew = false;
    await daemon.waitFor((l) => (grew ||= l.msg === 'daemon: the source has grown since the last completed pass; starting a pass') && l.msg === 'run finished', 30_000);
    daemon.child.kill('SIGTERM');
    expect((await daemon.exited).code, daemon.stderr()).toBe(0);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 0, claimed: 0, done: 3, dead: 0 });
  });

  it('drains the active pass on SIGTERM and exits 75', async () => {
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'process/wait-module.mjs') },
        schedule: { cron: '* * * * *', timeZone: 'UTC' },
        concurrency: 2,
        // Fake seconds, 60 to a real one: the handlers are aborted 60 s after the stop (1 real
        // s), and the hand-back has the margin's 9 real s. A margin of 10 was a sixth of a real
        // second: at a load of 30 the drain's last resort exited 75 before the two claims were
        // handed back (what a SIGKILL would leave; the next run hands them back uncharged).
        drain: { gracePeriodSeconds: 600, marginSeconds: 540 },
      },
      { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' },
    );
    const daemon = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 12:00:30', { timeoutMs: 110_000 });
    let started = 0;
    await daemon.waitFor((l) => l.msg === 'handler started' && ++started >= 2, 60_000);
    daemon.child.kill('SIGTERM');
    const { code } = await daemon.exited;
    expect(code, daemon.stderr()).toBe(75);
    expect(daemon.lines.some((l) => String(l.msg).startsWith('drain: stopped claiming'))).toBe(true);
    expect((await statusJson(ws.configPath)).items, daemon.stderr()).toEqual({ pending: 3, claimed: 0, done: 0, dead: 0 });
  }, 120_000);

  it('a clock that was ahead and is set back runs the occurrences it had skipped, and not again the one it ran early', async ({ onTestFinished }) => {
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') },
        schedule: { cron: '* * * * *', timeZone: 'UTC' },
        daemon: { tickSeconds: 1 },
      },
      { 'a.txt': 'a' },
    );
    // Only the wall clock is stepped, as NTP does (node asserts that its monotonic clock never
    // goes back); a tick is 1 s on the monotonic clock. The wall clock stands still at each
    // step until that minute's pass has finished, so a start-up or a pass slowed by a loaded
    // machine cannot carry it into the next minute; only the last step runs (20x: 12:06 is
    // 2.9 s away), so that ticks see 12:05 the latest occurrence again.
    // libfaketime re-reads the file at each call: rewritten, the clock restarts from the new time.
    const clock = path.join(ws.dir, 'faketime');
    writeFileSync(clock, '2026-06-01 12:05:02\n'); // ahead (an RTC read as UTC east of Greenwich)
    const daemon = spawnCliRaw(process.execPath, [CLI, 'daemon', '-c', ws.configPath], {
      env: { LD_PRELOAD: LIBFAKETIME!, FAKETIME_TIMESTAMP_FILE: clock, FAKETIME_NO_CACHE: '1', FAKETIME_DONT_FAKE_MONOTONIC: '1' },
      timeoutMs: 60_000,
    });
    onTestFinished(() => void daemon.child.kill('SIGKILL')); // gone already, unless the test failed
    // The n-th pass's `run finished` (waitFor looks at the lines logged so far too).
    const passes = (n: number) => {
      let finishedRuns = 0;
      return daemon.waitFor((l) => l.msg === 'run finished' && ++finishedRuns >= n, 30_000);
    };
    await passes(1);
    writeFileSync(clock, '2026-06-01 12:03:02\n'); // NTP sets it back two minutes
    await passes(2);
    writeFileSync(clock, '2026-06-01 12:04:02\n');
    await passes(3);
    writeFileSync(clock, '@2026-06-01 12:05:02 x20\n');
    let after = false;
    await daemon.waitFor((l) => (after ||= l.msg === 'daemon: occurrence due; starting a pass' && l.occurrence === '2026-06-01T12:06:00.000Z') && l.msg === 'run finished', 30_000);
    daemon.child.kill('SIGTERM');
    expect((await daemon.exited).code, daemon.stderr()).toBe(0);
    const due = daemon.lines.filter((l) => l.msg === 'daemon: occurrence due; starting a pass').map((l) => String(l.occurrence).slice(11, 16));
    // Before, no run had started "since" 12:03 or 12:04 by the record (the early 12:05 run's
    // start is later), so they never ran; 12:05 itself, run early, is not run twice.
    expect(due).toEqual(['12:05', '12:03', '12:04', '12:06']);
  });
});

describe.skipIf(!hasFaketime)('overruns (real process, accelerated clock)', () => {
  it('a run longer than two occurrences records two overruns', async () => {
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'process/until-module.mjs') },
        schedule: { cron: '* * * * *', timeZone: 'UTC' },
      },
      { 'slow.txt': 's' },
    );
    // The 12:00 fire, and a handler that works until 12:02:30: exactly two occurrences come
    // due. The clock runs 10x (a minute in 6 s), not 60x: at 60x a start-up slowed by a
    // loaded machine passed 12:01 before the watch began (it was then missed, not an
    // overrun), and a watch's wake-up late by half a second came after the run had ended
    // (at 20x, a start at a load of 20 still took 3 s). Here the start has 5.9 s and the
    // wake-up 3 s; the fire and the end are fixed, not read from the clock.
    const run = spawnFastCli(['run', '-c', ws.configPath, '--scheduled-time', '2026-06-01T12:00:00Z'], '2026-06-01 12:00:01', {
      env: { UNTIL: '2026-06-01T12:02:30Z' },
      rate: 10,
    });
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(0);
    expect(run.lines.find((l) => l.msg === 'run started')?.fire).toMatchObject({ occurrence: '2026-06-01T12:00:00.000Z' });
    const overruns = run.lines.filter((l) => l.msg === 'overrun: an occurrence came due while this run is still active');
    expect(overruns.map((l) => l.occurrence)).toEqual(['2026-06-01T12:01:00.000Z', '2026-06-01T12:02:00.000Z']);
    const ledger = await ledgerOf(ws.db);
    try {
      expect((await ledger.totals()).overruns).toBe(2);
    } finally {
      await ledger.close();
    }
  });

  it('occurrences that came due between a late fire and its start are missed, even when overruns are recorded after them', async () => {
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'process/until-module.mjs') },
        schedule: { cron: '* * * * *', timeZone: 'UTC' },
      },
      { 'slow.txt': 's' },
    );
    // The 12:01 fire's pod starts after 12:03 (a slow image pull): 12:02 and 12:03 came due
    // while its Job was pending and never ran. The run then overruns the next one or two.
    const late = fast('2026-06-01 12:03:20', ['run', '-c', ws.configPath, '--scheduled-time', '2026-06-01T12:01:00Z'], { UNTIL_MINUTES: '1.5' });
    expect((await late.exited).code, late.stderr()).toBe(0);
    // The next fire, 12:15 (well after the late run, on a loaded machine too), at an
    // unaccelerated clock: it starts on time.
    const next = spawnCliRaw(process.execPath, [CLI, 'run', '-c', ws.configPath, '--scheduled-time', '2026-06-01T12:15:00Z'], {
      env: { LD_PRELOAD: LIBFAKETIME, FAKETIME: '@2026-06-01 12:15:00' },
    });
    expect((await next.exited).code, next.stderr()).toBe(0);
    // Every occurrence between the two fires is accounted for, as missed or as an overrun, once.
    const db = new Database(ws.db, { readonly: true });
    try {
      const rows = db.prepare("SELECT occurrence FROM events WHERE kind IN ('missed', 'overrun') ORDER BY occurrence").pluck().all();
      const between = Array.from({ length: 13 }, (_, i) => `12:${String(i + 2).padStart(2, '0')}`);
      expect(rows.map((o) => new Date(Number(o)).toISOString().slice(11, 16))).toEqual(between);
    } finally {
      db.close();
    }
  });
});

describe('fire identity', () => {
  it('a fire older than graceSeconds is stale: logged, recorded, skipped with exit 0', async () => {
    const ws = workspace(
      { handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') }, schedule: { cron: '0 * * * *', timeZone: 'UTC', graceSeconds: 300 } },
      { 'a.txt': 'a' },
    );
    const hourAgo = new Date(Date.now() - 3600_000);
    hourAgo.setUTCMinutes(0, 0, 0);
    const r = await runCli(['run', '-c', ws.configPath, '--scheduled-time', hourAgo.toISOString().replace('.000Z', 'Z')]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.lines.some((l) => l.msg === 'skipped: stale fire (older than schedule.graceSeconds)')).toBe(true);
    expect(finished(r)?.outcome).toBe('stale');
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 0, dead: 0 });
    const ledger = await ledgerOf(ws.db);
    try {
      expect((await ledger.totals()).stale).toBe(1);
    } finally {
      await ledger.close();
    }
  });

  it('the scheduled time comes from CRONSAFE_SCHEDULED_TIME too, and a bad one is a usage error', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') }, schedule: { cron: '0 * * * *', timeZone: 'UTC' } }, { 'a.txt': 'a' });
    const ok = await runCli(['run', '-c', ws.configPath], { env: { CRONSAFE_SCHEDULED_TIME: '2026-01-01T00:00:00Z' } });
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.lines.find((l) => l.msg === 'run started')?.fire).toMatchObject({ occurrence: '2026-01-01T00:00:00.000Z', source: 'scheduled-time' });
    const bad = await runCli(['run', '-c', ws.configPath, '--scheduled-time', 'yesterday']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--scheduled-time: expected an RFC 3339 time');
  });

  // A CronJob whose spec.timeZone (or spec.schedule) differs from the config's: every fire
  // falls between the config's occurrences, so each run warned that an occurrence "never
  // ran" (and counted it missed) although the job ran every day, and nothing said why.
  it('a scheduled time that is not an occurrence of schedule.cron in schedule.timeZone is named as a mismatch with the CronJob', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') }, schedule: { cron: '30 1 * * *', timeZone: 'Europe/London' } }, { 'a.txt': 'a' });
    const mismatch = 'schedule: the scheduled time is not an occurrence of schedule.cron in schedule.timeZone; do they match the CronJob\'s spec.schedule and spec.timeZone?';
    // 01:30 in New York: the fire of a CronJob with timeZone America/New_York.
    const ny = await runCli(['run', '-c', ws.configPath], { env: { CRONSAFE_SCHEDULED_TIME: '2026-11-20T01:30:00-05:00' } });
    expect(ny.code, ny.stderr).toBe(0);
    expect(ny.lines.find((l) => l.msg === mismatch)).toMatchObject({
      level: 'warn',
      scheduledTime: '2026-11-20T06:30:00.000Z',
      cron: '30 1 * * *',
      timeZone: 'Europe/London',
      latestOccurrence: '2026-11-20T01:30:00.000Z',
    });
    // London's own 01:30 is an occurrence: no such line.
    const london = await runCli(['run', '-c', ws.configPath], { env: { CRONSAFE_SCHEDULED_TIME: '2026-11-21T01:30:00Z' } });
    expect(london.code, london.stderr).toBe(0);
    expect(london.lines.some((l) => l.msg === mismatch)).toBe(false);
  });

  it('a scheduled time in the future (a wrong year) is a usage error, before anything is recorded: the overrun and missed counts keep working', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') }, schedule: { cron: '0 * * * *', timeZone: 'UTC' } }, { 'a.txt': 'a' });
    const nextYear = new Date(Date.now() + 365 * 86400_000);
    nextYear.setUTCMinutes(0, 0, 0);
    const stamp = nextYear.toISOString().replace('.000Z', 'Z');
    for (const [args, env, from] of [
      [['--scheduled-time', stamp], {}, '--scheduled-time'],
      [[], { CRONSAFE_SCHEDULED_TIME: stamp }, 'CRONSAFE_SCHEDULED_TIME'],
    ] as const) {
      const r = await runCli(['run', '-c', ws.configPath, ...args], { env });
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain(`${from}: ${nextYear.toISOString()} is in the future`);
      const plan = await runCli(['plan', '-c', ws.configPath, ...args], { env });
      expect(plan.code, plan.stderr).toBe(2);
    }
    expect(existsSync(ws.db), 'no ledger made, no fire recorded').toBe(false);
    // A fire a few seconds ahead (clock skew between the controller and the node) still runs.
    const skew = await runCli(['run', '-c', ws.configPath, '--scheduled-time', new Date(Date.now() + 30_000).toISOString()]);
    expect(skew.code, skew.stderr).toBe(0);
  });

  it('more missed occurrences than are counted: the log line says its number is a lower bound, not the whole number', async () => {
    // A minute's schedule whose last recorded fire is 100,005 minutes (~70 days) back: 100,004
    // occurrences never ran, past the 100,000 counted one by one.
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') }, schedule: { cron: '* * * * *', timeZone: 'UTC' } }, { 'a.txt': 'a' });
    // Each run on a clock a second past its own fire: a run of this minute's schedule that
    // spans a minute of its clock records that minute as an overrun (and the occurrences
    // before it as missed), past the second fire, which then has none missed before it. On
    // the real clock a loaded machine's first run spanned a minute now and then.
    const first = await runCliAt('2026-06-01 00:00:01', ['run', '-c', ws.configPath, '--scheduled-time', '2026-06-01T00:00:00Z']);
    expect(first.code, first.stderr).toBe(0);
    expect(first.lines.filter((l) => String(l.msg).startsWith('overrun')), 'the first run ended within its minute').toEqual([]);
    const fire = new Date(Date.parse('2026-06-01T00:00:00Z') + 100_005 * 60_000);
    const later = await runCliAt(fakeClock(new Date(fire.getTime() + 1000)), ['run', '-c', ws.configPath, '--scheduled-time', fire.toISOString()]);
    expect(later.code, later.stderr).toBe(0);
    const line = later.lines.find((l) => l.msg === 'schedule: occurrences since the last recorded one never ran');
    expect(line).toMatchObject({ missed: 100_000, atLeast: true, countedUpTo: 100_000, first: '2026-06-01T00:01:00.000Z', recorded: 100 });
  });

  it('records the occurrences between the last recorded one and this fire as missed', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') }, schedule: { cron: '0 * * * *', timeZone: 'UTC' } }, { 'a.txt': 'a' });
    expect((await runCli(['run', '-c', ws.configPath, '--scheduled-time', '2026-06-01T10:00:00Z'])).code).toBe(0);
    const later = await runCli(['run', '-c', ws.configPath, '--scheduled-time', '2026-06-01T14:00:00Z']);
    expect(later.code, later.stderr).toBe(0);
    const line = later.lines.find((l) => l.msg === 'schedule: occurrences since the last recorded one never ran');
    expect(line).toMatchObject({ missed: 3, first: '2026-06-01T11:00:00.000Z' });
    expect(line, 'the whole number: no lower-bound mark').not.toHaveProperty('atLeast');
    const ledger = await ledgerOf(ws.db);
    try {
      expect((await ledger.totals()).missed).toBe(3);
      expect(await ledger.lastOccurrenceRecorded()).toBe(Date.parse('2026-06-01T14:00:00Z'));
    } finally {
      await ledger.close();
    }
    // The same fire again records nothing new.
    await runCli(['run', '-c', ws.configPath, '--scheduled-time', '2026-06-01T14:00:00Z']);
    const again = await ledgerOf(ws.db);
    try {
      expect((await again.totals()).missed).toBe(3);
    } finally {
      await again.close();
    }
  });

  it('a stale fire still records the occurrences missed before it (a laptop that slept for a week)', async () => {
    const ws = workspace(
      { handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') }, schedule: { cron: '0 * * * *', timeZone: 'UTC', graceSeconds: 300 } },
      { 'a.txt': 'a' },
    );
    for (const fire of ['2026-06-01T10:00:00Z', '2026-06-01T14:00:00Z']) {
      const r = await runCli(['run', '-c', ws.configPath, '--scheduled-time', fire]);
      expect(finished(r)?.outcome, r.stderr).toBe('stale');
    }
    const ledger = await ledgerOf(ws.db);
    try {
      expect(await ledger.totals()).toMatchObject({ stale: 2, missed: 3 });
    } finally {
      await ledger.close();
    }
  });

  it('repeatedFire: skip drops the second 01:30 of the New York fall-back night', async () => {
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') },
        schedule: { cron: '30 1 * * *', timeZone: 'America/New_York', repeatedFire: 'skip' },
      },
      { 'a.txt': 'a' },
    );
    const first = await runCli(['run', '-c', ws.configPath, '--scheduled-time', '2026-11-01T01:30:00-04:00']);
    expect(finished(first)?.outcome).toBe('completed');
    const second = await runCli(['run', '-c', ws.configPath, '--scheduled-time', '2026-11-01T01:30:00-05:00']);
    expect(second.code).toBe(0);
    expect(finished(second)?.outcome).toBe('stale');
    expect(second.lines.some((l) => String(l.msg).startsWith('skipped: second fire of the repeated fall-back hour'))).toBe(true);
  });

  it('repeatedFire: skip still runs the second 01:30 when no run started for the first: it is the night\'s only fire', async () => {
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') },
        schedule: { cron: '30 1 * * *', timeZone: 'America/New_York', repeatedFire: 'skip' },
      },
      { 'a.txt': 'a' },
    );
    expect(finished(await runCli(['run', '-c', ws.configPath, '--scheduled-time', '2026-10-31T01:30:00-04:00']))?.outcome).toBe('completed');
    // The 01:30 EDT fire made no run (the cluster was down): the 01:30 EST one is no duplicate.
    const plan = await runCli(['plan', '-c', ws.configPath, '--json', '--scheduled-time', '2026-11-01T01:30:00-05:00']);
    expect(plan.code, plan.stderr).toBe(0);
    expect(JSON.parse(plan.stdout).fire.skip).toBeNull();
    const second = await runCli(['run', '-c', ws.configPath, '--scheduled-time', '2026-11-01T01:30:00-05:00']);
    expect(finished(second)?.outcome, second.stderr).toBe('completed');
    const ledger = await ledgerOf(ws.db);
    try {
      // Before, the night passed without a run and without a missed count: the skip's record
      // at 06:30Z also hid the 05:30Z fire from the next run's missed count.
      expect((await ledger.totals()).missed).toBe(1);
    } finally {
      await ledger.close();
    }
    // The Job retries its pod (drained, exit 75): the same fire, still the night's only one.
    const retry = await runCli(['run', '-c', ws.configPath, '--scheduled-time', '2026-11-01T01:30:00-05:00']);
    expect(finished(retry)?.outcome, retry.stderr).toBe('completed');
  });

  it('cronsafe schedule --json reports latest, next, due and stale', async () => {
    const ws = workspace({ handler: { command: ['true'] }, schedule: { cron: '30 1 * * *', timeZone: 'America/New_York', graceSeconds: 600 } });
    const r = await runCli(['schedule', '-c', ws.configPath, '--json', '--at', '2026-11-01T06:35:00Z']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      policy: 'kubernetes',
      latest: '2026-11-01T06:30:00.000Z',
      latestLocal: '2026-11-01T01:30:00-05:00',
      latestIsRepeatedFire: true,
      next: '2026-11-02T06:30:00.000Z',
      due: true,
      stale: false,
      lastRunStartedAt: null,
    });
    const daemonView = JSON.parse((await runCli(['schedule', '-c', ws.configPath, '--json', '--daemon', '--at', '2026-11-01T06:35:00Z'])).stdout);
    expect(daemonView).toMatchObject({ policy: 'vixie', latest: '2026-11-01T05:30:00.000Z' });
  });

  // "Why didn't it run at 01:30 EST?" asked the next day: the runs since --at had not started
  // then. Before, the newest run (the next night's) answered: due false, and a lastRunStartedAt
  // after --at.
  it('cronsafe schedule --at judges due by the runs started at or before --at, not by later ones', async () => {
    const ws = workspace({ handler: { command: ['true'] }, schedule: { cron: '30 1 * * *', timeZone: 'America/New_York' } });
    const ledger = await ledgerOf(ws.db);
    try {
      await ledger.startRun({ runId: 'edt', owner: 'o', startedAt: Date.parse('2026-11-01T05:30:04Z'), scheduledFor: Date.parse('2026-11-01T05:30:00Z') });
      await ledger.startRun({ runId: 'next', owner: 'o', startedAt: Date.parse('2026-11-02T06:30:04Z'), scheduledFor: Date.parse('2026-11-02T06:30:00Z') });
    } finally {
      await ledger.close();
    }
    const at = async (iso: string) => JSON.parse((await runCli(['schedule', '-c', ws.configPath, '--json', '--at', iso])).stdout) as Record<string, unknown>;
    expect(await at('2026-11-01T06:35:00Z')).toMatchObject({ latest: '2026-11-01T06:30:00.000Z', lastRunStartedAt: '2026-11-01T05:30:04.000Z', due: true });
    expect(await at('2026-11-01T05:35:00Z')).toMatchObject({ latest: '2026-11-01T05:30:00.000Z', lastRunStartedAt: '2026-11-01T05:30:04.000Z', due: false });
    expect(await at('2026-11-01T05:00:00Z')).toMatchObject({ lastRunStartedAt: null, due: true });
    // Without --at: now, and the newest run.
    expect(JSON.parse((await runCli(['schedule', '-c', ws.configPath, '--json'])).stdout)).toMatchObject({ lastRunStartedAt: '2026-11-02T06:30:04.000Z' });
  });
});

describe('a schedule with no timeZone on a machine whose TZ names no zone', () => {
  it('cronsafe schedule calls a wildcard schedule\'s second-pass fire no repeated fire, as a run does (repeatedFire: skip never skips it)', async () => {
    const ws = workspace({ handler: { command: ['true'] }, schedule: { cron: '0 * * * *', timeZone: 'America/New_York', repeatedFire: 'skip' } });
    const r = await runCli(['schedule', '-c', ws.configPath, '--json', '--at', '2026-11-01T06:05:00Z']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ latest: '2026-11-01T06:00:00.000Z', latestLocal: '2026-11-01T01:00:00-05:00', latestIsRepeatedFire: false });
    const run = await runCli(['run', '-c', ws.configPath, '--scheduled-time', '2026-11-01T01:00:00-05:00']);
    expect(finished(run)?.outcome, run.stderr).toBe('completed');
  });

  it('reckons in UTC, as the C library does (TZ= or an unknown name), for schedule and run alike: no fatal error', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') }, schedule: { cron: '30 1 * * *' } }, { 'a.txt': 'a' });
    for (const TZ of ['', 'Nowhere/Foo']) {
      const s = await runCli(['schedule', '-c', ws.configPath, '--json', '--at', '2026-07-01T12:00:00Z'], { env: { TZ } });
      expect(s.code, s.stderr).toBe(0);
      expect(JSON.parse(s.stdout)).toMatchObject({ timeZone: 'UTC', latest: '2026-07-01T01:30:00.000Z' });
      // Before: "fatal: unknown time zone "Etc/Unknown"", exit 1, while validate said OK.
      const r = await runCli(['run', '-c', ws.configPath], { env: { TZ } });
      expect(r.code, r.stderr).toBe(0);
    }
  });

  it('a TZ that only ICU takes as a zone (TZ=BST: Asia/Dhaka to ICU, no zone to the C library) is UTC too, as cron reckons it', async () => {
    const ws = workspace({ handler: { command: ['true'] }, schedule: { cron: '30 1 * * *' } });
    for (const TZ of ['BST', 'IST', 'SystemV/EST5']) {
      const s = await runCli(['schedule', '-c', ws.configPath, '--json', '--at', '2026-07-01T12:00:00Z'], { env: { TZ } });
      expect(s.code, s.stderr).toBe(0);
      // Before: Asia/Dhaka (latest 2026-06-30T19:30Z), where `date` and cron on the machine said UTC.
      expect(JSON.parse(s.stdout), TZ).toMatchObject({ timeZone: 'UTC', latest: '2026-07-01T01:30:00.000Z' });
    }
  });

  it('a TZ naming an ICU-only zone in the C library\'s file form (TZ=:BST) is UTC too: no zone file has that name', async () => {
    const ws = workspace({ handler: { command: ['true'] }, schedule: { cron: '30 1 * * *' } });
    for (const TZ of [':BST', ':IST', ':PST', ':SystemV/EST5']) {
      const s = await runCli(['schedule', '-c', ws.configPath, '--json', '--at', '2026-07-01T12:00:00Z'], { env: { TZ } });
      expect(s.code, s.stderr).toBe(0);
      // Before: Asia/Dhaka for :BST (latest 2026-06-30T19:30Z), where `date` and cron on the machine said UTC.
      expect(JSON.parse(s.stdout), TZ).toMatchObject({ timeZone: 'UTC', latest: '2026-07-01T01:30:00.000Z' });
    }
  });

  it('a TZ that is a POSIX fixed offset (TZ=GMT+5, EST5, CET-1) is that offset, as the C library, cron and Node\'s Date reckon it', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') }, schedule: { cron: '30 1 * * *' } }, { 'a.txt': 'a' });
    const cases: [string, string, string][] = [
      // POSIX counts hours west of Greenwich, as the Etc zones' names do: GMT+5 is 5 hours behind UTC.
      ['GMT+5', 'Etc/GMT+5', '2026-07-01T06:30:00.000Z'],
      ['EST5', 'Etc/GMT+5', '2026-07-01T06:30:00.000Z'],
      ['CET-1', 'Etc/GMT-1', '2026-07-01T00:30:00.000Z'],
    ];
    for (const [TZ, zone, latest] of cases) {
      const s = await runCli(['schedule', '-c', ws.configPath, '--json', '--at', '2026-07-01T12:00:00Z'], { env: { TZ } });
      // Before: GMT+5 was ICU's "GMT+05:00", "fatal: unknown time zone", exit 1; EST5 and CET-1 were UTC.
      expect(s.code, s.stderr).toBe(0);
      expect(JSON.parse(s.stdout), TZ).toMatchObject({ timeZone: zone, latest });
    }
    const r = await runCli(['run', '-c', ws.configPath], { env: { TZ: 'GMT+5' } });
    expect(r.code, r.stderr).toBe(0);
  });

  const newYorkFile = '/usr/share/zoneinfo/America/New_York';
  it.skipIf(!existsSync(newYorkFile))('a TZ that is a zone file (TZ=/usr/share/zoneinfo/..., TZ=:/...) is that zone, as the C library and so cron read it', async () => {
    const ws = workspace({ handler: { command: ['true'] }, schedule: { cron: '30 1 * * *' } });
    for (const TZ of [newYorkFile, `:${newYorkFile}`]) {
      const s = await runCli(['schedule', '-c', ws.configPath, '--json', '--at', '2026-07-01T12:00:00Z'], { env: { TZ } });
      expect(s.code, s.stderr).toBe(0);
      // Before: UTC (ICU reads no path), while `date` and cron on the machine said EDT.
      expect(JSON.parse(s.stdout), TZ).toMatchObject({ timeZone: 'America/New_York', latest: '2026-07-01T05:30:00.000Z' });
    }
  });

  const est5edtFile = '/usr/share/zoneinfo/EST5EDT';
  it.skipIf(!existsSync(est5edtFile))('a TZ that is a zone file ICU reckons as UTC (TZ=/usr/share/zoneinfo/EST5EDT, TZ=:EST5EDT) is that zone too', async () => {
    const ws = workspace({ handler: { command: ['true'] }, schedule: { cron: '30 1 * * *' } });
    for (const TZ of [est5edtFile, ':EST5EDT']) {
      const s = await runCli(['schedule', '-c', ws.configPath, '--json', '--at', '2026-07-01T12:00:00Z'], { env: { TZ } });
      expect(s.code, s.stderr).toBe(0);
      // Before: UTC (ICU names these UTC, so the file was never read), while `date` said EDT.
      expect(JSON.parse(s.stdout), TZ).toMatchObject({ latest: '2026-07-01T05:30:00.000Z' });
    }
  });
});
