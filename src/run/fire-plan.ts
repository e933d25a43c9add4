/**
 * The fire plan: what a run does about its schedule before its pass, recorded in the
 * ledger so that counts survive short-lived pods: which occurrence it is for, whether that
 * fire is skipped (stale, or the repeated fall-back hour), the occurrences missed before
 * it, which finished items it refreshes, and the overruns that come due while it runs.
 */
import type { Logger } from 'pino';
import type { Config, ScheduleConfig } from '../config/types.js';
import type { Ledger, RefreshPolicy } from '../ledger/types.js';
import { identifyFire, MISSED_COUNT_LIMIT, missedOccurrences, type Fire } from '../schedule/fire.js';
import { latestOccurrence, type SchedulePolicy } from '../schedule/occurrences.js';
import { MAX_OVERRUNS_AT_ONCE, watchOverruns } from '../schedule/overrun-watch.js';
import { parseCron } from '../schedule/cron.js';
import { replacesSchedule } from '../ledger/schedule-record.js';

export interface FirePlan {
  fire: Fire | null;
  /** Set when this fire must not run: the reason, already logged and recorded. */
  skip?: FireSkip;
  /** Which finished items are outstanding again for this fire (schedule.refresh). */
  refresh?: RefreshPolicy;
  /** Start counting overruns; returns the stop function. */
  watchOverruns(): () => void;
}

const noWatch = () => () => undefined;

/**
 * Past MISSED_COUNT_LIMIT missed occurrences are no longer counted: the log line's `missed`
 * is then a lower bound, and says so (`atLeast`), rather than passing the cap for the number.
 */
const missedBeyond = (atLeast: boolean) => (atLeast ? { atLeast: true, countedUpTo: MISSED_COUNT_LIMIT } : {});

/** Why a fire is not run. */
export type FireSkip = 'stale' | 'repeated-fire';

/**
 * Whether `fire` is skipped, and why (also `cronsafe plan`): stale, or the repeated fall-back
 * hour with `repeatedFire: skip` when it duplicates a first fire the ledger records
 * (firstPassRecorded).
 */
export function fireSkip(schedule: ScheduleConfig, fire: Fire, firstPassRecorded: boolean): FireSkip | undefined {
  return fire.stale ? 'stale' : firstPassRecorded && schedule.repeatedFire === 'skip' ? 'repeated-fire' : undefined;
}

/**
 * For the second fire of a fall-back hour under `repeatedFire: skip`: whether the ledger
 * accounts for the first (a run for it, or its lock-skip, overrun or stale record). When it
 * does not, no run came of the first, and the second is the night's only fire: skipping it
 * would also hide the first from the missed count. A record of this very fire that is a
 * run, not a skip, is a retried pod of a fire already judged so: it runs too.
 */
export async function firstPassRecorded(schedule: ScheduleConfig, fire: Fire, ledger: Ledger | null): Promise<boolean> {
  const first = fire.firstPass?.getTime();
  if (first === undefined || schedule.repeatedFire !== 'skip' || !ledger) return false;
  const second = fire.occurrence.getTime();
  const last = await ledger.lastOccurrenceRecorded();
  if (last === null || last < first) return false;
  if (last < second) return true;
  const runs = await ledger.recentRuns(100);
  return !runs.some((r) => r.scheduledFor === second && r.outcome !== 'stale');
}

/** Which finished items `schedule.refresh` makes outstanding again for the fire of `occurrence` (also `cronsafe plan`). */
export function refreshFor(schedule: ScheduleConfig, occurrence: number): RefreshPolicy | undefined {
  return schedule.refresh === 'every-occurrence' ? { doneBefore: occurrence } : schedule.refresh === 'on-change' ? { onChange: true } : undefined;
}

/**
 * How this fire's missed occurrences are counted: from the last occurrence the ledger accounts
 * for, and records the expression this fire is planned under (Ledger.recordSchedule). When
 * that last occurrence was one of another expression (schedule.cron or schedule.timeZone
 * changed since), an occurrence of the new one since then is missed only if the old one had it
 * too (`alsoOf`): a fire that neither schedule would have skipped. Without that, a daily job
 * made hourly counted every hour since its last daily run as never run. A record's `since`
 * after the last occurrence recorded is a fire of this expression whose run was not recorded
 * (killed at its start): counted from there.
 */
async function missedCounting(
  schedule: ScheduleConfig,
  fire: Fire,
  ledger: Ledger,
  lastRecorded: number | null,
  log: Logger,
): Promise<{ from: number | null; alsoOf?: { cron: string; timeZone: string } }> {
  const now = { cron: parseCron(schedule.cron).fields.join(' '), timeZone: fire.timeZone, since: fire.occurrence.getTime() };
  const before = await ledger.recordSchedule(now);
  // None recorded: a new ledger, or one from before the record (counted as before it).
  if (before === null) return { from: lastRecorded };
  if (!replacesSchedule(before, now)) return { from: lastRecorded === null ? before.since : Math.max(lastRecorded, before.since) };
  if (lastRecorded !== null && lastRecorded < now.since) {
    log.info(
      { cron: now.cron, timeZone: now.timeZone, before: { cron: before.cron, timeZone: before.timeZone }, lastRecorded: new Date(lastRecorded).toISOString() },
      'schedule: schedule.cron or schedule.timeZone changed since the last recorded occurrence; of the occurrences since, only those of both schedules are counted as missed',
    );
  }
  return { from: lastRecorded, alsoOf: { cron: before.cron, timeZone: before.timeZone } };
}

/** Decide about this fire and record what the schedule says (unless `record` is false); the run then acts on the plan. */
export async function planFire(
  config: Config,
  ledger: Ledger,
  log: Logger,
  now: Date,
  scheduledTime: Date | undefined,
  policy: SchedulePolicy,
  /** Also told about each overrun (Kubernetes Events). */
  onOverrun?: (occurrence: Date) => void,
  /**
   * Keep the schedule records (missed, overruns, stale). False for a pod that joined a
   * pass another pod of its Job started: that pod records them, once.
   */
  record = true,
  /** A growth-triggered daemon pass: no fire to refuse (ExecuteOptions.growth). */
  growth = false,
): Promise<FirePlan> {
  const schedule = config.schedule;
  if (!schedule) return { fire: null, watchOverruns: noWatch };
  const fire = identifyFire(schedule, now, scheduledTime, policy);
  if (!fire) {
    log.warn({ cron: schedule.cron }, 'schedule: the expression has no occurrence at or before now; running without a fire identity');
    return { fire: null, watchOverruns: noWatch };
  }
  const occurrence = fire.occurrence.getTime();
  const fireLog = { occurrence: fire.occurrence.toISOString(), local: fire.local, source: fire.source, ageSeconds: Math.round(fire.ageMs / 1000) };
  // A fire between the expression's occurrences: the CronJob's spec.schedule or spec.timeZone
  // is not the config's. Missed and overrun counts follow the config, so each run would report
  // an occurrence that "never ran" with nothing to say why.
  const onOrBefore = fire.source === 'scheduled-time' ? latestOccurrence(schedule.cron, fire.timeZone, fire.occurrence, policy) : fire.occurrence;
  if (onOrBefore?.getTime() !== occurrence) {
    log.warn(
      { scheduledTime: fire.occurrence.toISOString(), local: fire.local, cron: schedule.cron, timeZone: fire.timeZone, latestOccurrence: onOrBefore?.toISOString() ?? null },
      "schedule: the scheduled time is not an occurrence of schedule.cron in schedule.timeZone; do they match the CronJob's spec.schedule and spec.timeZone?",
    );
  }

  const skip = growth ? undefined : fireSkip(schedule, fire, await firstPassRecorded(schedule, fire, ledger));
  // Before this fire, whether or not it runs: a stale fire after a week asleep moves the
  // ledger's last occurrence past the week, so it is counted now or never.
  const lastRecorded = record ? await ledger.lastOccurrenceRecorded() : null;
  if (record) {
    const { from, alsoOf } = await missedCounting(schedule, fire, ledger, lastRecorded, log);
    const { missed, total, atLeast } = missedOccurrences(schedule, from === null ? null : new Date(from), fire.occurrence, 100, policy, alsoOf);
    for (const m of missed) await ledger.recordEvent('missed', now.getTime(), {}, m.getTime());
    if (total > 0) {
      log.warn({ missed: total, ...missedBeyond(atLeast), first: missed[0]?.toISOString(), recorded: missed.length }, 'schedule: occurrences since the last recorded one never ran');
    }
  }
  if (skip === 'stale') {
    log.warn({ ...fireLog, graceSeconds: schedule.graceSeconds }, 'skipped: stale fire (older than schedule.graceSeconds)');
    if (record) await ledger.recordEvent('stale', now.getTime(), { reason: 'older than graceSeconds', ...fireLog }, occurrence);
    return { fire, skip: 'stale', watchOverruns: noWatch };
  }
  if (skip === 'repeated-fire') {
    log.warn(fireLog, 'skipped: second fire of the repeated fall-back hour (schedule.repeatedFire: skip)');
    if (record) await ledger.recordEvent('stale', now.getTime(), { reason: 'repeated wall time at fall-back', ...fireLog }, occurrence);
    return { fire, skip: 'repeated-fire', watchOverruns: noWatch };
  }

  const refresh = refreshFor(schedule, occurrence);
  if (!record) return { fire, refresh, watchOverruns: noWatch };

  // Overruns are occurrences that come due while this run is active: start at the run's
  // start (those between a late fire and the start never ran: the next run counts them as
  // missed), and after whatever the ledger already accounted for, so none counts twice.
  const after = new Date(Math.max(occurrence, lastRecorded ?? occurrence, now.getTime()));
  // An overrun recorded moves the ledger's last occurrence past those late ones, and the next
  // run would not see them: the first overrun records them as missed first (found then:
  // most runs never overrun).
  let lateRecorded = false;
  return {
    fire,
    refresh,
    watchOverruns: () => {
      const w = watchOverruns(
        schedule,
        after,
        (o) => {
          const late = lateRecorded ? undefined : missedOccurrences(schedule, new Date(Math.max(occurrence, lastRecorded ?? occurrence)), new Date(after.getTime() + 1), 100, policy);
          lateRecorded = true;
          if (late && late.total > 0) {
            log.warn({ missed: late.total, ...missedBeyond(late.atLeast), first: late.missed[0]?.toISOString(), recorded: late.missed.length }, 'schedule: occurrences between this fire and the start of its run never ran');
            for (const m of late.missed) {
              ledger.recordEvent('missed', Date.now(), {}, m.getTime()).catch((err: unknown) => {
                log.warn({ err }, 'could not record the missed occurrence');
              });
            }
          }
          log.warn({ occurrence: o.toISOString() }, 'overrun: an occurrence came due while this run is still active');
          onOverrun?.(o);
          ledger.recordEvent('overrun', Date.now(), { runFire: fireLog.occurrence }, o.getTime()).catch((err: unknown) => {
            log.warn({ err }, 'could not record the overrun');
          });
        },
        undefined,
        policy,
        (from, now) =>
          log.warn(
            { from: from.toISOString(), now: now.toISOString(), counted: MAX_OVERRUNS_AT_ONCE },
            'overrun: more occurrences came due at once than are counted one by one (the wall clock stepped forward?); the rest are not counted',
          ),
      );
      return () => w.stop();
    },
  };
}
