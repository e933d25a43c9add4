import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import { checkFilesystems } from '../config/filesystems.js';
import { loadConfig } from '../config/load.js';
import type { Config } from '../config/types.js';
import { ConfigError } from '../errors.js';
import type { Ledger } from '../ledger/types.js';
import { createLogger } from '../log.js';
import { scanDirectory } from '../runner/scan.js';
import { runDaemon, type DaemonClock } from '../schedule/daemon.js';
import { openState } from '../ledger/open.js';
import { executeRun, exitCodeFor } from './run.js';
import { ownFiles } from '../runner/own-files.js';

const realClock: DaemonClock = {
  now: () => Date.now(),
  sleep: (ms, signal) => delay(ms, undefined, { signal }).catch(() => undefined),
};

/** `cronsafe daemon`: stay up and run each occurrence of schedule.cron. Returns the exit code. */
export async function daemonCommand(opts: { configPath: string; stop: AbortSignal; force: AbortSignal; logger?: Logger }): Promise<number> {
  const config = loadConfig(opts.configPath);
  if (!config.schedule) throw new ConfigError(`${config.configPath}: schedule: cronsafe daemon needs schedule.cron`, config.configPath, 'schedule');
  checkFilesystems(config); // at once, not at the first occurrence (each run checks again)
  const log = (opts.logger ?? createLogger(config.log)).child({ job: config.name, daemon: true });
  const ledger = await openState(config);
  try {
    const result = await runDaemon({
      config,
      log,
      stop: opts.stop,
      clock: realClock,
      lastRunStart: async () => (await ledger.lastRunStart())?.startedAt ?? null,
      pass: (occurrence) => executeRun(config, log, { stop: opts.stop, force: opts.force, scheduledTime: occurrence, policy: 'vixie' }),
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
