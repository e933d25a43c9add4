/**
 * While a run is active, every occurrence that comes due is an overrun: with Forbid,
 * Kubernetes skips (or delays) that fire because this run is still going. The watch calls
 * `onOverrun` once per such occurrence, in order, and never for the same instant twice.
 */
import type { ScheduleConfig } from '../config/types.js';
import { nextOccurrence, type SchedulePolicy } from './occurrences.js';
import { defaultTimeZone } from './zone.js';

export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** Node timers overflow past 2^31-1 ms; long waits are taken in steps and re-checked. */
const MAX_WAIT_MS = 6 * 60 * 60 * 1000;

/**
 * At most this many overruns are counted at one wake-up. More come due at once only when
 * the wall clock stepped forward (NTP correcting a board that booted with an old clock, a VM
 * resumed after days): counted one by one, ten years of `* * * * *` were 5 million log lines
 * and ledger writes in one synchronous loop, the process deaf to SIGTERM and its Lease
 * unrenewed for minutes. The rest are not counted: the caller says so once.
 */
export const MAX_OVERRUNS_AT_ONCE = 100;

/**
 * Watch occurrences strictly after `after` (the fire, or the last occurrence already
 * recorded in the ledger if later, so that nothing is counted twice).
 */
export function watchOverruns(
  schedule: ScheduleConfig,
  after: Date,
  onOverrun: (occurrence: Date) => void,
  clock: Clock = systemClock,
  policy: SchedulePolicy = 'kubernetes',
  /** Told when more than MAX_OVERRUNS_AT_ONCE came due at once: those from `from` up to `now` are not counted. */
  onSkipped?: (from: Date, now: Date) => void,
): { stop(): void } {
  const zone = schedule.timeZone ?? defaultTimeZone();
  let handle: unknown;
  let stopped = false;
  let next = nextOccurrence(schedule.cron, zone, after, policy);

  const arm = (): void => {
    if (stopped || !next) return;
    const wait = Math.min(MAX_WAIT_MS, Math.max(0, next.getTime() - clock.now()));
    handle = clock.setTimeout(tick, wait);
  };
  const tick = (): void => {
    if (stopped) return;
    let counted = 0;
    while (next && next.getTime() <= clock.now()) {
      if (counted === MAX_OVERRUNS_AT_ONCE) {
        const now = new Date(clock.now());
        onSkipped?.(next, now);
        next = nextOccurrence(schedule.cron, zone, now, policy);
        break;
      }
      onOverrun(next);
      counted++;
      next = nextOccurrence(schedule.cron, zone, next, policy);
    }
    arm();
  };
  // Occurrences already past at start (a fire that started late) came due while a run
  // was active too (the previous one, or this one's start-up): count them now.
  tick();
  return {
    stop() {
      stopped = true;
      if (handle !== undefined) clock.clearTimeout(handle);
    },
  };
}
