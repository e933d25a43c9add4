/**
 * `cronsafe daemon`: our own scheduler for hosts without Kubernetes (a VM, a laptop that
 * sleeps). Each tick asks: is there an occurrence that no run has started for? If so, run a
 * pass for it, once, however many ticks see it. Vixie semantics across DST (docs/schedule.md).
 * A stale occurrence (older than graceSeconds, e.g. after a week asleep) is recorded and
 * skipped by the run itself. Optional growth trigger between occurrences.
 */
import type { Logger } from 'pino';
import type { Config } from '../config/types.js';
import { StateRefused, StateTooNew, StateUnavailable } from '../errors.js';
import { scheduleStatus } from './status.js';
import { defaultTimeZone } from './zone.js';

/**
 * A read of the daemon's own (not a pass's) given up because a stop came while it waited on
 * the store: a PostgreSQL table locked by VACUUM FULL or an operator's LOCK TABLE, an outage
 * in its 30 s of retries. An idle daemon ends at once on a stop (exit 0), not when the read does.
 */
export class DaemonStopped extends Error {
  constructor() {
    super('stopped while reading the ledger');
  }
}

export type DaemonPassResult = 'completed' | 'drained' | 'failed' | 'skipped-locked' | 'stale';

/**
 * A pass for an occurrence that failed (exit 1: a source unmounted for a moment, a full
 * volume) is run again as the Job controller runs a failed CronJob pod again: up to the
 * chart's `backoffLimit` (3) times, 10 s after the first failure, doubling (capped at 6 min).
 */
export const FAILED_PASS_RETRIES = 3;
const FAILED_PASS_BACKOFF_MS = 10_000;
const FAILED_PASS_BACKOFF_MAX_MS = 360_000;

export interface DaemonClock {
  now(): number;
  /**
   * A monotonic reading in ms (not moved by steps of the wall clock: NTP, a VM resumed),
   * for the growth trigger's cooldown; now() when not given.
   */
  elapsed?(): number;
  /** Resolves after ms (of this clock's time) or when signal aborts. */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

export interface DaemonDeps {
  config: Config;
  log: Logger;
  stop: AbortSignal;
  clock: DaemonClock;
  /**
   * When the latest run started at or before `atOrBefore` (ledger), epoch ms. An unreachable
   * ledger: StateUnavailable. A run recorded as started later began under a clock since set
   * back (NTP, a VM resumed, an RTC read in local time): it is no run "since" an occurrence
   * that came before it, or those occurrences would never run.
   */
  lastRunStart(atOrBefore: number): Promise<number | null>;
  /**
   * Whether a run was recorded for this very occurrence (its scheduled time): one the daemon
   * ran ahead of time, under a clock since set back, is not run again when it comes due.
   */
  occurrenceRan?(occurrence: number): Promise<boolean>;
  /**
   * Whether the latest run did not finish its pass: killed (no end recorded yet, or `died`),
   * drained or failed. Asked at start-up, and again at each tick while it answers undefined:
   * the latest run is still going (a manual `cronsafe run`), so it is not known yet.
   * `not-a-fire`: it did not finish, and it was no fire (a growth pass): resumed as one,
   * never refused as stale.
   */
  lastRunInterrupted?(): Promise<boolean | 'not-a-fire' | undefined>;
  /** Whether another run of this job is going now (a manual `cronsafe run`). */
  runActive?(): Promise<boolean>;
  /** Run one pass for `occurrence` (undefined: a growth-triggered pass); StateUnavailable when it could not reach the ledger. */
  pass(occurrence: Date | undefined, trigger: 'occurrence' | 'growth'): Promise<DaemonPassResult>;
  /** Whether the source holds items the ledger has not seen since the last completed pass. */
  sourceGrew?(): Promise<boolean>;
  /** Called at each tick, before its reads (never during a pass). Must not reject. */
  eachTick?(): Promise<void>;
}

/** Runs until `stop`; returns the last pass's result if the stop interrupted one, else 'stopped'. */
export async function runDaemon(d: DaemonDeps): Promise<DaemonPassResult | 'stopped'> {
  const schedule = d.config.schedule;
  if (!schedule) throw new Error('cronsafe daemon needs a schedule (schedule.cron)');
  const tickMs = d.config.daemon.tickSeconds * 1000;
  const growth = d.config.daemon.growth;
  let attempted: number | null = null; // the occurrence last handed to a pass (even if skipped)
  // The occurrence whose pass could not reach the store: its pass is tried at every tick of the
  // outage, which is said once. Said again each time, `starting a pass` filled the log (one
  // line a tick, for hours) about passes that never started.
  let metOutage: number | null = null;
  let refused: number | null = null; // the occurrence last found already run (said once)
  // On the monotonic clock: a step back of the wall clock by X would stop the growth trigger for X.
  const elapsed = () => d.clock.elapsed?.() ?? d.clock.now();
  let lastPassEnd = -Infinity;
  // When the growth check last looked at the source: the next look waits a cooldown after it
  // too (docs/schedule.md: one directory walk per cooldown). Else, once a cooldown had passed
  // since the last pass, every tick walked the whole source (a million done files: ~10 s of
  // CPU every 30 s) for as long as it found nothing new. A look that failed (an outage) is
  // tried again at the next tick. It started no pass, so none failed: taken for a failed pass,
  // it counted toward growth.maxIncompletePasses (three outages met by looks stood the trigger
  // down until a pass completed, the next occurrence's: new files waited for it) and set a
  // cooldown.
  let lastGrowthLook = -Infinity;
  const lookForGrowth = async (): Promise<boolean | undefined> => {
    let grew: boolean | undefined;
    try {
      looking = true;
      grew = await d.sourceGrew?.();
    } catch (err) {
      if (err instanceof DaemonStopped || !unavailable(err)) throw err;
      return false;
    } finally {
      looking = false;
    }
    if (outage === 'look') back();
    lastGrowthLook = elapsed();
    return grew;
  };
  let incomplete = 0;
  let stoodDown = false;
  // The state store could not be reached at the last try (logged once per outage): by the
  // daemon's own reads, or by a pass. A pass's outage (an unwritable ledger, a full volume)
  // leaves the daemon's reads working: it ends only with a pass that reaches the store. Ended
  // by the next read, the daemon said "available again" and "unavailable" at every tick.
  // A look for new files that met it ('look') ends with a look that reaches the store: the
  // tick's own read, on other tables, may well work (said again at every tick, with a look's
  // every failure).
  let outage = false as false | 'read' | 'pass' | 'look';
  let passing = false; // the error caught is a pass's
  let looking = false; // or a look's for new files
  // The daemon killed or stopped in the middle of a pass, then started again (systemd's
  // Restart=): that occurrence has a run, but its pass did not finish. It is resumed once,
  // as the Job controller retries a killed or drained CronJob pod; else its claims and the
  // rest of its backlog would wait for the next occurrence (a day, for a daily schedule).
  // A run still going (a manual `cronsafe run`) is not interrupted: undecided until it ends.
  // Cleared by the first pass that returns: later runs are not the start-up one, and a later
  // occurrence that another run started for (a manual run) is not this daemon's to resume.
  let resume: boolean | 'not-a-fire' | undefined;
  // The occurrence whose pass failed, how many times, and when (monotonic) to run it again.
  let retry: { occurrence: number; failures: number; at: number } | undefined;
  const unavailable = (err: unknown): boolean => {
    // A daemon stays up for years: a database restart or failover between (or at) passes is
    // waited out tick by tick, as a failed pass is. Anything else still ends it.
    // A ledger a newer cronsafe migrated meanwhile is no outage: ended on, as at the start;
    // nor is a refusal by a database not reached since the start (StateRefused).
    if (!(err instanceof StateUnavailable) || err instanceof StateTooNew || err instanceof StateRefused) return false;
    if (!outage) d.log.error({ err: err.message }, 'daemon: the state store is unavailable; trying again every tick');
    // A read's outage does not end a pass's (only a pass that reaches the store does).
    outage = passing ? 'pass' : outage || (looking ? 'look' : 'read');
    return true;
  };
  const back = (): void => {
    if (outage) d.log.info('daemon: the state store is available again');
    outage = false;
  };
  const pass = async (occurrence: Date | undefined, trigger: 'occurrence' | 'growth'): Promise<DaemonPassResult> => {
    passing = true;
    const result = await d.pass(occurrence, trigger); // thrown: still passing, for the catch
    passing = false;
    back();
    return result;
  };

  // Without schedule.timeZone the line named no zone at all: the process's own (TZ) is said.
  const timeZone = schedule.timeZone ?? defaultTimeZone();
  const timeZoneFrom = schedule.timeZone === undefined ? 'TZ' : 'schedule.timeZone';
  d.log.info({ cron: schedule.cron, timeZone, timeZoneFrom, tickSeconds: d.config.daemon.tickSeconds, growth: growth.enabled }, 'daemon started');
  for (;;) {
    if (d.stop.aborted) return 'stopped';
    await d.eachTick?.();
    passing = false;
    const now = new Date(d.clock.now());
    let started: number | null;
    try {
      started = await d.lastRunStart(now.getTime());
      if (resume === undefined) resume = started === null ? false : d.lastRunInterrupted ? await d.lastRunInterrupted() : false;
    } catch (err) {
      if (err instanceof DaemonStopped) return 'stopped';
      if (!unavailable(err)) throw err;
      await d.clock.sleep(tickMs, d.stop);
      continue;
    }
    if (outage === 'read') back();
    // A stop that came during the read: no pass is active, so none starts. A pass would
    // record a drained run "started since" the occurrence, which a restarted daemon would
    // then never run, and end the daemon with 75 instead of 0.
    if (d.stop.aborted) return 'stopped';
    const status = scheduleStatus(schedule, now, started === null ? null : new Date(started), 'vixie');
    let result: DaemonPassResult | undefined;
    let passFor: number | undefined; // the occurrence a pass that returned ran for (not a growth pass)
    try {
      // Due by the latest run's start, yet recorded as run: it ran under a wall clock since set
      // back (NTP, a VM resumed). Not run again; said once, as ticks see it until the next.
      const latest = status.latest?.getTime();
      const ranBefore = latest !== undefined && status.due && latest !== attempted && (await d.occurrenceRan?.(latest)) === true;
      if (ranBefore && latest !== refused) {
        refused = latest;
        d.log.warn({ occurrence: new Date(latest).toISOString(), local: status.latestLocal }, 'daemon: this occurrence already ran (the wall clock was set back since); not running it again');
      }
      if (status.latest && status.due && status.latest.getTime() !== attempted && !ranBefore) {
        attempted = status.latest.getTime();
        const again = outage === 'pass' && metOutage === attempted;
        d.log[again ? 'debug' : 'info']({ occurrence: status.latest.toISOString(), local: status.latestLocal }, 'daemon: occurrence due; starting a pass');
        result = await pass(status.latest, 'occurrence');
        passFor = attempted;
        resume = false;
      } else if (resume && status.latest && status.latest.getTime() !== attempted) {
        attempted = status.latest.getTime();
        // A growth pass resumed is still no fire: judged as the occurrence's, hours late, it
        // was refused as stale, and the backlog it found waited for the next occurrence.
        const growthPass = resume === 'not-a-fire';
        d.log.info({ occurrence: status.latest.toISOString(), local: status.latestLocal, ...(growthPass ? { growth: true } : {}) }, 'daemon: the last pass of this occurrence did not finish (killed or stopped); resuming it');
        result = await pass(status.latest, growthPass ? 'growth' : 'occurrence');
        if (!growthPass) passFor = attempted;
        resume = false;
      } else if (retry && status.latest?.getTime() === retry.occurrence && elapsed() >= retry.at) {
        d.log.info({ occurrence: status.latest.toISOString(), local: status.latestLocal, failures: retry.failures, of: FAILED_PASS_RETRIES }, 'daemon: the pass of this occurrence failed; running it again');
        result = await pass(status.latest, 'occurrence');
        passFor = retry.occurrence;
      } else if (
        growth.enabled &&
        !stoodDown &&
        elapsed() - Math.max(lastPassEnd, lastGrowthLook) >= growth.cooldownSeconds * 1000 &&
        // A growth pass is not a fire: while another run is going it would only find the lock
        // held and count an overrun, once per cooldown. That run's end is waited for instead.
        !(await d.runActive?.()) &&
        (await lookForGrowth()) &&
        !d.stop.aborted
      ) {
        d.log.info('daemon: the source has grown since the last completed pass; starting a pass');
        result = await pass(undefined, 'growth');
      }
    } catch (err) {
      if (err instanceof DaemonStopped) return 'stopped';
      if (!unavailable(err)) throw err;
      // Not given up: the next tick fires this occurrence again if no run has started since it.
      metOutage = attempted;
      attempted = null;
      // The outage alone never ends the daemon: a stop that met it in a pass (its start-up
      // writes, the lock) ends it as a drain the ledger could not record (exit 75), not as
      // a failure (1). Whatever that pass took is handed back after its lease.
      result = d.stop.aborted ? 'drained' : 'failed';
    }
    if (passFor !== undefined) {
      // A pass that drained with no stop asked (its ledger removed, its run lock or Lease lost:
      // exit 75, which the Job controller runs again) is run again too: it waited for the next
      // occurrence (a day), though a daemon restarted then resumes it at once.
      const unfinished = result === 'failed' || (result === 'drained' && !d.stop.aborted);
      const failures = unfinished ? (retry?.occurrence === passFor ? retry.failures : 0) + 1 : 0;
      retry =
        failures > 0 && failures <= FAILED_PASS_RETRIES
          ? { occurrence: passFor, failures, at: elapsed() + Math.min(FAILED_PASS_BACKOFF_MAX_MS, FAILED_PASS_BACKOFF_MS * 2 ** (failures - 1)) }
          : undefined;
      if (failures > FAILED_PASS_RETRIES) d.log.warn({ failures }, 'daemon: the pass of this occurrence failed again; the next occurrence runs as scheduled');
    }
    if (result) {
      lastPassEnd = elapsed();
      if (result === 'completed') {
        incomplete = 0;
        if (stoodDown) d.log.info('daemon: a pass completed; growth trigger active again');
        stoodDown = false;
      } else if (result === 'drained' || result === 'failed') {
        incomplete++;
        if (incomplete >= growth.maxIncompletePasses && growth.enabled && !stoodDown) {
          stoodDown = true;
          d.log.warn({ incomplete }, 'daemon: standing down the growth trigger after passes that did not complete; scheduled occurrences still run');
        }
      }
      if (d.stop.aborted) return result;
    }
    // Wake for the next occurrence, a failed pass's retry or the next tick, whichever is first.
    const untilNext = status.next ? Math.max(0, status.next.getTime() - d.clock.now()) : tickMs;
    // Only a retry that can still fire (its occurrence is the latest), and none while a pass
    // could not reach the store: a retry due since, whose pass met the outage, was run again
    // at once, in a loop, for the whole outage. It is tried again at the next tick instead.
    const untilRetry = retry && !outage && retry.occurrence === status.latest?.getTime() ? Math.max(0, retry.at - elapsed()) : tickMs;
    await d.clock.sleep(Math.min(tickMs, untilNext, untilRetry), d.stop);
  }
}
