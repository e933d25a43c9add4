/** `cronsafe daemon`'s engine: a run per occurrence of schedule.cron, until stopped. */
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Config } from '../config/types.js';
import { coerceError, StateUnavailable } from '../errors.js';
import { openStore } from '../ledger/open.js';
import type { Ledger } from '../ledger/types.js';
import { ownFiles } from '../runner/own-files.js';
import { batches, scanDirectory } from '../runner/scan.js';
import { runDaemon, type DaemonClock } from '../schedule/daemon.js';
import { executeRun } from './execute.js';
import { exitCodeFor } from './outcome.js';

/** Ids looked up per query by the growth check. */
const GROWTH_BATCH = 256;

const realClock: DaemonClock = {
  now: () => Date.now(),
  sleep: (ms, signal) => delay(ms, undefined, { signal }).catch(() => undefined),
};

/** Run each occurrence of `config.schedule` until `stop`; the exit code (0 once stopped). */
export async function runScheduled(config: Config, log: Logger, signals: { stop: AbortSignal; force: AbortSignal }): Promise<number> {
  const store = openStore(config);
  const ledger = await store.openLedger();
  // The daemon's own reads name the store as a run's do (StateUnavailable), so that it waits an outage out.
  const reading = <T>(doing: string, read: () => Promise<T>) => read().catch((err: unknown) => Promise.reject(store.unavailable(doing, err)));
  let unscannable = false; // the growth check could not scan the source last time (logged once)
  try {
    const result = await runDaemon({
      config,
      log,
      stop: signals.stop,
      clock: realClock,
      lastRunStart: () => reading('read the last run', async () => (await ledger.lastRunStart())?.startedAt ?? null),
      pass: (occurrence, trigger) =>
        executeRun(config, log, { stop: signals.stop, force: signals.force, scheduledTime: occurrence, policy: 'vixie', growth: trigger === 'growth' }),
      sourceGrew: () =>
        sourceGrew(config, ledger, (read) => reading('look for new files', read)).then(
          (grew) => {
            unscannable = false;
            return grew;
          },
          (err: unknown) => {
            // Not the store's outage: a source that cannot be scanned (unmounted, removed) is the
            // environment's fault, which the next occurrence's pass reports and stops on.
            if (err instanceof StateUnavailable) throw err;
            if (!unscannable) log.warn({ err: coerceError(err).message }, 'daemon: cannot look for new files in the source; the next occurrence runs as scheduled');
            unscannable = true;
            return false;
          },
        ),
    });
    log.info({ result }, 'daemon stopped');
    return result === 'stopped' ? 0 : exitCodeFor(result);
  } finally {
    await ledger.close();
  }
}

/**
 * True when the source holds a file the ledger has not seen: new work arrived. More files
 * than known items settles it without a look-up; otherwise each batch of ids is looked up
 * (done files may have left the source, as in an inbox, so counts alone cannot tell). The
 * scan stops at the first new file: at most one pass over the directory. Only the ledger's
 * reads go through `fromLedger` (StateUnavailable): a scan's error is the source's.
 */
async function sourceGrew(config: Config, ledger: Ledger, fromLedger: <T>(read: () => Promise<T>) => Promise<T>): Promise<boolean> {
  const c = await fromLedger(() => ledger.counts());
  const known = c.pending + c.claimed + c.done + c.dead;
  let seen = 0;
  for await (const batch of batches(scanDirectory({ ...config.source, skipPaths: ownFiles(config) }), GROWTH_BATCH)) {
    seen += batch.length;
    if (seen > known) return true;
    if ((await fromLedger(() => ledger.peek(batch.map((i) => i.id)))).length < batch.length) return true;
  }
  return false;
}
