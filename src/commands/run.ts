import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { checkFilesystems, networkFilesystemMessage } from '../config/filesystems.js';
import { configSummary, loadConfig } from '../config/load.js';
import type { Config } from '../config/types.js';
import { ConfigError, EXIT } from '../errors.js';
import { openState, StateUnavailable, storeLabel } from '../ledger/open.js';
// Moved to ledger/open.ts (status, schedule and dead-letter need them without the runner).
export { openState, StateUnavailable };
import { reclaimsExpired } from '../ledger/postgres/expired.js';
import type { Ledger, RunHeartbeat } from '../ledger/types.js';
import type { Handler } from '../runner/types.js';
import { takeRunLock } from '../lock/run-lock.js';
import { findLiveRun, startHeartbeat } from '../lock/heartbeat.js';
import { createLogger } from '../log.js';
import { pushSkippedStart, startRunMetrics, type RunMetrics } from '../metrics/index.js';
import { createHandler } from '../runner/handlers/index.js';
import { firstAbort } from '../runner/drain.js';
import { committedOutputs, OutputStore } from '../runner/output.js';
import { runPass, type PassOutcome } from '../runner/pass.js';
import { openEventSink, withDeadLetterEvents, type EventSink } from '../kube/events.js';
import { acquireRunLease } from '../kube/lease/run-lease.js';
import { scheduledTimeFromJob } from '../kube/scheduled-time.js';
import { identifyFire, parseScheduledTime } from '../schedule/fire.js';
import { planFire } from '../schedule/fire-records.js';
import type { SchedulePolicy } from '../schedule/occurrences.js';

export interface RunOptions {
  configPath: string;
  stop: AbortSignal;
  force: AbortSignal;
  /** --scheduled-time (RFC 3339); else CRONSAFE_SCHEDULED_TIME. */
  scheduledTime?: string;
  /** Tests inject a logger; otherwise one is made from config.log. */
  logger?: Logger;
}

/** What one execution needs beyond the config (the daemon calls executeRun per occurrence). */
export interface ExecuteOptions {
  stop: AbortSignal;
  force: AbortSignal;
  /** The occurrence this run is for, when known (else the latest occurrence at start). */
  scheduledTime?: Date;
  /** `kubernetes` under a CronJob, `vixie` under cronsafe daemon. */
  policy: SchedulePolicy;
}

export type RunResult = PassOutcome | 'skipped-locked' | 'stale';

const EXIT_FOR: Record<RunResult, number> = {
  completed: EXIT.OK,
  drained: EXIT.TEMPFAIL,
  failed: EXIT.FATAL,
  'skipped-locked': EXIT.OK,
  stale: EXIT.OK,
};

export const exitCodeFor = (r: RunResult): number => EXIT_FOR[r];

/** Time-sortable, unique enough for run ids: base36 ms + 8 hex chars. */
export function newRunId(): string {
  return `${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
}

/** `cronsafe run`: one pass. Returns the exit code (cli.ts exits with it). */
export async function runCommand(opts: RunOptions): Promise<number> {
  const config = loadConfig(opts.configPath);
  const raw = opts.scheduledTime ?? process.env.CRONSAFE_SCHEDULED_TIME;
  const from = opts.scheduledTime !== undefined ? '--scheduled-time' : 'CRONSAFE_SCHEDULED_TIME';
  const log = opts.logger ?? createLogger(config.log);
  // Given explicitly it wins; else the Job's annotation, when scheduledTimestamp.enabled.
  const scheduledTime = raw ? parseScheduledTime(raw, from) : await scheduledTimeFromJob(config, log);
  const result = await executeRun(config, log, { stop: opts.stop, force: opts.force, scheduledTime, policy: 'kubernetes' });
  return exitCodeFor(result);
}

/** Take the lock, open the ledger, decide about the fire, run one pass, record it all. */
export async function executeRun(config: Config, rootLog: Logger, opts: ExecuteOptions): Promise<RunResult> {
  const runId = newRunId();
  const owner = `${hostname()}:${process.pid}:${runId}`;
  const log = rootLog.child({ job: config.name, runId });
  // Each run, so that a volume remounted between runs of a daemon is caught too.
  for (const fsCheck of checkFilesystems(config)) {
    if (fsCheck.network) log.warn({ key: fsCheck.key, path: fsCheck.path, filesystem: fsCheck.type }, networkFilesystemMessage(fsCheck));
  }

  const events = await openEventSink(config, log);
  const lock = await takeRunLock(config, owner, log, opts.scheduledTime).catch((err: unknown) => {
    // PostgreSQL's lock errors name the database already; the flock's name only its file.
    const what = config.state.postgres === undefined ? `cannot take the run lock ${config.lock.path}: ` : '';
    throw new StateUnavailable(`state store unavailable (${storeLabel(config)}): ${what}${(err as Error).message}`);
  });
  if (!lock) return skipLocked(config, log, opts, events);
  // After the run lock, so a second run in the same pod skips without an API call. A pod
  // joining its Job's PostgreSQL pass is part of the run whose first pod holds the Lease.
  const joined = lock.joined === true;
  const lease = joined ? {} : await acquireRunLease(config, log, runId).catch(async (err: unknown) => {
    await lock.release();
    throw err;
  });
  if (lease.skip) {
    await lock.release();
    return skipLocked(config, log, opts, events, lease.skip);
  }
  const stop = firstAbort(opts.stop, lease.held?.lost, lock.lost);
  // Not an operator's signal: the run's safety is gone (its ledger removed, its lock or
  // Lease lost). Said at warn, so a `log.level: warn` deployment still sees why it stopped.
  for (const lost of [lease.held?.lost, lock.lost]) {
    lost?.addEventListener('abort', () => log.warn({ reason: String(lost.reason) }, 'stopping the run: what it relies on was lost'), { once: true });
  }

  let ledger: Ledger | undefined;
  let handler: Handler | undefined;
  let metrics: RunMetrics | undefined;
  let stopWatch = () => {};
  let stopBeat = () => {}; // [issue 10, case 3]
  try {
    ledger = await openState(config, { writeBehind: true });
    // Removed mid-run (its state directory deleted), the ledger would take our results to a
    // deleted file while the next start began a new one: the lock's watch stops the run.
    if (config.state.sqlite) lock.watch?.(config.state.sqlite);
    // [issue 10, case 1] upgrades keep the old shared default ledger while it is theirs.
    if (config.state.legacyDefault) log.info({ ledger: config.state.sqlite }, 'using the old default ledger file (cronsafe.db); <name>.db is the default for new ledgers');
    // [issue 10, case 3] behind the flock: a run still beating in the ledger is alive (its
    // lock file was deleted under it): skip like a held lock, never reclaim its claims.
    // The flock on the ledger file itself proves it outright (SQLite, lockLedgerFile).
    const live = reclaimsExpired(ledger) || lock.ledgerLocked ? null : await findLiveRun(ledger, owner, Date.now(), config.lease.seconds * 1000, lock.previousHolder ?? null);
    if (live) return await skipLocked(config, log, opts, events, undefined, live);
    metrics = await startRunMetrics({ config, ledger, log });
    const startedAt = Date.now();
    const plan = await planFire(config, ledger, log, new Date(startedAt), opts.scheduledTime, opts.policy, (o) => events.overrun(o), !joined);
    if (plan.skip) {
      await ledger.startRun({ runId, owner, startedAt, scheduledFor: plan.fire?.occurrence.getTime() ?? null });
      await ledger.finishRun(runId, Date.now(), 'stale', {});
      log.info({ outcome: 'stale', exitCode: EXIT.OK, reason: plan.skip }, 'run finished');
      return 'stale';
    }
    // Holding the lock proves their run is gone: resume them now (no backoff), but charge
    // the attempt, so an item that kills the process every time still ends up dead.
    // PostgreSQL: pods of this pass may be alive, so only claims whose lease expired.
    // An attempt that had committed its output when its run died (killed between the rename
    // and the ledger write) is done: its work survived, only the record of it was lost.
    // PostgreSQL: other pods write to the same output directory; each run its own temp dir.
    const staleAfterMs = 2000 * Math.max(config.lease.seconds, config.handler.timeoutSeconds + config.handler.killAfterSeconds) + 60_000;
    const shared = config.state.postgres === undefined ? undefined : { run: owner, staleAfterMs };
    const outputs = config.output ? new OutputStore(config.output.directory, shared, config.name) : undefined;
    const recovered = committedOutputs(outputs);
    const reclaim = { now: startedAt, retry: { ...retryPolicy(config), backoffMs: 0, backoffMaxMs: 0 }, committed: recovered.committed };
    const orphans = reclaimsExpired(ledger) ? await ledger.reclaimExpired(reclaim) : await ledger.reclaimOrphans(owner, reclaim);
    if (orphans > 0) {
      log.warn({ orphans, doneByOutput: recovered.count() }, 'reclaimed claims left by a run that died (lock held, or lease expired); those whose output was committed are done');
    }
    // The same proof ends the runs that never recorded an end (SIGKILL, OOM): SQLite, we
    // hold the lock and none beats; PostgreSQL, we started the pass alone (every earlier
    // pod's lock session is gone), or, joining one, those silent for longer than a lease.
    const silentSince = reclaimsExpired(ledger) && joined ? startedAt - config.lease.seconds * 1000 : Number.MAX_SAFE_INTEGER;
    const died = await ledger.markRunsDied(silentSince);
    if (died.length > 0) log.warn({ runs: died }, "marked runs that never finished as 'died' (their process is gone)");

    handler = await createHandler(config.handler, { sourceDir: config.source.directory }).catch((err: unknown) => {
      throw new ConfigError(`handler.module: ${(err as Error).message}`, config.configPath, 'handler.module');
    });
    try {
      await outputs?.prepare();
    } catch (err) {
      // An unusable output directory (a link or a foreign .cronsafe-tmp): a failed run that
      // alerts and metrics see (cronsafe_runs_total, consecutive failures), not only stderr.
      await ledger.startRun({ runId, owner, startedAt, scheduledFor: plan.fire?.occurrence.getTime() ?? null });
      await ledger.finishRun(runId, Date.now(), 'failed', {});
      await metrics.runFinished('failed');
      log.error({ outcome: 'failed', exitCode: EXIT.FATAL, err }, 'run finished');
      throw err;
    }

    await ledger.startRun({ runId, owner, startedAt, scheduledFor: plan.fire?.occurrence.getTime() ?? null });
    stopBeat = startHeartbeat(ledger, runId, config.lease.renewSeconds * 1000, log); // [issue 10, case 3]
    metrics.runStarted();
    stopWatch = plan.watchOverruns();
    log.info(
      {
        config: configSummary(config),
        pid: process.pid,
        fire: plan.fire && { occurrence: plan.fire.occurrence.toISOString(), local: plan.fire.local, source: plan.fire.source },
      },
      'run started',
    );
    // A module handler that broke the process (a stray process.exit, an unhandled
    // rejection) stops the run like a lost lock, and the run fails.
    const fatal = handler.fatal;
    fatal?.addEventListener('abort', () => log.error({ err: fatal.reason as Error }, 'handler code broke the process; stopping the run'), { once: true });
    const passStop = firstAbort(stop.signal, fatal);
    const passed = await runPass({
      config,
      ledger,
      handler,
      outputs,
      log,
      runId,
      // PostgreSQL: every pod of the run group shares one pass (seen_run, the sweep).
      passId: lock.group ?? runId,
      owner,
      stop: passStop.signal,
      force: opts.force,
      observer: withDeadLetterEvents(metrics.observer, events),
      refresh: plan.refresh,
    });
    passStop.dispose();
    const result = fatal?.aborted ? { ...passed, outcome: 'failed' as const, error: passed.error ?? (fatal.reason as Error) } : passed;
    stopWatch();
    const finishedAt = Date.now();
    await ledger.finishRun(runId, finishedAt, result.outcome, result.counts).catch((err: unknown) => {
      log.error({ err }, 'could not record the end of the run');
    });
    await metrics.runFinished(result.outcome);
    const items = await ledger.counts().catch(() => undefined);
    log.info(
      {
        outcome: result.outcome,
        exitCode: EXIT_FOR[result.outcome],
        durationMs: finishedAt - startedAt,
        counts: result.counts,
        scan: result.scan,
        items,
        err: result.error,
      },
      'run finished',
    );
    // The log is JSON on stdout (for the cluster's log pipeline); a person at a terminal, or
    // a wrapper that only keeps stderr, still gets the reason of a failed run in one line.
    if (result.outcome === 'failed' && result.error) process.stderr.write(`cronsafe: run failed: ${result.error.message}\n`);
    return result.outcome;
  } finally {
    stopWatch();
    stopBeat();
    stop.dispose();
    await handler?.close?.().catch(() => undefined);
    await metrics?.close();
    await ledger?.close().catch(() => undefined);
    await lease.held?.release();
    await events.flush();
    await lock.release();
  }
}

export function retryPolicy(config: Config) {
  return {
    maxAttempts: config.retry.maxAttempts,
    backoffMs: config.retry.backoffSeconds * 1000,
    backoffMaxMs: config.retry.backoffMaxSeconds * 1000,
  };
}

/**
 * Another run holds the lock: exit 0 at once (Forbid semantics), and record the skip in
 * the ledger so that the overrun count, which must survive this short-lived process, sees it.
 */
async function skipLocked(config: Config, log: Logger, opts: ExecuteOptions, events: EventSink, lease?: string, live?: RunHeartbeat): Promise<RunResult> {
  if (lease) log.info({ reason: lease }, 'skipped: another run holds the Kubernetes Lease');
  // [issue 10, case 3]
  else if (live) log.warn({ lock: config.lock.path, liveRun: live }, 'skipped: another run of this job is alive (it beats in the ledger) although its lock was free; was the lock file deleted?');
  else log.info({ lock: config.lock.path }, 'skipped: another run holds the lock');
  events.skipped(lease ?? 'another run holds the run lock');
  try {
    const ledger = await openState(config);
    try {
      const occurrence = config.schedule ? identifyFire(config.schedule, new Date(), opts.scheduledTime, opts.policy)?.occurrence : undefined;
      await ledger.recordEvent('lock-skip', Date.now(), { pid: process.pid, ...(lease ? { lease } : {}) }, occurrence?.getTime());
      await pushSkippedStart({ config, ledger, log });
    } finally {
      await ledger.close();
    }
  } catch (err) {
    if (err instanceof ConfigError) throw err; // [issue 10, case 1] a ledger of another job
    log.warn({ err }, 'could not record the skipped start in the ledger');
  }
  await events.flush();
  log.info({ outcome: 'skipped-locked', exitCode: EXIT.OK }, 'run finished');
  return 'skipped-locked';
}
