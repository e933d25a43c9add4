import type { Logger } from 'pino';
import { loadConfig } from '../config/load.js';
import { createLogger } from '../log.js';
import { scheduledTimeFromJob } from '../kube/scheduled-time.js';
import { executeRun } from '../run/execute.js';
import { exitCodeFor } from '../run/outcome.js';
import { parseScheduledTime, refuseAhead } from '../schedule/fire.js';

export interface RunOptions {
  configPath: string;
  stop: AbortSignal;
  force: AbortSignal;
  /** --scheduled-time (RFC 3339); else CRONSAFE_SCHEDULED_TIME. */
  scheduledTime?: string;
  /** Tests inject a logger; otherwise one is made from config.log. */
  logger?: Logger;
  /** Told drain.gracePeriodSeconds and marginSeconds (ms) once the config is loaded (ProgramSignals). */
  drainBudget?: (graceMs: number, marginMs: number) => void;
  /** Told when the run drains on a lost run lock or Lease (ExecuteOptions.safetyLost). */
  safetyLost?: () => void;
}

/** `cronsafe run`: one pass (run/execute.ts). Returns the exit code (cli.ts exits with it). */
export async function runCommand(opts: RunOptions): Promise<number> {
  const config = loadConfig(opts.configPath);
  opts.drainBudget?.(config.drain.gracePeriodSeconds * 1000, config.drain.marginSeconds * 1000);
  // An empty variable is unset (as the shell's ${VAR:-}); an empty flag is a bad value (exit 2).
  const raw = opts.scheduledTime ?? (process.env.CRONSAFE_SCHEDULED_TIME || undefined);
  const from = opts.scheduledTime !== undefined ? '--scheduled-time' : 'CRONSAFE_SCHEDULED_TIME';
  // The job on the root logger: a line it logs itself (the log's dropped-lines warning) names it too.
  const log = opts.logger ?? createLogger(config.log, undefined, { job: config.name });
  // Given explicitly it wins; else the Job's annotation, when scheduledTimestamp.enabled.
  const fire = raw !== undefined ? { scheduledTime: refuseAhead(parseScheduledTime(raw, from), from, new Date()) } : await scheduledTimeFromJob(config, log, process.env, opts.stop);
  return exitCodeFor(await executeRun(config, log, { stop: opts.stop, force: opts.force, scheduledTime: fire.scheduledTime, manual: fire.manual, policy: 'kubernetes', ...(opts.safetyLost ? { safetyLost: opts.safetyLost } : {}) }));
}
