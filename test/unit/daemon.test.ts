import { describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/types.js';
import { runDaemon, type DaemonClock, type DaemonPassResult } from '../../src/schedule/daemon.js';
import { ConfigError, StateUnavailable } from '../../src/errors.js';
import { defaultTimeZone } from '../../src/schedule/zone.js';
import { memoryLogger } from '../helpers/log.js';

function config(over: Partial<Config['daemon']['growth']> = {}, schedule: Partial<NonNullable<Config['schedule']>> = {}): Config {
  return {
    schedule: { cron: '0 * * * *', timeZone: 'UTC', refresh: 'never', repeatedFire: 'run', ...schedule },
    daemon: { tickSeconds: 60, growth: { enabled: false, cooldownSeconds: 600, maxIncompletePasses: 2, ...over } },
  } as Config;
}

/** Simulated time: sleep advances the clock; the daemon stops when `until` is reached. */
function sim(startIso: string, untilIso: string, stop: AbortController): DaemonClock {
  let t = Date.parse(startIso);
  const until = Date.parse(untilIso);
  return {
    now: () => t,
    sleep: async (ms) => {
      t += Math.max(ms, 1);
      if (t >= until) stop.abort();
    },
  };
}

async function drive(opts: {
  start: string;
  until: string;
  cfg: Config;
  lastRun?: number | null;
  result?: (n: number) => DaemonPassResult;
  grew?: (stop: AbortController) => boolean;
  /** Whether the latest run (before the daemon started) ended without finishing its pass (undefined: still going). */
  interrupted?: boolean | ((now: number) => boolean | undefined);
  /** Whether another run (a manual one) is going now. */
  active?: (now: number) => boolean;
}) {
  const stop = new AbortController();
  const clock = sim(opts.start, opts.until, stop);
  const { log, lines } = memoryLogger();
  let last = opts.lastRun ?? null;
  const passes: Array<{ at: string; occurrence: string | null; trigger: string }> = [];
  await runDaemon({
    config: opts.cfg,
    log,
    stop: stop.signal,
    clock,
    lastRunStart: async () => last,
    lastRunInterrupted: async () => (typeof opts.interrupted === 'function' ? opts.interrupted(clock.now()) : (opts.interrupted ?? false)),
    runActive: async () => opts.active?.(clock.now()) ?? false,
    pass: async (occurrence, trigger) => {
      passes.push({ at: new Date(clock.now()).toISOString(), occurrence: occurrence?.toISOString() ?? null, trigger });
      const result = opts.result?.(passes.length) ?? 'completed'; // a pass that threw recorded no run
      last = clock.now();
      return result;
    },
    sourceGrew: async () => opts.grew?.(stop) ?? false,
  });
  return { passes, lines };
}

describe('runDaemon', () => {
  it('fires each hourly occurrence once, however many ticks see it', async () => {
    const { passes } = await drive({ start: '2026-06-01T10:30:00Z', until: '2026-06-01T13:30:00Z', cfg: config(), lastRun: Date.parse('2026-06-01T10:00:05Z') });
    expect(passes.map((p) => p.occurrence)).toEqual(['2026-06-01T11:00:00.000Z', '2026-06-01T12:00:00.000Z', '2026-06-01T13:00:00.000Z']);
  });

  it("'daemon started' names the zone it reckons in, the process's own when schedule.timeZone is not set", async () => {
    const set = await drive({ start: '2026-06-01T10:30:00Z', until: '2026-06-01T10:31:00Z', cfg: config({}, { timeZone: 'Europe/London' }) });
    expect(set.lines.find((l) => l.msg === 'daemon started')).toMatchObject({ timeZone: 'Europe/London', timeZoneFrom: 'schedule.timeZone' });
    const unset = await drive({ start: '2026-06-01T10:30:00Z', until: '2026-06-01T10:31:00Z', cfg: config({}, { timeZone: undefined }) });
    expect(unset.lines.find((l) => l.msg === 'daemon started')).toMatchObject({ timeZone: defaultTimeZone(), timeZoneFrom: 'TZ' });
  });

  it('a tick exactly on an occurrence fires it', async () => {
    const { passes } = await drive({ start: '2026-06-01T11:00:00Z', until: '2026-06-01T11:10:00Z', cfg: config(), lastRun: Date.parse('2026-06-01T10:00:01Z') });
    expect(passes).toEqual([{ at: '2026-06-01T11:00:00.000Z', occurrence: '2026-06-01T11:00:00.000Z', trigger: 'occurrence' }]);
  });

  it('after a week asleep it hands only the latest occurrence to a pass (which decides staleness), once', async () => {
    const { passes } = await drive({
      start: '2026-06-08T09:20:00Z',
      until: '2026-06-08T09:50:00Z',
      cfg: config({}, { cron: '0 0 * * 1', graceSeconds: 3600 }),
      lastRun: Date.parse('2026-06-01T00:00:03Z'),
      result: () => 'stale',
    });
    expect(passes.map((p) => p.occurrence)).toEqual(['2026-06-08T00:00:00.000Z']);
  });

  it('a start that found the lock held is not retried every tick', async () => {
    const { passes } = await drive({ start: '2026-06-01T11:00:00Z', until: '2026-06-01T11:59:00Z', cfg: config(), lastRun: 0, result: () => 'skipped-locked' });
    expect(passes).toHaveLength(1);
  });

  // The Job controller runs a failed CronJob pod again (backoffLimit, 3 in the chart): a
  // daily job whose source was unmounted for a moment at its fire must not wait a day.
  it('a pass that failed (exit 1) is run again for its occurrence, 10 s, 20 s, 40 s later, then left to the next occurrence', async () => {
    const { passes, lines } = await drive({ start: '2026-06-01T11:00:00Z', until: '2026-06-01T11:59:00Z', cfg: config(), lastRun: 0, result: () => 'failed' });
    expect(passes.map((p) => [p.at, p.occurrence])).toEqual([
      ['2026-06-01T11:00:00.000Z', '2026-06-01T11:00:00.000Z'],
      ['2026-06-01T11:00:10.000Z', '2026-06-01T11:00:00.000Z'],
      ['2026-06-01T11:00:30.000Z', '2026-06-01T11:00:00.000Z'],
      ['2026-06-01T11:01:10.000Z', '2026-06-01T11:00:00.000Z'],
    ]);
    expect(lines.filter((l) => l.msg === 'daemon: the pass of this occurrence failed; running it again').map((l) => l.failures)).toEqual([1, 2, 3]);
    expect(lines.filter((l) => l.msg === 'daemon: the pass of this occurrence failed again; the next occurrence runs as scheduled')).toHaveLength(1);
  });

  it('a failed pass run again that completes is not run a third time; the next occurrence fires as scheduled', async () => {
    const { passes } = await drive({ start: '2026-06-01T11:00:00Z', until: '2026-06-01T12:30:00Z', cfg: config(), lastRun: 0, result: (n) => (n === 1 ? 'failed' : 'completed') });
    expect(passes.map((p) => [p.at, p.occurrence])).toEqual([
      ['2026-06-01T11:00:00.000Z', '2026-06-01T11:00:00.000Z'],
      ['2026-06-01T11:00:10.000Z', '2026-06-01T11:00:00.000Z'],
      ['2026-06-01T12:00:00.000Z', '2026-06-01T12:00:00.000Z'],
    ]);
  });

  it('a failed pass is not run again once the next occurrence came due (that one runs instead)', async () => {
    // A minutely schedule: the next occurrence comes before the third retry would.
    const { passes } = await drive({ start: '2026-06-01T11:00:00Z', until: '2026-06-01T11:01:30Z', cfg: config({}, { cron: '* * * * *' }), lastRun: 0, result: (n) => (n <= 3 ? 'failed' : 'completed') });
    expect(passes.map((p) => [p.at, p.occurrence])).toEqual([
      ['2026-06-01T11:00:00.000Z', '2026-06-01T11:00:00.000Z'],
      ['2026-06-01T11:00:10.000Z', '2026-06-01T11:00:00.000Z'],
      ['2026-06-01T11:00:30.000Z', '2026-06-01T11:00:00.000Z'],
      ['2026-06-01T11:01:00.000Z', '2026-06-01T11:01:00.000Z'],
    ]);
  });

  it('growth trigger: runs again when the source grew, after the cooldown only', async () => {
    const { passes } = await drive({
      start: '2026-06-01T11:00:30Z',
      until: '2026-06-01T11:40:00Z',
      cfg: config({ enabled: true, cooldownSeconds: 600 }),
      lastRun: Date.parse('2026-06-01T11:00:01Z'),
      grew: () => true,
    });
    const at = passes.map((p) => `${p.trigger}@${p.at.slice(11, 16)}`);
    // Every 10 minutes (cooldown), not every 1-minute tick.
    expect(at).toEqual(['growth@11:00', 'growth@11:10', 'growth@11:20', 'growth@11:30']);
  });

  it('growth trigger: a step back of the wall clock (NTP, a resumed VM) does not stop it for the length of the step', async () => {
    const stop = new AbortController();
    let t = Date.parse('2026-06-01T11:00:30Z');
    let skew = 0;
    const until = Date.parse('2026-06-01T11:40:00Z');
    const clock: DaemonClock = {
      now: () => t + skew,
      elapsed: () => t,
      sleep: async (ms) => {
        t += Math.max(ms, 1);
        if (passes.length === 1) skew = -3_600_000; // after the first pass ended, the wall clock goes back an hour
        if (t >= until) stop.abort();
      },
    };
    const passes: string[] = [];
    let last: number | null = Date.parse('2026-06-01T11:00:01Z');
    await runDaemon({
      config: config({ enabled: true, cooldownSeconds: 600 }),
      log: memoryLogger().log,
      stop: stop.signal,
      clock,
      lastRunStart: async () => last,
      pass: async (_occurrence, trigger) => {
        passes.push(`${trigger}@${new Date(t).toISOString().slice(11, 16)}`);
        last = clock.now();
        return 'completed';
      },
      sourceGrew: async () => true,
    });
    expect(passes).toEqual(['growth@11:00', 'growth@11:10', 'growth@11:20', 'growth@11:30']);
  });

  it('a wall clock that was ahead and is set back (NTP) runs the occurrences it had skipped, and not again the one it ran early', async () => {
    const stop = new AbortController();
    let t = Date.parse('2026-06-01T10:30:00Z'); // the true time
    let skew = 2 * 3_600_000; // the clock reads 12:30 (an RTC read as UTC, two hours east)
    const until = Date.parse('2026-06-01T13:30:00Z');
    const clock: DaemonClock = {
      now: () => t + skew,
      sleep: async (ms) => {
        t += Math.max(ms, 1);
        if (passes.length === 1) skew = 0; // NTP steps the clock back after the first pass
        if (t >= until) stop.abort();
      },
    };
    const passes: string[] = [];
    const runs = [{ startedAt: Date.parse('2026-06-01T10:00:05Z'), scheduledFor: Date.parse('2026-06-01T10:00:00Z') }];
    await runDaemon({
      config: config(),
      log: memoryLogger().log,
      stop: stop.signal,
      clock,
      lastRunStart: async (atOrBefore?: number) => Math.max(...runs.filter((r) => r.startedAt <= (atOrBefore ?? Infinity)).map((r) => r.startedAt)),
      occurrenceRan: async (occurrence) => runs.some((r) => r.scheduledFor === occurrence),
      pass: async (occurrence) => {
        passes.push(`${new Date(t).toISOString().slice(11, 16)} ${occurrence!.toISOString().slice(11, 16)}`);
        runs.push({ startedAt: clock.now(), scheduledFor: occurrence!.getTime() });
        return 'completed';
      },
    });
    // 11:00 and the early 12:00 come due again in true time: 11:00 never ran, 12:00 did.
    expect(passes).toEqual(['10:30 12:00', '11:00 11:00', '13:00 13:00']);
  });

  it('a stop during the growth check starts no pass', async () => {
    const { passes, lines } = await drive({
      start: '2026-06-01T11:00:30Z',
      until: '2026-06-01T12:00:00Z',
      cfg: config({ enabled: true, cooldownSeconds: 600 }),
      lastRun: Date.parse('2026-06-01T11:00:01Z'),
      grew: (stop) => {
        stop.abort(); // SIGTERM while the check scanned; it found new files all the same
        return true;
      },
    });
    expect(passes).toEqual([]);
    expect(lines.some((l) => String(l.msg).includes('source has grown'))).toBe(false);
  });

  it('stands down the growth trigger after passes that did not complete, saying so once', async () => {
    const { passes, lines } = await drive({
      start: '2026-06-01T11:00:30Z',
      until: '2026-06-01T11:59:00Z',
      cfg: config({ enabled: true, cooldownSeconds: 60, maxIncompletePasses: 2 }),
      lastRun: Date.parse('2026-06-01T11:00:01Z'),
      grew: () => true,
      result: () => 'drained',
    });
    expect(passes.filter((p) => p.trigger === 'growth')).toHaveLength(2);
    expect(lines.filter((l) => String(l.msg).startsWith('daemon: standing down'))).toHaveLength(1);
  });

  // A stop (SIGTERM from `systemctl stop`) that lands while the daemon reads the ledger
  // between passes: no pass is active, so none may start. One would record a drained run
  // that "started since" the occurrence, so a restarted daemon would never run that
  // occurrence (a daily job's backlog waits a day), and the daemon would exit 75, not 0.
  it.each(['occurrence', 'growth'] as const)('a stop during the ledger read before a pass starts no %s pass: the daemon just stops', async (trigger) => {
    const stop = new AbortController();
    const clock = sim('2026-06-01T11:00:30Z', '2026-06-01T12:30:00Z', stop);
    const passes: string[] = [];
    const result = await runDaemon({
      config: config({ enabled: trigger === 'growth', cooldownSeconds: 60 }),
      log: memoryLogger().log,
      stop: stop.signal,
      clock,
      lastRunStart: async () => (trigger === 'occurrence' ? (stop.abort(), Date.parse('2026-06-01T10:00:05Z')) : Date.parse('2026-06-01T11:00:05Z')),
      pass: async (occurrence, t) => {
        passes.push(`${t} ${occurrence?.toISOString() ?? ''}`);
        return 'drained';
      },
      sourceGrew: async () => (stop.abort(), true),
    });
    expect(passes).toEqual([]);
    expect(result).toBe('stopped');
  });
});

describe('runDaemon when the state store is unavailable', () => {
  const outage = () => new StateUnavailable('state store unavailable (postgres): connect ECONNREFUSED 127.0.0.1:5432');

  it("a failed pass's retry that meets the store's outage waits a tick, not 0 s: no passes in a loop", async () => {
    // The retry came due; its pass could not reach the ledger (an unwritable ledger file, a
    // full volume: the daemon's reads still work). The retry stayed due: the daemon ran it
    // again at once, and again, hundreds of passes a second, for the whole outage.
    const { passes, lines } = await drive({
      start: '2026-06-01T11:00:00Z',
      until: '2026-06-01T11:05:00Z',
      cfg: config(),
      lastRun: 0,
      result: (n) => {
        if (n === 1) return 'failed';
        throw outage();
      },
    });
    expect(passes.length).toBeLessThanOrEqual(8);
    expect(passes.slice(0, 2).map((p) => p.at)).toEqual(['2026-06-01T11:00:00.000Z', '2026-06-01T11:00:10.000Z']);
    expect(lines.filter((l) => l.msg === 'daemon: the state store is unavailable; trying again every tick')).toHaveLength(1);
  });

  it("a failed pass's retry left behind by the next occurrence does not wake the daemon in a loop when that occurrence's pass meets an outage", async () => {
    // Retries of 11:00 at 11:00:10 and 11:00:30 fail; 11:01 comes due before the third, and its
    // pass cannot reach the store. The retry of 11:00, long due, woke the daemon at once, again and again.
    const { passes } = await drive({
      start: '2026-06-01T11:00:00Z',
      until: '2026-06-01T11:04:00Z',
      cfg: config({}, { cron: '* * * * *' }),
      lastRun: 0,
      result: (n) => {
        if (n <= 3) return 'failed';
        throw outage();
      },
    });
    expect(passes.length).toBeLessThanOrEqual(10);
  });

  it('a ledger that cannot be read between passes does not end the daemon: it says so once, and fires again once the ledger is back', async () => {
    const stop = new AbortController();
    const clock = sim('2026-06-01T10:30:00Z', '2026-06-01T13:30:00Z', stop);
    const { log, lines } = memoryLogger();
    const down = { from: Date.parse('2026-06-01T10:40:00Z'), to: Date.parse('2026-06-01T12:10:00Z') };
    const isDown = () => clock.now() >= down.from && clock.now() < down.to;
    let last: number | null = Date.parse('2026-06-01T10:00:05Z');
    const passes: string[] = [];
    await runDaemon({
      config: config(),
      log,
      stop: stop.signal,
      clock,
      lastRunStart: async () => {
        if (isDown()) throw outage();
        return last;
      },
      pass: async (occurrence) => {
        if (isDown()) throw outage();
        passes.push(occurrence!.toISOString());
        last = clock.now();
        return 'completed';
      },
    });
    // 11:00 fell in the outage; 12:00 is the latest when the ledger is back (no run started since it).
    expect(passes).toEqual(['2026-06-01T12:00:00.000Z', '2026-06-01T13:00:00.000Z']);
    expect(lines.filter((l) => String(l.msg).startsWith('daemon: the state store is unavailable'))).toHaveLength(1);
    expect(lines.filter((l) => String(l.msg).startsWith('daemon: the state store is available again'))).toHaveLength(1);
  });

  it('a pass that could not reach the state store is tried again at the next tick, not given up for its occurrence', async () => {
    let calls = 0;
    const { passes } = await drive({
      start: '2026-06-01T11:00:00Z',
      until: '2026-06-01T11:30:00Z',
      cfg: config(),
      lastRun: Date.parse('2026-06-01T10:00:05Z'),
      result: () => {
        calls++;
        if (calls <= 2) throw outage();
        return 'completed';
      },
    });
    expect(passes.map((p) => `${p.at.slice(11, 16)} ${p.occurrence}`)).toEqual([
      '11:00 2026-06-01T11:00:00.000Z',
      '11:01 2026-06-01T11:00:00.000Z',
      '11:02 2026-06-01T11:00:00.000Z',
    ]);
  });

  it("a pass's outage while the daemon's reads still work (an unwritable ledger) is said once, and over only once a pass reaches the store", async () => {
    // Each tick the read worked and the daemon said "available again", then the pass failed
    // and it said "unavailable" again: two lines a tick, the first one false.
    let calls = 0;
    const { passes, lines } = await drive({
      start: '2026-06-01T11:00:00Z',
      until: '2026-06-01T11:30:00Z',
      cfg: config(),
      lastRun: Date.parse('2026-06-01T10:00:05Z'),
      result: () => {
        calls++;
        if (calls <= 3) throw outage();
        return 'completed';
      },
    });
    expect(passes).toHaveLength(4);
    const said = lines.map((l) => String(l.msg)).filter((m) => m.startsWith('daemon: the state store is'));
    expect(said).toEqual(['daemon: the state store is unavailable; trying again every tick', 'daemon: the state store is available again']);
  });

  it('a stop that meets the outage in a pass ends the daemon as a drain (75), not as a failure (1)', async () => {
    // SIGTERM while the pass's start-up could not reach the store (PostgreSQL stopped): the
    // outage alone never ends the daemon, so its end is the stop's.
    const stop = new AbortController();
    const { log } = memoryLogger();
    const result = await runDaemon({
      config: config(),
      log,
      stop: stop.signal,
      clock: sim('2026-06-01T11:00:00Z', '2026-06-01T12:30:00Z', stop),
      lastRunStart: async () => Date.parse('2026-06-01T10:00:05Z'),
      pass: async () => {
        stop.abort();
        throw outage();
      },
    });
    expect(result).toBe('drained');
  });

  it('any other error still ends the daemon', async () => {
    await expect(
      drive({
        start: '2026-06-01T11:00:00Z',
        until: '2026-06-01T11:30:00Z',
        cfg: config(),
        lastRun: 0,
        result: () => {
          throw new ConfigError('x.yaml: source.directory: gone', 'x.yaml', 'source.directory');
        },
      }),
    ).rejects.toThrow(ConfigError);
  });

  it('resumes, once, an occurrence whose pass a killed or stopped daemon left unfinished', async () => {
    const lastRun = Date.parse('2026-06-01T10:00:05Z');
    const { passes, lines } = await drive({ start: '2026-06-01T10:30:00Z', until: '2026-06-01T11:30:00Z', cfg: config(), lastRun, interrupted: true });
    expect(passes.map((p) => [p.at, p.occurrence])).toEqual([
      ['2026-06-01T10:30:00.000Z', '2026-06-01T10:00:00.000Z'],
      ['2026-06-01T11:00:00.000Z', '2026-06-01T11:00:00.000Z'],
    ]);
    expect(lines.some((l) => String(l.msg).startsWith('daemon: the last pass of this occurrence did not finish'))).toBe(true);
    // A finished one is not run again.
    const done = await drive({ start: '2026-06-01T10:30:00Z', until: '2026-06-01T10:59:00Z', cfg: config(), lastRun, interrupted: false });
    expect(done.passes).toEqual([]);
  });

  it('a run still going at start-up (a manual run) is not resumed; asked again each tick, resumed once it turns out killed', async () => {
    const lastRun = Date.parse('2026-06-01T10:00:05Z');
    const killedAt = Date.parse('2026-06-01T10:40:00Z');
    let asked = 0;
    const { passes, lines } = await drive({
      start: '2026-06-01T10:30:00Z',
      until: '2026-06-01T10:59:00Z',
      cfg: config(),
      lastRun,
      interrupted: (now) => {
        asked++;
        return now < killedAt ? undefined : true;
      },
    });
    expect(passes.map((p) => [p.at, p.occurrence])).toEqual([['2026-06-01T10:40:00.000Z', '2026-06-01T10:00:00.000Z']]);
    expect(asked).toBe(11); // each tick from 10:30 to 10:40, then decided
    expect(lines.filter((l) => String(l.msg).startsWith('daemon: the last pass of this occurrence did not finish'))).toHaveLength(1);
    // Going, then completed: never resumed.
    const finished = await drive({ start: '2026-06-01T10:30:00Z', until: '2026-06-01T10:59:00Z', cfg: config(), lastRun, interrupted: (now) => (now < killedAt ? undefined : false) });
    expect(finished.passes).toEqual([]);
  });

  it('a growth pass waits while another run is going (it would only find the lock held and count an overrun)', async () => {
    const endsAt = Date.parse('2026-06-01T10:45:00Z');
    const { passes } = await drive({
      start: '2026-06-01T10:30:00Z',
      until: '2026-06-01T10:50:30Z',
      cfg: config({ enabled: true, cooldownSeconds: 600 }),
      lastRun: Date.parse('2026-06-01T10:00:05Z'),
      grew: () => true,
      active: (now) => now < endsAt,
    });
    expect(passes).toEqual([{ at: '2026-06-01T10:45:00.000Z', occurrence: null, trigger: 'growth' }]);
  });

  it('an occurrence that comes due while another run is going still starts its pass (a real overrun when the lock is held)', async () => {
    const { passes } = await drive({
      start: '2026-06-01T10:59:00Z',
      until: '2026-06-01T11:01:00Z',
      cfg: config(),
      lastRun: Date.parse('2026-06-01T10:00:05Z'),
      active: () => true,
      result: () => 'skipped-locked',
    });
    expect(passes.map((p) => p.occurrence)).toEqual(['2026-06-01T11:00:00.000Z']);
  });
});

describe('runDaemon after it resumed an unfinished pass at start-up', () => {
  it('does not take a later occurrence that another run started for as one to resume', async () => {
    // Started at 10:30 after a killed pass of 10:00: that one is resumed, 11:00 fires. The host
    // then sleeps from 11:59 to 12:05 (suspend: the daemon's timer is late), and an operator's
    // `cronsafe run` starts at 12:02 and is still going. 12:00 has a run started since it; the
    // daemon must not start a pass for it as a "resume" (it would find the lock held and count
    // an overrun), nor one once that run ends.
    const stop = new AbortController();
    const suspend = { from: Date.parse('2026-06-01T12:00:00Z'), to: Date.parse('2026-06-01T12:05:00Z') };
    const manual = { start: Date.parse('2026-06-01T12:02:00Z'), end: Date.parse('2026-06-01T12:30:00Z') };
    const until = Date.parse('2026-06-01T12:50:00Z');
    let t = Date.parse('2026-06-01T10:30:00Z');
    const clock: DaemonClock = {
      now: () => t,
      sleep: async (ms) => {
        const next = t + Math.max(ms, 1);
        t = t < suspend.from && next >= suspend.from ? suspend.to : next;
        if (t >= until) stop.abort();
      },
    };
    const { log, lines } = memoryLogger();
    let last: number = Date.parse('2026-06-01T10:00:05Z');
    const passes: string[] = [];
    await runDaemon({
      config: config(),
      log,
      stop: stop.signal,
      clock,
      lastRunStart: async () => (t >= manual.start ? Math.max(last, manual.start) : last),
      lastRunInterrupted: async () => true,
      runActive: async () => t >= manual.start && t < manual.end,
      pass: async (occurrence) => {
        passes.push(`${new Date(t).toISOString().slice(11, 16)} ${occurrence?.toISOString() ?? 'growth'}`);
        last = t;
        return t >= manual.start && t < manual.end ? 'skipped-locked' : 'completed';
      },
    });
    expect(passes).toEqual(['10:30 2026-06-01T10:00:00.000Z', '11:00 2026-06-01T11:00:00.000Z']);
    expect(lines.filter((l) => String(l.msg).startsWith('daemon: the last pass of this occurrence did not finish'))).toHaveLength(1);
  });
});
