import type { Logger } from 'pino';
import type { Config } from '../config/types.js';
import { ConfigError, EXIT } from '../errors.js';
import { DEFAULT_POSTGRES_SCHEMA, type Store } from '../ledger/open.js';
import type { Ledger, RunHeartbeat } from '../ledger/types.js';
import { StoppedBeforeLedger, stopName } from '../ledger/run-lock.js';
import { pushLedgerMetrics } from '../metrics/index.js';
import type { EventSink } from '../kube/events.js';
import { otherHost } from '../lock/heartbeat.js';
import { identifyFire } from '../schedule/fire.js';
import type { ExecuteOptions, RunResult } from './outcome.js';

/** What a skip needs of the run that ends with it. */
export interface SkippedRun {
  config: Config;
  store: Store;
  /** The run's logger (job and runId bound). */
  log: Logger;
  opts: ExecuteOptions;
  events: EventSink;
  /** The lock another run holds, when the store said (SQLite: lock.path, the ledger file or its name lock). */
  held?: string;
}

/**
 * Another run holds the lock (or the Lease, `lease`; or it beats in the ledger, `live`): exit
 * 0 at once (Forbid semantics), and record the skip in the ledger so that the overrun count,
 * which must survive this short-lived process, sees it.
 */
export async function skipLocked({ config, store, log, opts, events, held }: SkippedRun, lease?: string, live?: RunHeartbeat): Promise<RunResult> {
  // Which lock: the one the store found held (with SQLite, often the ledger file: each pod of
  // the chart has its own lock.path); on PostgreSQL the advisory lock in the job's schema.
  const lock = held ?? (config.state.postgres !== undefined ? `postgres advisory lock (schema ${config.state.schema ?? DEFAULT_POSTGRES_SCHEMA})` : config.lock.path);
  // A run on another host (a pod on another node, the ledger on a shared volume) has its own
  // lock file, which no lock here reaches: its heartbeat alone keeps this start out. "Was the
  // lock file deleted?", and an Event naming this run's own lock as held, sent the operator
  // after a lock file. It is alive there, or died less than lease.seconds ago.
  const host = live ? otherHost(live) : undefined;
  const beating = host
    ? `another run of this job, on host ${host}, beat in the ledger less than lease.seconds (${config.lease.seconds} s) ago: it is still running there, or it died since (a start after that takes its claims back)`
    : undefined;
  if (lease) log.info({ reason: lease }, 'skipped: another run holds the Kubernetes Lease');
  // [issue 10, case 3]
  else if (live && beating) log.warn({ lock, liveRun: live }, `skipped: another run of this job is alive: ${beating}`);
  else if (live) log.warn({ lock, liveRun: live }, 'skipped: another run of this job is alive (it beats in the ledger) although its lock was free; was the lock file deleted?');
  else log.info({ lock }, 'skipped: another run holds the lock');
  // A ledger of another job (one recorded, or the one the run holding the lock records now,
  // two jobs started at once on a new ledger) is this config's error (78, naming both jobs
  // and the file), not a skip: exit 0 looked like a normal overlap to the CronJob at every
  // start. Checked before the Event, which would tell `kubectl describe` of a skip.
  let ledger: Ledger | null = null;
  try {
    // A stop ends a wait for another connection's write lock (an operator's `sqlite3` shell in
    // a transaction): the skip is not recorded, and the start exits at once. It waited out
    // SQLite's busy wait (5 s), deaf to the signal, for one event.
    ledger = await store.openForSkip(opts.stop);
    if (!ledger) log.warn(`the skipped start is not recorded in the ledger: the run holding the lock recorded no job in the new ledger ${opts.stop.aborted ? `before ${stopName(opts.stop)}` : 'in time'}`);
  } catch (err) {
    if (err instanceof ConfigError) throw err; // [issue 10, case 1] a ledger of another job
    if (err instanceof StoppedBeforeLedger) log.warn(`the skipped start is not recorded in the ledger: ${err.message}`);
    else log.warn({ err }, 'could not record the skipped start in the ledger');
  }
  events.skipped(lease ?? beating ?? (live ? `another run of this job is alive (it beats in the ledger) although the run lock (${lock}) was free` : `another run holds the run lock (${lock})`));
  if (ledger) {
    try {
      ledger.stopEndsWaits?.(opts.stop);
      const occurrence = config.schedule ? identifyFire(config.schedule, new Date(), opts.scheduledTime, opts.policy)?.occurrence : undefined;
      await ledger.recordEvent('lock-skip', Date.now(), { pid: process.pid, ...(lease ? { lease } : {}) }, occurrence?.getTime());
      await pushLedgerMetrics({ config, ledger, log }, 'skipped: lock held');
    } catch (err) {
      if (err instanceof StoppedBeforeLedger) log.warn(`the skipped start is not recorded in the ledger: ${err.message}`);
      else log.warn({ err }, 'could not record the skipped start in the ledger');
    } finally {
      await ledger.close().catch((err: unknown) => log.warn({ err }, 'could not close the ledger'));
    }
  }
  await events.flush(opts.stop);
  log.info({ outcome: 'skipped-locked', exitCode: EXIT.OK }, 'run finished');
  return 'skipped-locked';
}
