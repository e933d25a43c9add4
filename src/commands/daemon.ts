import type { Logger } from 'pino';
import { checkFilesystems } from '../config/filesystems.js';
import { loadConfig } from '../config/load.js';
import { ConfigError } from '../errors.js';
import { assertDaemonFires } from './daemon-fires.js';
import { createLogger } from '../log.js';
import { runScheduled } from '../run/daemon.js';

/** `cronsafe daemon`: stay up and run each occurrence of schedule.cron (run/daemon.ts). Returns the exit code. */
export async function daemonCommand(opts: {
  configPath: string;
  stop: AbortSignal;
  force: AbortSignal;
  logger?: Logger;
  drainBudget?: (graceMs: number, marginMs: number) => void;
}): Promise<number> {
  const config = loadConfig(opts.configPath);
  opts.drainBudget?.(config.drain.gracePeriodSeconds * 1000, config.drain.marginSeconds * 1000);
  if (!config.schedule) throw new ConfigError(`${config.configPath}: schedule: cronsafe daemon needs schedule.cron`, config.configPath, 'schedule');
  assertDaemonFires(config.configPath, config.schedule.cron);
  checkFilesystems(config); // at once, not at the first occurrence (each run checks again)
  const log = (opts.logger ?? createLogger(config.log, undefined, { job: config.name })).child({ ...(opts.logger ? { job: config.name } : {}), daemon: true });
  return runScheduled(config, log, { stop: opts.stop, force: opts.force });
}
