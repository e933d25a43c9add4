import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { checkFilesystems, networkFilesystemMessage } from '../config/filesystems.js';
import { loadConfig } from '../config/load.js';
import type { Config } from '../config/types.js';
import { ConfigError, EXIT, coerceError } from '../errors.js';
import { openState, StateUnavailable, storeLabel } from '../ledger/open.js';
// Moved to ledger/open.ts (status, schedule and dead-letter need them without the runner).
export { openState, StateUnavailable };
import type { RunHeartbeat } from '../ledger/types.js';
import { takeRunLock } from '../lock/run-lock.js';
import { createLogger } from '../log.js';
import { pushSkippedStart } from '../metrics/index.js';
import { openEventSink, type EventSink } from '../kube/events.js';
import { scheduledTimeFromJob } from '../kube/scheduled-time.js';
import { identifyFire, parseScheduledTime } from '../schedule/fire.js';
import { exitCodeFor, type ExecuteOptions, type RunResult } from './run-outcome.js';

export interface RunOptions {
  configPath: string;
  stop: AbortSignal;
  force: AbortSignal;
  /** --scheduled-time (RFC 3339); else CRONSAFE_SCHEDULED_TIME. */
  scheduledTime?: string;
  /** Tests inject a logger; otherwise one is made from config.log. */
  logger?: Logger;
}

// In run-outcome.ts, which run-locked.ts shares without importing this file.
export { exitCodeFor, type ExecuteOptions, type RunResult } from './run-outcome.js';

/**
 * Time-sortable, unique enough for run ids: base36 ms + 8 hex chars. Math.random (seeded from
 * the OS per process) is enough: an id names a run and guards nothing (claims are fenced by
 * the owner token, which adds the host and pid), and node:crypto costs ~10 ms to load, in
 * every start that only finds the lock held.
 */
export function newRunId(): string {
  return `${Date.now().toString(36)}-${Math.floor(Math.random() * 0x1_0000_0000)
    .toString(16)
    .padStart(8, '0')}`;
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
    throw new StateUnavailable(`state store unavailable (${storeLabel(config)}): ${what}${coerceError(err).message}`);
  });
  if (!lock) return skipLocked(config, log, opts, events);
  // The pass and everything it needs (the runner, handlers, outputs, metrics), only now:
  // a start that finds the lock held is done without loading them (docs/benchmarks.md).
  const { runHoldingLock } = await import('./run-locked.js').catch(async (err: unknown) => {
    await lock.release(); // a broken install: the daemon's next occurrence must not find it held
    throw err;
  });
  const skip = (lease?: string, live?: RunHeartbeat) => skipLocked(config, log, opts, events, lease, live);
  return runHoldingLock({ config, log, opts, runId, owner, events, lock, skip });
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
