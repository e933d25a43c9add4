/**
 * The occurrence a CronJob's Job was created for, from the annotation the CronJob
 * controller puts on it (Kubernetes 1.28+): `batch.kubernetes.io/cronjob-scheduled-timestamp`,
 * RFC 3339 with offset. Opt-in (`scheduledTimestamp.enabled`): it needs `get jobs`. Without
 * it a run identifies its fire as the latest occurrence at start, which is wrong for a Job
 * that started late (a pending pod, a slow image pull) past the next occurrence.
 */
import type { Logger } from 'pino';
import type { Config } from '../config/types.js';
import { coerceError } from '../errors.js';
import { parseScheduledTime, refuseAhead } from '../schedule/fire.js';
import { API_TIMEOUT_MS, connectKube } from './client.js';
import { findJobRef, readJob } from './workload.js';

export const SCHEDULED_TIMESTAMP_ANNOTATION = 'batch.kubernetes.io/cronjob-scheduled-timestamp';
/** What `kubectl create job --from=cronjob/...` puts on the Job it makes. */
export const MANUAL_ANNOTATION = 'cronjob.kubernetes.io/instantiate';

/** What the Job says about the fire: its scheduled time, or that a person made it. */
export interface JobFire {
  scheduledTime?: Date;
  /**
   * Made by hand (`kubectl create job --from=cronjob/...`): not a fire of the schedule, so
   * never refused as stale or as the repeated fall-back fire (it belongs to the latest
   * occurrence, as a daemon's growth pass does).
   */
  manual?: boolean;
}

/**
 * The Job's scheduled time, or none (said in one log line) when the feature is off, the Job
 * cannot be read, or it has no such annotation. A Job made by hand with `kubectl create job
 * --from=cronjob/...` has none, but says so (MANUAL_ANNOTATION): `manual`. Never throws.
 */
export async function scheduledTimeFromJob(config: Config, log: Logger, env: NodeJS.ProcessEnv = process.env, stop?: AbortSignal): Promise<JobFire> {
  if (!config.scheduledTimestamp?.enabled) return {};
  const fallback = (reason: string, level: 'info' | 'warn' = 'warn'): JobFire => {
    log[level]({ reason }, 'scheduled time: not read from the Job annotation; using the latest occurrence at start');
    return {};
  };
  const c = await connectKube({ env, timeoutMs: API_TIMEOUT_MS });
  if (!c.ok) return fallback(c.reason);
  // A SIGTERM cuts the reads short: each may take 5 s of the grace period otherwise.
  const ref = await findJobRef(c.kube, stop);
  if (!ref.ok) return fallback(ref.reason);
  const job = await readJob(c.kube, ref.value, stop);
  if (!job.ok) return fallback(job.reason);
  const annotations = job.value.metadata?.annotations;
  const value = annotations?.[SCHEDULED_TIMESTAMP_ANNOTATION];
  if (!value && annotations?.[MANUAL_ANNOTATION] === 'manual') {
    log.info({ job: ref.value.name }, 'a Job made by hand (kubectl create job --from): not a fire of the schedule, so never refused as stale; it belongs to the latest occurrence');
    return { manual: true };
  }
  if (!value) {
    return fallback(`Job ${ref.value.name} has no ${SCHEDULED_TIMESTAMP_ANNOTATION} annotation (made by hand, or Kubernetes < 1.28)`, 'info');
  }
  try {
    const from = `Job ${ref.value.name} annotation ${SCHEDULED_TIMESTAMP_ANNOTATION}`;
    const at = refuseAhead(parseScheduledTime(value, from), from, new Date());
    log.info({ scheduledTime: at.toISOString(), job: ref.value.name }, 'scheduled time read from the Job annotation');
    return { scheduledTime: at };
  } catch (err) {
    return fallback(coerceError(err).message);
  }
}
