/** `cronsafe daemon`'s engine: a run per occurrence of schedule.cron, until stopped. */
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Config } from '../config/types.js';
import { openStore } from '../ledger/open.js';
import type { Ledger } from '../ledger/types.js';
import { ownFiles } from '../runner/own-files.js';
import { scanDirectory } from '../runner/scan.js';
import { runDaemon, type DaemonClock } from '../schedule/daemon.js';
import { executeRun } from './execute.js';
import { exitCodeFor } from './outcome.js';

const realClock: DaemonClock = {
  now: () => Date.now(),
  sleep: (ms, signal) => delay(ms, undefined, { signal }).catch(() => undefined),
};

/** Run each occurrence of `config.schedule` until `stop`; the exit code (0 once stopped). */
export async function runScheduled(config: Config, log: Logger, signals: { stop: AbortSignal; force: AbortSignal }): Promise<number> {
  const ledger = await openStore(config).openLedger();
  try {
    const result = await runDaemon({
      config,
      log,
      stop: signals.stop,
      clock: realClock,
      lastRunStart: async () => (await ledger.lastRunStart())?.startedAt ?? null,
      pass: (occurrence, trigger) =>
        executeRun(config, log, { stop: signals.stop, force: signals.force, scheduledTime: occurrence, policy: 'vixie', growth: trigger === 'growth' }),
      sourceGrew: () => sourceGrew(config, ledger),
    });
    log.info({ result }, 'daemon stopped');
    return result === 'stopped' ? 0 : exitCodeFor(result);
  } finally {
    await ledger.close();
  }
}

/**
 * True when the source holds more files than the ledger knows items: new work arrived.
 * The scan stops as soon as it has seen one more file than that, so it costs at most one
 * pass over the directory, and usually much less.
 */
async function sourceGrew(config: Config, ledger: Ledger): Promise<boolean> {
  const c = await ledger.counts();
  const known = c.pending + c.claimed + c.done + c.dead;
  let seen = 0;
  for await (const _ of scanDirectory({ ...config.source, skipPaths: ownFiles(config) })) {
    if (++seen > known) return true;
  }
  return false;
}
