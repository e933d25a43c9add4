/**
 * Where a run stands against its schedule at `now`: the answer behind `cronsafe schedule
 * --json`, the stale-fire check at start-up and the daemon's "fire now?" decision. Pure: the
 * clock and the last run's start are parameters.
 */
import type { ScheduleConfig } from '../config/types.js';
import { latestOccurrence, nextOccurrence, wallTime, type SchedulePolicy } from './occurrences.js';
import { defaultTimeZone } from './zone.js';

/** The schedule fields scheduleStatus reads (a `schedule:` config block fits). */
export type ScheduleInput = Pick<ScheduleConfig, 'cron' | 'refresh'> & {
  /** IANA zone; absent = the machine's zone name, read now (see defaultTimeZone). */
  timeZone?: string | undefined;
  /** A fire older than this is stale; absent or null = never stale. */
  graceSeconds?: number | null | undefined;
};

/** Schedule state at one instant. */
export interface ScheduleStatus {
  /** The zone the expression was evaluated in (the configured one, or the machine's). */
  timeZone: string;
  policy: SchedulePolicy;
  /** The most recent occurrence at or before `now`, or null if none in the search horizon. */
  latest: Date | null;
  /** The first occurrence after `now`, or null if none in the search horizon. */
  next: Date | null;
  /** `latest` and `next` as the zone's wall clock shows them (RFC 3339 with offset). */
  latestLocal: string | null;
  nextLocal: string | null;
  /** An occurrence has come and no run has started at or after it. */
  due: boolean;
  /**
   * `graceSeconds` is set and `latest` is more than that old: a fire for it now would be late
   * (a machine that slept, a CronJob that was suspended). Never true without `graceSeconds`.
   */
  stale: boolean;
  /**
   * For `refresh: every-occurrence`, the latest occurrence: an item done before it is
   * outstanding again, one done at or after it belongs to this sweep. Null otherwise.
   */
  refreshHorizon: Date | null;
}

/**
 * The status of `schedule` at `now`, given when the last run started (null or absent: never).
 * `policy` is `kubernetes` under a CronJob (whose controller decides the fires) and `vixie` for
 * `cronsafe daemon`. Throws on an invalid expression or zone.
 */
export function scheduleStatus(
  schedule: ScheduleInput,
  now: Date,
  lastRunStartedAt: Date | null | undefined,
  policy: SchedulePolicy,
): ScheduleStatus {
  const timeZone = schedule.timeZone ?? defaultTimeZone();
  const latest = latestOccurrence(schedule.cron, timeZone, now, policy);
  const next = nextOccurrence(schedule.cron, timeZone, now, policy);
  const grace = schedule.graceSeconds;
  const started = lastRunStartedAt?.getTime();
  return {
    timeZone,
    policy,
    latest,
    next,
    latestLocal: latest && wallTime(latest, timeZone).iso,
    nextLocal: next && wallTime(next, timeZone).iso,
    due: latest !== null && (started === undefined || started < latest.getTime()),
    stale: latest !== null && grace != null && now.getTime() - latest.getTime() > grace * 1000,
    refreshHorizon: schedule.refresh === 'every-occurrence' ? latest : null,
  };
}
