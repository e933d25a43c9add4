/**
 * The run engine's entry: one execution of the job, from taking the run lock to the outcome.
 * `cronsafe run` calls it once, `cronsafe daemon` once per occurrence. What it imports
 * statically is what a start that finds the lock held needs (skip.ts); the pass and all it
 * pulls in (holding-lock.ts) only once the lock is ours (docs/benchmarks.md, start-up).
 */
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { checkFilesystems, networkFilesystemMessage } from '../config/filesystems.js';
import { moduleEnvUnused } from '../config/messages.js';
import type { Config } from '../config/types.js';
import { openStore } from '../ledger/open.js';
import { StoppedBeforeLock } from '../ledger/run-lock.js';
import type { RunHeartbeat } from '../ledger/types.js';
import { EXIT } from '../errors.js';
import { openEventSink } from '../kube/events.js';
import type { ExecuteOptions, RunResult } from './outcome.js';
import { escapeControls } from '../terminal-safe.js';
import { skipLocked } from './skip.js';

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

/** Take the lock, open the ledger, decide about the fire, run one pass, record it all. */
export async function executeRun(config: Config, rootLog: Logger, opts: ExecuteOptions): Promise<RunResult> {
  const runId = newRunId();
  const owner = `${hostname()}:${process.pid}:${runId}`;
  // The daemon's logger has the job bound already: pino would write the key twice.
  const log = rootLog.child(rootLog.bindings().job === config.name ? { runId } : { job: config.name, runId });
  // Each run, so that a volume remounted between runs of a daemon is caught too.
  for (const fsCheck of checkFilesystems(config)) {
    if (fsCheck.network) log.warn({ key: fsCheck.key, path: fsCheck.path, filesystem: fsCheck.type }, networkFilesystemMessage(fsCheck));
  }
  const envUnused = moduleEnvUnused(config.handler);
  if (envUnused) log.warn({ key: 'handler.env' }, envUnused);

  const events = await openEventSink(config, log, process.env, opts.stop);
  const store = openStore(config);
  let held: string | undefined;
  let lock;
  try {
    // PostgreSQL: the pods of a run group share one pass, which they must scan alike.
    const pass = config.state.postgres === undefined ? undefined : (await import('./pass-config.js')).passConfig(config);
    lock = await store.takeRunLock(owner, log, opts.scheduledTime, (which) => (held = which), opts.stop, pass);
  } catch (err) {
    // SIGTERM while PostgreSQL was down or not answering: nothing claimed, nothing to hand
    // back, and no ledger to record the run in. Drained (75), as a stop just after the lock.
    if (!(err instanceof StoppedBeforeLock)) throw err;
    log.warn({ err: err.lastError }, err.message);
    process.stderr.write(`cronsafe: ${escapeControls(err.message)}: nothing was claimed\n`);
    await events.flush(opts.stop);
    log.info({ outcome: 'drained', exitCode: EXIT.TEMPFAIL }, 'run finished');
    return 'drained';
  }
  const skipped = { config, store, log, opts, events };
  if (!lock) return skipLocked({ ...skipped, held });
  // The pass and everything it needs (the runner, handlers, outputs, metrics), only now:
  // a start that finds the lock held is done without loading them (docs/benchmarks.md).
  const { runHoldingLock } = await import('./holding-lock.js').catch(async (err: unknown) => {
    await lock.release(); // a broken install: the daemon's next occurrence must not find it held
    throw err;
  });
  const skip = (lease?: string, live?: RunHeartbeat) => skipLocked(skipped, lease, live);
  return runHoldingLock({ config, store, log, opts, runId, owner, events, lock, skip });
}
