/** `cronsafe daemon`'s engine: a run per occurrence of schedule.cron, until stopped. */
import { statSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Config } from '../config/types.js';
import { configRedactor } from '../config/secrets.js';
import { coerceError, ConfigError, EXIT, StateRefused, StateTooNew, StateUnavailable } from '../errors.js';
import { openStore } from '../ledger/open.js';
import { StoppedBeforeLedger } from '../ledger/run-lock.js';
import { reading } from '../ledger/reading.js';
import type { RunOutcome } from '../ledger/run-types.js';
import type { Ledger } from '../ledger/types.js';
import { findLiveRun } from '../lock/heartbeat.js';
import { startDaemonMetrics, type DaemonMetrics } from '../metrics/index.js';
import type { LedgerReads } from '../metrics/ledger-view.js';
import { firstAbort } from '../runner/drain.js';
import { acquireExitGuard } from '../runner/handlers/exit-guard.js';
import { OutputUnwritable } from '../runner/faults.js';
import { UnsafeOwnDirectory } from '../runner/own-dir.js';
import { ownFilePrefixes, ownFiles } from '../runner/own-files.js';
import { batches, scanDirectory } from '../runner/scan.js';
import { DaemonStopped, runDaemon, type DaemonClock } from '../schedule/daemon.js';
import { escapeControls } from '../terminal-safe.js';
import { executeRun } from './execute.js';
import { exitCodeFor, sayRunFailed } from './outcome.js';

/** How a pass the daemon resumes at start-up ended: no end recorded (killed, or still running), died, drained or failed. */
const UNFINISHED = new Set<RunOutcome | null>([null, 'died', 'drained', 'failed']);
/** Runs read back for the start-up resume: enough to find the completed pass of the last run's occurrence behind a few growth passes. */
const RESUME_LOOKBACK_RUNS = 100;

/** Ids looked up per query by the growth check. */
const GROWTH_BATCH = 256;

const realClock: DaemonClock = {
  now: () => Date.now(),
  elapsed: () => performance.now(),
  sleep: (ms, signal) => delay(ms, undefined, { signal }).catch(() => undefined),
};

/** Run each occurrence of `config.schedule` until `stop`; the exit code (0 once stopped). */
export async function runScheduled(config: Config, log: Logger, signals: { stop: AbortSignal; force: AbortSignal }): Promise<number> {
  const store = openStore(config);
  // A database not up yet (a host booting, the daemon's unit started before PostgreSQL's) is
  // waited for tick by tick, as an outage between passes is: the first read opens the ledger
  // (runDaemon says the store is unavailable, once). A store that answers with a refusal (a
  // password, another job's schema, a damaged file) still ends the daemon at once.
  let ledger: Ledger | undefined;
  try {
    // Its migration (an upgrade) waits for a session left holding a lock on the ledger's
    // tables: said, naming that session, as a run says it (the daemon was silent meanwhile).
    ledger = await store.openLedger({ stop: signals.stop, migrationLog: log });
  } catch (err) {
    // Stopped while another connection held the SQLite ledger's write lock (a sqlite3 shell
    // in a transaction): the wait ends there, nothing was run. It waited out SQLite's whole
    // busy wait and then failed, exit 1 'database is locked', for a stop asked before it.
    if (err instanceof StoppedBeforeLedger) {
      log.info({ result: 'stopped', signal: err.signal }, 'daemon stopped');
      return 0;
    }
    if (!(err instanceof StateUnavailable && err.unreachable)) throw err;
  }
  let opened = sqliteFileIdentity(config);
  // Whether the ledger was ever opened: until then a refusal (the server up at last, but a
  // wrong password, no such database) is the one the start ends on, not the outage waited for.
  let reached = ledger !== undefined;
  // The SQLite file deleted or replaced while the daemon idled (a run since made a new one):
  // read that one, not the deleted file this connection still holds open (and on the disk).
  const current = async (): Promise<Ledger> => {
    const now = sqliteFileIdentity(config);
    if (ledger !== undefined && (now === undefined || now === opened)) return ledger;
    await ledger?.close();
    ledger = undefined;
    ledger = await store.openLedger({ migrationLog: log }).catch((err: unknown) => {
      if (!reached && err instanceof StateUnavailable && !err.unreachable && !(err instanceof StateTooNew)) throw new StateRefused(err.message);
      throw err;
    });
    reached = true;
    opened = now;
    return ledger;
  };
  // The metrics' reads before the ledger was ever opened: the store's error, as in an outage.
  const notOpen = (): Promise<never> => Promise.reject(store.unavailable('open the ledger', new Error('not reached since the daemon started')));
  const unopened: LedgerReads = { totals: notOpen, counts: notOpen, attemptTotals: notOpen, runStats: notOpen, recentRuns: notOpen };
  // The daemon's own reads name the store as a run's do (StateUnavailable), so that it waits an outage out.
  const LOOK = 'look for new files';
  let unscannable = false; // the growth check could not scan the source last time (logged once)
  // Another run of this job alive by its heartbeat, as a run that takes the lock checks; the
  // daemon's own passes run in this process, one at a time, and are never among them.
  // The daemon's own reads give way to a stop (DaemonStopped): one that waits on the store
  // (a table lock, an outage's retries) kept an idle daemon from stopping until the drain's
  // last resort, which exited 75 blaming a drain that was never going. The read is left to
  // end on its own, and the ledger closed without waiting for it.
  let abandoned = false;
  // A module handler's code runs on between passes (a timer it left, its pool's events): a
  // stray process.exit or an unhandled rejection then ends the daemon, said in the log, exit 1
  // (it was exit 0 and no word, or Node's raw stack). A pass, with its own guard, fails instead.
  // Never released: the process ends with the daemon, and such code still pending (a timer per
  // item) would exit 0 or crash while the daemon's last lines are written.
  const between = config.handler.module === undefined ? undefined : acquireExitGuard(configRedactor(config), true);
  const stop = firstAbort(signals.stop, between?.fatal);
  const orStop = <T>(read: Promise<T>): Promise<T> => {
    let onStop = (): void => undefined;
    const stopped = new Promise<never>((_, reject) => {
      onStop = () => {
        abandoned = true;
        reject(new DaemonStopped());
      };
    });
    if (stop.signal.aborted) onStop();
    else stop.signal.addEventListener('abort', onStop, { once: true });
    // Either's later rejection is the race's, handled: never an unhandled rejection.
    return Promise.race([read, stopped]).finally(() => stop.signal.removeEventListener('abort', onStop));
  };
  /** A read of the runs by the daemon itself (never a pass's), given up on a stop. */
  const runsRead = <T>(read: (l: Ledger) => Promise<T>): Promise<T> => orStop(reading(store, current().then(read), 'read the last run'));
  const liveRun = () => runsRead((l) => findLiveRun(l, '', Date.now(), config.lease.seconds * 1000));
  // metrics.port for the daemon's whole life (each pass shows its own there while it runs),
  // read between passes from the ledger the daemon has open.
  let metrics: DaemonMetrics | undefined;
  try {
    metrics = await startDaemonMetrics(config, () => ledger ?? unopened, log);
    const result = await runDaemon({
      config,
      log,
      stop: stop.signal,
      clock: realClock,
      lastRunStart: async (atOrBefore) => (await runsRead((l) => l.lastRunStart(atOrBefore)))?.startedAt ?? null,
      occurrenceRan: (occurrence) => runsRead((l) => l.occurrenceRan(occurrence)),
      lastRunInterrupted: async () => {
        const [last, ...before] = await runsRead((l) => l.recentRuns(RESUME_LOOKBACK_RUNS));
        if (last === undefined || !UNFINISHED.has(last.outcome)) return false;
        // Its occurrence has not come yet by this clock: it ran under a wall clock since set
        // back (NTP, a VM restored). The resume runs the latest occurrence, an earlier one that
        // has its own run: it ran that one a second time, saying it resumed it. The unfinished
        // pass's items are the next occurrence's to finish.
        if (last.scheduledFor !== null && last.scheduledFor > Date.now()) return false;
        // No end recorded: killed, or still going (a manual `cronsafe run`). Resumed, the one
        // still going would only find the lock held and count an overrun: asked again later.
        if (last.outcome === null && (await liveRun()) !== null) return undefined;
        // Started more than graceSeconds after its occurrence, it was not refused as a stale
        // fire: it was no fire (a growth pass), and is resumed as one, never refused either.
        // Nor was one that came after its occurrence's pass had completed (a growth pass soon
        // after it, within graceSeconds): resumed as the fire, it was refused as stale past
        // graceSeconds, and the files it had found waited for the next occurrence.
        const grace = config.schedule?.graceSeconds;
        if (grace != null && last.scheduledFor !== null && last.startedAt - last.scheduledFor > grace * 1000) return 'not-a-fire';
        return last.scheduledFor !== null && before.some((r) => r.scheduledFor === last.scheduledFor && r.outcome === 'completed') ? 'not-a-fire' : true;
      },
      runActive: async () => (await liveRun()) !== null,
      pass: (occurrence, trigger) =>
        executeRun(config, log, { stop: signals.stop, force: signals.force, scheduledTime: occurrence, policy: 'vixie', growth: trigger === 'growth', served: metrics?.slot, metricsPortHeld: metrics === undefined }).catch(
          (err: unknown) => {
            // output.directory unusable at the pass's start (read-only, full, replaced by a
            // file): the environment's fault, as a source unmounted is. The pass failed (logged
            // and recorded as such) and is run again; it ended the daemon (exit 1). So is
            // cronsafe's own directory there found replaced (.cronsafe-tmp made a link, a
            // file): refused, nothing in it emptied, until someone removes what is there.
            if (!(err instanceof OutputUnwritable || err instanceof UnsafeOwnDirectory)) throw err;
            sayRunFailed(err.message);
            return 'failed' as const;
          },
        ),
      // metrics.port held when the daemon started (a `cronsafe run` by hand serves it while it
      // runs): tried again at each tick, or the daemon served it only during its own passes,
      // for as long as it ran, and a static scrape found it down between them.
      eachTick: async () => {
        if (metrics !== undefined || config.metrics?.port === undefined) return;
        metrics = await startDaemonMetrics(config, () => ledger ?? unopened, log, true);
        if (metrics) log.info({ port: config.metrics.port }, 'metrics: metrics.port is free now; serving /metrics between passes too');
      },
      sourceGrew: () =>
        reading(store, current(), LOOK)
          .then((l) => sourceGrew(config, l, (read) => orStop(reading(store, read, LOOK)), stop.signal))
          .then(
            (grew) => {
              unscannable = false;
              return grew;
            },
            (err: unknown) => {
              // Not the store's outage: a source that cannot be scanned (unmounted, removed, no
              // descriptor left) is the environment's fault, which the next occurrence's pass
              // reports and stops on. The check looks again a cooldown later (it said only that
              // the next occurrence runs, as if it had given up until then).
              if (err instanceof StateUnavailable || err instanceof ConfigError || err instanceof DaemonStopped) throw err;
              if (!unscannable) {
                log.warn(
                  { err: coerceError(err).message, cooldownSeconds: config.daemon.growth.cooldownSeconds },
                  'daemon: cannot look for new files in the source; looking again after daemon.growth.cooldownSeconds (scheduled occurrences still run)',
                );
              }
              unscannable = true;
              return false;
            },
          ),
    });
    if (between?.fatal.aborted) {
      const err = coerceError(between.fatal.reason);
      log.error({ err }, 'handler code broke the process between passes; stopping the daemon');
      process.stderr.write(`cronsafe: daemon failed: ${escapeControls(err.message)}\n`);
      return EXIT.FATAL;
    }
    // Which signal stopped it: a daemon found gone with exit 0 (its terminal closed: SIGHUP,
    // which `nohup` does not hold off for Node) said only `daemon stopped`, nothing of why.
    const reason: unknown = signals.stop.reason;
    log.info({ result, ...(signals.stop.aborted && typeof reason === 'string' ? { signal: reason } : {}) }, 'daemon stopped');
    return result === 'stopped' ? 0 : exitCodeFor(result);
  } finally {
    stop.dispose();
    await metrics?.close();
    // A read given up on a stop may still hold a connection (PostgreSQL's pool ends once it
    // is released): not waited for, the process ends now.
    if (abandoned) void ledger?.close().catch(() => undefined);
    else await ledger?.close();
  }
}

/** The SQLite ledger file's identity (device and inode); undefined on PostgreSQL or while there is none. */
function sqliteFileIdentity(config: Config): string | undefined {
  const file = config.state.postgres === undefined ? config.state.sqlite : undefined;
  if (file === undefined || file === ':memory:') return undefined;
  try {
    const s = statSync(file);
    return `${s.dev}:${s.ino}`;
  } catch {
    return undefined; // deleted and not made again yet: the next run makes it
  }
}

/**
 * True when the source holds a file the ledger has not seen: new work arrived. More files
 * than known items settles it without a look-up; otherwise each batch of ids is looked up
 * (done files may have left the source, as in an inbox, so counts alone cannot tell). The
 * scan stops at the first new file: at most one pass over the directory. Only the ledger's
 * reads go through `fromLedger` (StateUnavailable): a scan's error is the source's. A stop
 * (SIGTERM) ends the scan at once with false: a large source must not hold the daemon past
 * its grace period.
 */
export async function sourceGrew(config: Config, ledger: Ledger, fromLedger: <T>(read: Promise<T>) => Promise<T>, stop?: AbortSignal): Promise<boolean> {
  const c = await fromLedger(ledger.counts());
  const known = c.pending + c.claimed + c.done + c.dead;
  let seen = 0;
  for await (const batch of batches(scanDirectory({ ...config.source, skipPaths: ownFiles(config), skipPrefixes: ownFilePrefixes(config), signal: stop }), GROWTH_BATCH)) {
    if (stop?.aborted) return false;
    seen += batch.length;
    if (seen > known) return true;
    if ((await fromLedger(ledger.peek(batch.map((i) => i.id)))).length < batch.length) return true;
  }
  return false;
}
