/**
 * What a run comes to and the exit code it maps to, shared by execute.ts (the lock) and
 * holding-lock.ts (the pass), so that neither imports the other's module statically.
 */
import { EXIT } from '../errors.js';
import type { MetricsSlot } from '../metrics/index.js';
import type { PassOutcome } from '../runner/pass.js';
import type { SchedulePolicy } from '../schedule/occurrences.js';
import { escapeControls } from '../terminal-safe.js';

/** What one execution needs beyond the config (the daemon calls executeRun per occurrence). */
export interface ExecuteOptions {
  stop: AbortSignal;
  force: AbortSignal;
  /** The occurrence this run is for, when known (else the latest occurrence at start). */
  scheduledTime?: Date;
  /** `kubernetes` under a CronJob, `vixie` under cronsafe daemon. */
  policy: SchedulePolicy;
  /**
   * Started by the daemon's growth trigger between occurrences: not a fire, so never refused
   * as stale or as the repeated fall-back fire (it belongs to the latest occurrence).
   */
  growth?: boolean;
  /**
   * A Job made by hand (`kubectl create job --from=cronjob/...`, known from its annotation):
   * not a fire either, so never refused, as a growth pass.
   */
  manual?: boolean;
  /** `cronsafe daemon` serves metrics.port for its whole life: the run shows its metrics there (metrics/index.ts). */
  served?: MetricsSlot;
  /** `cronsafe daemon` could not listen on metrics.port and has warned: the run tries it quietly. */
  metricsPortHeld?: boolean;
  /**
   * Told when the run drains because what it relies on was lost (its run lock or Lease), not
   * on a signal: cli.ts then keeps the drain's last resort as for a SIGTERM at that moment, so
   * that a ledger write hanging on a database gone silent (packets dropped, no reset) cannot
   * keep the process, and the Job with it, alive past the drain.
   */
  safetyLost?: () => void;
}

export type RunResult = PassOutcome | 'skipped-locked' | 'stale';

const EXIT_FOR: Record<RunResult, number> = {
  completed: EXIT.OK,
  drained: EXIT.TEMPFAIL,
  failed: EXIT.FATAL,
  'skipped-locked': EXIT.OK,
  stale: EXIT.OK,
};

export const exitCodeFor = (r: RunResult): number => EXIT_FOR[r];

/**
 * The one line a failed run leaves on stderr beside its JSON log (which goes to stdout for
 * the cluster's pipeline): a person at a terminal, or a wrapper that keeps only stderr,
 * still gets the reason. Control characters are escaped (a message may quote a file name).
 */
export function sayRunFailed(message: string): void {
  process.stderr.write(`cronsafe: run failed: ${escapeControls(message)}\n`);
}
