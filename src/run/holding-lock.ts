/**
 * `cronsafe run` once it holds the run lock: the Lease, the ledger, the fire, the pass, and
 * the record of it all. Apart from execute.ts, which imports it only after taking the lock, so
 * that a start that finds the lock held (a lock skip, every overlapping CronJob fire) loads
 * neither the runner nor the handlers nor the metrics (docs/benchmarks.md, start-up).
 */
import type { Logger } from 'pino';
import { configSummary } from '../config/load.js';
import type { Config } from '../config/types.js';
import { ConfigError, EdgeError, EXIT, coerceError } from '../errors.js';
import type { Store } from '../ledger/open.js';
import type { Ledger, RunHeartbeat } from '../ledger/types.js';
import { StoppedBeforeLedger, type RunLock } from '../ledger/run-lock.js';
import { findLiveRun, startHeartbeat } from '../lock/heartbeat.js';
import { startRunMetrics, type RunMetrics } from '../metrics/index.js';
import { firstAbort } from '../runner/drain.js';
import { committedOutputs, OutputStore, TempDirInUse } from '../runner/output.js';
import { resumeAtOnce, retryPolicy, runPass } from '../runner/pass.js';
import { HANDLER_BROKE_PROCESS, type Handler } from '../runner/types.js';
import { withDeadLetterEvents, type EventSink } from '../kube/events.js';
import { acquireRunLease } from '../kube/lease/run-lease.js';
import { whereItIs } from '../real-path.js';
import { abstractLockName, takeAbstractLock } from '../abstract-lock.js';
import { escapeControls } from '../terminal-safe.js';
import { boundHeapGrowth } from '../heap-growth.js';
import { OutOfDescriptors } from '../descriptors.js';
import { planFire } from './fire-plan.js';
import { loadHandler } from './load-handler.js';
import { exitCodeFor, sayRunFailed, type ExecuteOptions, type RunResult } from './outcome.js';

/** What executeRun hands over with the lock. */
export interface LockedRun {
  config: Config;
  /** The store the lock was taken from: the ledger is opened from it. */
  store: Store;
  /** The run's logger (job and runId bound). */
  log: Logger;
  opts: ExecuteOptions;
  runId: string;
  owner: string;
  events: EventSink;
  lock: RunLock;
  /** Ends the run as a skip (skip.ts): a Lease held elsewhere, or a run alive in the ledger. */
  skip: (lease?: string, live?: RunHeartbeat) => Promise<RunResult>;
}

/** Everything after the run lock is taken; releases it before returning. */
export async function runHoldingLock({ config, store, log, opts, runId, owner, events, lock, skip }: LockedRun): Promise<RunResult> {
  // After the run lock, so a second run in the same pod skips without an API call. A pod
  // joining its Job's PostgreSQL pass is part of the run whose first pod holds the Lease.
  const joined = lock.joined === true;
  const lease = joined ? {} : await acquireRunLease(config, log, runId, opts.stop, process.env, opts.force).catch(async (err: unknown) => {
    await lock.release();
    throw err;
  });
  if (lease.skip) {
    await lock.release();
    return skip(lease.skip);
  }
  // An operator's stop goes into the ledger at once, before the drain begins (this listener
  // comes first): a run killed before its drain hands the claims back (a grace period
  // shorter than drain.gracePeriodSeconds) has its attempts handed back uncharged by the
  // next run (Ledger.recordStopRequested). A stop before the pass claims nothing.
  let recordStop = () => {};
  const onStop = () => recordStop();
  opts.stop.addEventListener('abort', onStop, { once: true });
  const stop = firstAbort(opts.stop, lease.held?.lost, lock.lost);
  // When the run was told to stop (a signal, or a lost lock or Lease): the drain's deadline counts from it.
  let stoppedAt: number | undefined;
  stop.signal.addEventListener('abort', () => (stoppedAt ??= Date.now()), { once: true });
  // Not an operator's signal: the run's safety is gone (its ledger removed, its lock or
  // Lease lost). Said at warn, so a `log.level: warn` deployment still sees why it stopped.
  for (const lost of [lease.held?.lost, lock.lost]) {
    lost?.addEventListener(
      'abort',
      () => {
        log.warn({ reason: String(lost.reason) }, 'stopping the run: what it relies on was lost');
        opts.safetyLost?.();
      },
      { once: true },
    );
  }

  let ledger: Ledger | undefined;
  let handler: Handler | undefined;
  let metrics: RunMetrics | undefined;
  let stopWatch = () => {};
  let stopBeat = () => {}; // [issue 10, case 3]
  let outputs: OutputStore | undefined;
  // The job's lock on its source (takeAbstractLock): SQLite only.
  let releaseSource: (() => void) | null = null;
  // The ledger's start-up writes: a failure (a full state volume, a lost connection) names
  // the store and its path, in one line, as the open and the lock do; not a stack trace.
  // A ConfigError stays one (exit 78): something not ours at the start journal's path.
  // A StoppedBeforeLedger stays one: the run's stop ended the wait for another connection's
  // write lock, before the pass (stopEndsWaits below), and the run drains.
  const writing = <T>(doing: string, write: Promise<T>): Promise<T> =>
    write.catch((err: unknown) => {
      throw err instanceof EdgeError || err instanceof ConfigError || err instanceof StoppedBeforeLedger ? err : store.unavailable(doing, err);
    });

  try {
    try {
      ledger = await store.openLedger({ writeBehind: true, log, stop: opts.stop });
    } catch (err) {
      if (err instanceof OutOfDescriptors) lock.discardUnopened?.();
      // SIGTERM while another connection held the SQLite ledger's write lock: nothing claimed,
      // nothing to hand back. Drained (75), as a stop while the run lock was being taken.
      if (!(err instanceof StoppedBeforeLedger)) throw err;
      log.warn(err.message);
      process.stderr.write(`cronsafe: ${escapeControls(err.message)}: nothing was claimed\n`);
      log.info({ outcome: 'drained', exitCode: EXIT.TEMPFAIL }, 'run finished');
      return 'drained';
    }
    // Until the run's start is recorded (nothing claimed before), a stop ends a start-up
    // write's wait for another connection's write lock (a `sqlite3` shell in a transaction),
    // as it ends the open's: the run drains (75) at once. It waited SQLite's whole busy wait,
    // then failed, exit 1 ('database is locked'), counted toward the Job's backoffLimit.
    ledger.stopEndsWaits?.(opts.stop);
    // Removed mid-run (its state directory deleted), the ledger would take our results to a
    // deleted file while the next start began a new one: the lock's watch stops the run.
    lock.watchLedger?.();
    // [issue 10, case 1] upgrades keep the old shared default ledger while it is theirs.
    if (config.state.legacyDefault) log.info({ ledger: config.state.sqlite }, 'using the old default ledger file (cronsafe.db); <name>.db is the default for new ledgers');
    // [issue 10, case 3] behind the flock: a run still beating in the ledger is alive (its
    // lock file was deleted under it): skip like a held lock, never reclaim its claims.
    // The flock on the ledger file itself proves it outright (SQLite, lockLedgerFile), for runs
    // that take it: not for a run of a cronsafe from before it (0.1.0), going on during an
    // upgrade with its lock at the old lock.path (the chart moved it to /tmp). Taken for dead,
    // its claims were reclaimed and its items run beside it.
    const flockedSince = lock.ledgerLocked ? ((await ledger.flockedRunsSince?.()) ?? Infinity) : Infinity;
    const live = ledger.shared ? null : await findLiveRun(ledger, owner, Date.now(), config.lease.seconds * 1000, lock.previousHolder ?? null, flockedSince);
    if (live) return await skip(undefined, live);
    metrics = await startRunMetrics({ config, ledger, log, served: opts.served, quietPort: opts.metricsPortHeld === true });
    const startedAt = Date.now();
    // The run's length for its `run finished` line, on the monotonic clock: a step of the
    // wall clock during the run (NTP, a resumed VM) must not make it negative.
    const startedMono = performance.now();
    // A pod joining a pass, or a pod of a Job whose pass is over, runs for that pass's fire:
    // planned as of the pass's start (RunLock.passStartedAt).
    const planAt = lock.passStartedAt ?? startedAt;
    // Its reads and writes (missed occurrences, a stale fire) name the store when they fail,
    // as the start-up writes do: a daemon waits that outage out. They were a `fatal:` stack.
    const plan = await writing(
      'plan the fire',
      planFire(config, ledger, log, new Date(planAt), opts.scheduledTime, opts.policy, (o) => events.overrun(o), !joined, opts.growth === true || opts.manual === true),
    );
    // The run's start. Once recorded, a stop no longer ends a write's wait for another
    // connection's lock (stopEndsWaits): its end must be recorded (recordEnd after the pass).
    const open = ledger;
    const recordStart = async (): Promise<void> => {
      await open.startRun({ runId, owner, startedAt, scheduledFor: plan.fire?.occurrence.getTime() ?? null });
      open.stopEndsWaits?.(undefined);
    };
    if (plan.skip) {
      await writing('cannot record the start of the run', recordStart());
      await writing('cannot record the end of the run', ledger.finishRun(runId, Date.now(), 'stale', {}));
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
    const shared = ledger.shared ? { run: owner, staleAfterMs } : undefined;
    outputs = config.output ? new OutputStore(config.output.directory, shared, config.name, config.source.directory, config.state.sqlite) : undefined;
    // A command handler's process may leave a writer of {output} outside its group (setsid).
    if (outputs && config.handler.command) outputs.detachedWriters = true;
    const recovered = committedOutputs(outputs);
    // Charged, so resumed after the pass's fresh items (DiscoverOptions.deferCharged).
    // The pass's observer, also telling Kubernetes Events of each dead letter: an item that
    // kills the process every time ends dead here, in the reclaim, not in the pass.
    const observer = withDeadLetterEvents(metrics.observer, events);
    const onDeadLettered = (id: string, error: string) => {
      log.error({ itemId: id, error }, 'item dead-lettered');
      observer.deadLettered?.(id, error);
    };
    const reclaim = { now: startedAt, retry: resumeAtOnce(retryPolicy(config)), committed: recovered.committed, onDeadLettered };
    const orphans = await writing('cannot take back the claims of a run that died', ledger.reclaimAbandoned(owner, reclaim));
    if (orphans > 0) {
      log.warn({ orphans, doneByOutput: recovered.count() }, 'reclaimed claims left by a run that died (lock held, or lease expired); those whose output was committed are done');
    }
    // The same proof ends the runs that never recorded an end (SIGKILL, OOM): SQLite, we
    // hold the lock and none beats; PostgreSQL, we started the pass (every pod's lock session
    // from before it is gone: not the siblings that joined since, which may have recorded
    // their start already), or, joining one, those silent for longer than a lease.
    const silentSince = !ledger.shared ? Number.MAX_SAFE_INTEGER : joined ? startedAt - config.lease.seconds * 1000 : (lock.startedPassAt ?? startedAt - config.lease.seconds * 1000);
    const died = await writing('cannot mark the runs that died', ledger.markRunsDied(silentSince));
    if (died.length > 0) log.warn({ runs: died }, "marked runs that never finished as 'died' (their process is gone)");

    // A module's top-level code (a connection made at import) or the command helpers' start
    // may take long: a stop meanwhile has nothing to drain, so the run ends now (exit 75),
    // not at the drain's last resort just before the kubelet's SIGKILL, blaming the ledger.
    const loading = stop.signal.aborted ? undefined : loadHandler(config, log, config.handler.module !== undefined && (await brokenLately(ledger)));
    handler = loading && (await unlessStopped(loading, stop.signal));
    if (handler === undefined) {
      loading?.then((h) => h.close?.(), () => undefined).catch(() => undefined);
      // A ledger that cannot take it (its volume filled meanwhile) is named as everywhere
      // else: unwrapped, it ended as "fatal: SqliteError: database or disk is full" and a stack.
      await writing('cannot record the start of the run', recordStart());
      await writing('cannot record the end of the run', ledger.finishRun(runId, Date.now(), 'drained', {}));
      await metrics.runFinished('drained');
      log.info({ outcome: 'drained', exitCode: EXIT.TEMPFAIL, reason: String(stop.signal.reason) }, 'run finished');
      return 'drained';
    }
    try {
      await outputs?.prepare().catch((err: unknown) => {
        if (!(err instanceof TempDirInUse)) throw err;
        throw new ConfigError(
          `${config.configPath}: name: another run of a job named ${JSON.stringify(config.name)} is using output.directory ${outputs?.dir} now, from another ledger (it holds ${err.tempDir}): two configs share the name ${JSON.stringify(config.name)}; give each its own name`,
          config.configPath,
          'name',
        );
      });
      // One config copied to another directory as is: its own default ledger and run lock,
      // the same name and source. Without output.directory (above) nothing else tells them
      // apart, and each ran every item beside the other. Runs of one ledger never meet here
      // (its run lock), nor do a PostgreSQL pass's pods, which share one ledger.
      if (!ledger.shared) {
        releaseSource = await takeAbstractLock(abstractLockName('cronsafe-source', config.name, whereItIs(config.source.directory)));
        if (releaseSource === null) {
          throw new ConfigError(
            `${config.configPath}: name: another run of a job named ${JSON.stringify(config.name)} is processing source.directory ${config.source.directory} now, from another ledger: two configs share the name ${JSON.stringify(config.name)} (a copy of this config in another directory, each with its own default ledger?), and each would run every item; give each its own name`,
            config.configPath,
            'name',
          );
        }
      }
      if (outputs?.otherLedger()) {
        log.warn(
          { outputDirectory: outputs.dir, ledger: config.state.sqlite },
          `output.directory was last written by a job named ${JSON.stringify(config.name)} on another ledger file than this one (or this job's ledger moved since): two configs share this name (a copy in another directory, each with its own default ledger), so an item id they both have is one output, written by whichever commits last, and each ledger counts it done; give each its own name (or output.directory)`,
        );
      }
      const others = outputs?.sharedWith() ?? [];
      if (others.length > 0) {
        log.warn(
          { outputDirectory: outputs?.dir, jobs: others },
          'output.directory is shared with other jobs: outputs are named by item id alone, so an id that two jobs both have is one file, written by whichever commits last; an output left by a run that died is not taken as proof that it finished (the item runs again). ' +
            // Told by each job's `.cronsafe-tmp/job-<name>`, which stays: a renamed job's old
            // name was another job here on every run, for good.
            'Each job is told by its .cronsafe-tmp/job-<name> there (or in a directory above): one that no longer writes here (this job under its name before a rename) still has it; remove that directory',
        );
      }
    } catch (err) {
      // An unusable output directory (a link or a foreign .cronsafe-tmp): a failed run that
      // alerts and metrics see (cronsafe_runs_total, consecutive failures), not only stderr.
      // A ledger that cannot take it (on the same volume, gone read-only or full) must not
      // hide the output directory's error, which says why, behind a 'fatal' stack trace.
      try {
        await recordStart();
        await ledger.finishRun(runId, Date.now(), 'failed', {});
        await metrics.runFinished('failed');
      } catch (recording) {
        log.warn({ err: recording }, 'could not record the failed run in the ledger');
      }
      log.error({ outcome: 'failed', exitCode: err instanceof ConfigError ? EXIT.CONFIG : err instanceof EdgeError ? err.exitCode : EXIT.FATAL, err }, 'run finished');
      throw err;
    }

    // Items are keyed by id within the job's ledger: a second config of the same name with
    // another source (a copy-paste) would have every id the first one finished skipped as done.
    // Its real path: one directory reached by two names (the config through a link, and a
    // relative source.directory) is the same source. Before the run's start: the last write
    // a stop can end (stopEndsWaits), so a run stopped meanwhile is not recorded at all.
    const scanned = whereItIs(config.source.directory);
    const sourceBefore = await writing('cannot record the source directory', ledger.recordSource(scanned));
    if (sourceBefore !== null) {
      log.warn(
        { sourceDirectory: config.source.directory, ...(scanned !== config.source.directory ? { realPath: scanned } : {}), before: sourceBefore },
        `source.directory is not the one this job's earlier runs scanned: its ledger keys items by id, so an id done there counts as done here and is skipped. If two configs share the name ${JSON.stringify(config.name)}, give each its own name`,
      );
    }
    await writing('cannot record the start of the run', recordStart());
    // Only after the reclaim, which reads (and clears) the stop of the run before; and after the
    // start-up writes: a stop before the pass claims nothing, so there is nothing to hand back.
    if (ledger.recordStopRequested) {
      const record = ledger.recordStopRequested.bind(ledger);
      recordStop = () =>
        void record(owner).then(
          () => log.info('stop recorded in the ledger: if this run is killed before its drain ends, the next one hands its attempts back uncharged'),
          (err: unknown) =>
            // Its wait ended by the stop (stopEndsWaits): the run held no claim, nothing to hand back.
            err instanceof StoppedBeforeLedger
              ? log.info('stop not recorded in the ledger: another connection holds its write lock, and the run holds no claim (nothing to hand back)')
              : log.warn({ err }, 'could not record the stop in the ledger: killed before its drain ends, the run would have its attempts charged'),
        );
    }
    stopBeat = startHeartbeat(ledger, runId, config.lease.renewSeconds * 1000, log); // [issue 10, case 3]
    metrics.runStarted(stop.signal);
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
    fatal?.addEventListener('abort', () => log.error({ err: coerceError(fatal.reason) }, 'handler code broke the process; stopping the run'), { once: true });
    const passStop = firstAbort(stop.signal, fatal);
    // Until the pass's first claim, a stop again ends a write's wait for another connection's
    // write lock (its first discovery, the stop's record): nothing to hand back yet. They each
    // waited SQLite's whole busy wait (5 s), one after the other, before the drain.
    ledger.stopEndsWaits?.(opts.stop);
    // Before the pass's allocation begins: the old generation's growth bounded (heap-growth.ts).
    boundHeapGrowth();
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
      beforeClaim: lease.held && (() => void lease.held?.checkExpiry()),
      observer,
      refresh: plan.refresh,
    });
    passStop.dispose();
    // A ledger write that failed because the state directory was removed under the run (its
    // start journal gone before the lock's next recheck saw the ledger go) is that loss,
    // not a failure of the run: it ends as a lost lock does, drained (exit 75).
    // On PostgreSQL a failed pass with a lost lock connection is the outage that failed it (1).
    // So is a pass that completed into a ledger removed since the last recheck (within the
    // second before its end): its record is gone with the file, and the next run starts a
    // new ledger that does the items again. It said `completed`, exit 0.
    const lost = (passed.outcome === 'failed' || passed.outcome === 'completed') && lock.checkLedger?.() === true;
    // A stop (SIGTERM) whose drain could not reach the ledger (PostgreSQL stopped or failed
    // over): what the drain did not write (results, hand-backs) is taken back after its
    // lease, as after the drain's last resort, which exits 75. The pass is drained, not
    // failed: which of the two ended it was only a matter of whether the ledger's retries
    // gave up just before the last resort (exit 1) or just after (75). So is one whose SQLite
    // ledger another connection kept locked (SQLITE_BUSY): with the default margin the last
    // resort came first (75), with a larger one the busy wait gave up first (1).
    const cutOff = passed.outcome === 'failed' && opts.stop.aborted && !fatal?.aborted && passed.error !== undefined && (storeUnreachable(passed.error) || ledgerLocked(passed.error));
    const ended = fatal?.aborted
      ? { ...passed, outcome: 'failed' as const, error: passed.error ?? coerceError(fatal.reason) }
      : lost || cutOff
        ? { ...passed, outcome: 'drained' as const }
        : passed;
    // A ledger failure mid-pass (a full state volume, a file size limit) names the store and
    // its path, as one at start-up does: SQLite's own words ("database or disk is full",
    // "disk I/O error") say neither which file nor that it is the ledger's.
    const result = ended.error !== undefined && isSqliteError(ended.error) ? { ...ended, error: store.unavailable('the pass stopped', ended.error) } : ended;
    stopWatch();
    const finishedAt = Date.now();
    ledger.stopEndsWaits?.(undefined);
    await recordEnd(ledger, log, { stop: stop.signal, stoppedAt, force: opts.force, drainMs: (config.drain.gracePeriodSeconds - config.drain.marginSeconds) * 1000, claimed: (result.counts.claimed ?? 0) > 0 }, () =>
      ledger!.finishRun(runId, finishedAt, result.outcome, fatal?.aborted ? { ...result.counts, [HANDLER_BROKE_PROCESS]: 1 } : result.counts),
    );
    await metrics.runFinished(result.outcome);
    const items = await ledger.counts().catch(() => undefined);
    log.info(
      {
        outcome: result.outcome,
        exitCode: exitCodeFor(result.outcome),
        durationMs: Math.round(performance.now() - startedMono),
        counts: result.counts,
        scan: result.scan,
        items,
        err: result.error,
      },
      'run finished',
    );
    if (result.outcome === 'failed' && result.error) sayRunFailed(result.error.message);
    if (cutOff && result.error) process.stderr.write(`cronsafe: drained without the state store: ${escapeControls(result.error.message)}; what the drain could not write is taken back after its lease\n`);
    return result.outcome;
  } catch (err) {
    // A stop ended a start-up write's wait for another connection's write lock
    // (stopEndsWaits): the write did not happen, nor did any after it, and the pass never
    // began. Drained (75), as a stop during the open: nothing claimed, the run not recorded.
    if (!(err instanceof StoppedBeforeLedger)) throw err;
    log.warn(err.message);
    process.stderr.write(`cronsafe: ${escapeControls(err.message)}: nothing was claimed, and the run is not recorded in the ledger\n`);
    await metrics?.runFinished('drained');
    log.info({ outcome: 'drained', exitCode: EXIT.TEMPFAIL }, 'run finished');
    return 'drained';
  } finally {
    opts.stop.removeEventListener('abort', onStop);
    stopWatch();
    stopBeat();
    outputs?.close();
    releaseSource?.();
    stop.dispose();
    await handler?.close?.().catch(() => undefined);
    await metrics?.close();
    // The last close removes the ledger's -wal and -shm: not a loss for the lock's recheck.
    lock.unwatchCompanions?.();
    await ledger?.close().catch(() => undefined);
    // Side by side: each is bounded by a quarter of the drain margin (requestTimeoutMs), and
    // after a drain both must fit, with the handlers' kill and the final push, before the
    // kubelet's SIGKILL.
    await Promise.all([lease.held?.release() ?? lease.leftover?.(), events.flush(opts.stop)]);
    await lock.release();
  }
}

/** What recordEnd needs of the run's stop. */
interface EndOfRun {
  /** The run's stop (a signal, a lost lock or Lease), and when it came. */
  stop: AbortSignal;
  stoppedAt: number | undefined;
  /** A second signal: nothing more is waited for. */
  force: AbortSignal;
  /** The drain's budget after the stop (drain.gracePeriodSeconds less its margin). */
  drainMs: number;
  /** Whether the pass claimed anything. */
  claimed: boolean;
}

/**
 * The run's end, recorded. After a stop, while another connection holds the SQLite ledger's
 * write lock (an operator's \`sqlite3\` shell in a transaction), it is tried again until the
 * drain's deadline, or a second signal, ends the wait: the run's record is what the drain's
 * budget is for. It waited SQLite's busy wait once (5 s) and gave up, however long the budget,
 * and the run stayed \`running\` in \`cronsafe status\` until the next run marked it died.
 * Not recorded, that is said on stderr, with what follows from it.
 */
async function recordEnd(ledger: Ledger, log: Logger, end: EndOfRun, finish: () => Promise<void>): Promise<void> {
  const { stop, stoppedAt, force, drainMs, claimed } = end;
  const deadline = stop.aborted && stoppedAt !== undefined ? stoppedAt + Math.max(0, drainMs) : undefined;
  if (deadline === undefined) {
    await finish().catch((err: unknown) => log.error({ err }, 'could not record the end of the run'));
    return;
  }
  // Each try's wait ends at the deadline or a second signal (stopEndsWaits), not after SQLite's
  // busy wait. Past either already, it is tried once.
  const ends = firstAbort(force, AbortSignal.timeout(Math.max(0, deadline - Date.now())));
  ledger.stopEndsWaits?.(ends.signal);
  const waited = Date.now();
  try {
    for (;;) {
      try {
        await finish();
        const waitedMs = Date.now() - waited;
        if (waitedMs >= 1000) log.info({ waitedMs }, "the end of the run is recorded, once another connection let the ledger's write lock go");
        return;
      } catch (err) {
        const busy = err instanceof StoppedBeforeLedger || String((err as { code?: unknown }).code).startsWith('SQLITE_BUSY');
        if (busy && !ends.signal.aborted) continue;
        if (!busy) {
          log.error({ err }, 'could not record the end of the run');
          return;
        }
        const why = force.aborted ? 'until a second signal ended the wait' : `until the drain's deadline (drain.gracePeriodSeconds less drain.marginSeconds, ${Math.round(drainMs / 1000)} s after the stop)`;
        const left = claimed ? 'what the drain could not write is taken back by the next run' : 'nothing was claimed';
        const message = `the end of the run is not recorded in the ledger: another connection held its write lock (another tool, or a \`sqlite3\` shell with a transaction open) ${why}; ${left}, and \`cronsafe status\` shows the run running until the next run marks it died`;
        log.error(message);
        process.stderr.write(`cronsafe: ${message}\n`);
        return;
      }
    }
  } finally {
    ends.dispose();
    ledger.stopEndsWaits?.(undefined);
  }
}

/** What `p` resolves to, or undefined once `signal` aborts first (`p` goes on; a rejection after is the caller's). */
async function unlessStopped<T>(p: Promise<T>, signal: AbortSignal): Promise<T | undefined> {
  let off = () => {};
  const stopped = new Promise<undefined>((resolve) => {
    const on = () => resolve(undefined);
    signal.addEventListener('abort', on, { once: true });
    off = () => signal.removeEventListener('abort', on);
  });
  try {
    return await Promise.race([p, stopped]);
  } finally {
    off();
  }
}

/**
 * The ledger could not be reached at all: PostgreSQL refused, lost, starting or shutting down
 * (PostgresLedgerError.unreachable, not imported: SQLite runs never load pg; a statement the
 * server cancelled is not), or the store's (StateUnavailable.unreachable): the same field.
 */
const storeUnreachable = (err: Error): boolean => (err as { unreachable?: unknown }).unreachable === true;

/** The SQLite ledger's write lock held by another connection past cronsafe's wait (SQLITE_BUSY and its extended codes). */
const ledgerLocked = (err: Error): boolean => String((err as { code?: unknown }).code).startsWith('SQLITE_BUSY');

/** An error of the SQLite driver (better-sqlite3's SqliteError: code SQLITE_*). */
const isSqliteError = (err: Error): boolean => {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('SQLITE_');
};

/** Runs looked at for one that handler code broke (brokenLately): a culprit on backoff may skip a few. */
const RUNS_TRACED_AFTER = 20;

/**
 * Whether one of the last runs was broken by handler code (HANDLER_BROKE_PROCESS): this run's
 * module handler then tells which item's code does it (HandlerOptions.traceBreaks). A read
 * that fails says no: nothing is charged for a break then, as before.
 */
async function brokenLately(ledger: Ledger): Promise<boolean> {
  const runs = await ledger.recentRuns(RUNS_TRACED_AFTER).catch(() => []);
  return runs.some((r) => (r.counts?.[HANDLER_BROKE_PROCESS] ?? 0) > 0);
}
