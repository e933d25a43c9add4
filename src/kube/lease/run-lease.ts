/**
 * The run's use of the Lease lock (lock.kubernetesLease): connect, acquire, and turn the
 * outcome into what executeRun needs: hold it, skip (another run holds it), or run on
 * the local lock alone when the API cannot be used.
 */
import { hostname } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Config } from '../../config/types.js';
import { API_TIMEOUT_MS, connectKube, requestTimeoutMs, SERVICE_ACCOUNT_DIR, type PodIdentity } from '../client.js';
import { acquireLease, releaseIfOurs, type HeldLease, type LeaseLockOptions } from './lock.js';

export interface RunLease {
  /** Held for this run: release() it at the end; `lost` aborts if it is taken away. */
  held?: HeldLease;
  /**
   * Not held, but a write of the acquire got no answer and may have taken it: called at the
   * end of the run (instead of held.release()), it releases the Lease if it names this run.
   */
  leftover?: () => Promise<void>;
  /** Another run holds it: skip, with this as the reason. */
  skip?: string;
}

/**
 * Degrading on an unusable API (403, unreachable) rather than skipping: a skip is exit 0
 * and would hide missing RBAC behind runs that never work; running on the local lock keeps
 * today's guarantees, and the ledger's fenced claims still keep two runs from committing
 * the same item twice.
 */
export async function acquireRunLease(
  config: Config,
  log: Logger,
  runId: string,
  stop?: AbortSignal,
  env: NodeJS.ProcessEnv = process.env,
  force?: AbortSignal,
): Promise<RunLease> {
  const kl = config.lock.kubernetesLease;
  if (!kl) return {};
  const degraded = (reason: string): RunLease => {
    log.warn({ lease: kl.name, reason }, 'Kubernetes Lease unavailable: this run relies on the local lock only');
    return {};
  };
  const c = await connectKube({ env, timeoutMs: API_TIMEOUT_MS });
  if (!c.ok) return degraded(c.reason);
  const namespace = kl.namespace ?? c.kube.namespace;
  const identity = `${c.kube.identity.podName ?? hostname()}/${runId}`;
  // When the run was stopped (SIGTERM), on the monotonic clock; unknown if it came before this.
  // The listener goes with the Lease: a daemon's runs share one stop signal.
  let stoppedMono: number | undefined;
  const stopped = () => (stoppedMono = performance.now());
  if (stop && !stop.aborted) stop.addEventListener('abort', stopped, { once: true });
  const forget = () => stop?.removeEventListener('abort', stopped);
  const lockOptions: LeaseLockOptions = {
    kube: c.kube,
    name: kl.name,
    namespace,
    identity,
    durationSeconds: kl.durationSeconds,
    renewSeconds: kl.renewSeconds,
    releaseTimeoutMs: () => {
      forget();
      return releaseBoundMs(config, { stop, force, stoppedMono });
    },
    log,
    stop,
  };
  let r = await acquireLease(lockOptions);
  const wait = r.status === 'held' ? earlierPodWait(r.holder, r.expiresAt, c.kube.identity, kl.durationSeconds) : undefined;
  if (r.status === 'held' && wait !== undefined) {
    log.info(
      { lease: kl.name, holder: r.holder, expiresAt: r.expiresAt?.toISOString() },
      'Kubernetes Lease: held by an earlier pod of this Job, which has failed (a Job replaces a pod only then, and that pod could not release it): waiting for it to expire',
    );
    await delay(wait, undefined, { signal: stop }).catch(() => undefined);
    // Read again: a holder that renewed meanwhile is alive after all (a pod still
    // terminating, where a Job may start its replacement sooner) and is left alone.
    r = stop?.aborted ? { status: 'stopped' } : await acquireLease(lockOptions);
  }
  const leftover = (r.status === 'unavailable' || r.status === 'stopped') && r.unanswered ? () => releaseIfOurs(lockOptions).catch(() => undefined) : undefined;
  if (r.status === 'acquired') r.lease.lost.addEventListener('abort', forget, { once: true });
  else if (!leftover) forget();
  if (r.status === 'acquired') {
    log.info({ lease: kl.name, namespace, holder: identity, durationSeconds: kl.durationSeconds }, 'Kubernetes Lease acquired');
    return { held: r.lease };
  }
  // The pass that follows sees the stop and claims nothing.
  if (r.status === 'stopped') return leftover ? { leftover } : {};
  if (r.status === 'held') {
    const until = r.expiresAt ? ` until ${r.expiresAt.toISOString()} unless renewed` : '';
    return { skip: `the Kubernetes Lease ${namespace}/${kl.name} is held by ${r.holder ?? 'another run'}${until}` };
  }
  // RBAC is granted in the pod's namespace: a pod that could not tell its namespace (no
  // downward API env, a projected token without the namespace file) asked in `default`.
  const guessed = kl.namespace === undefined && c.kube.namespaceGuessed
    ? `; the namespace is "default" only because none was found (no CRONSAFE_POD_NAMESPACE or POD_NAMESPACE, no ${SERVICE_ACCOUNT_DIR}/namespace, no kubeconfig context namespace): set lock.kubernetesLease.namespace or CRONSAFE_POD_NAMESPACE`
    : '';
  const hint = r.failure.kind === 'forbidden' ? ` (grant get, update and create on leases; the chart does with lock.kubernetesLease.enabled${guessed})` : '';
  return { ...degraded(`${r.failure.message}${hint}`), ...(leftover ? { leftover } : {}) };
}

/**
 * How long the release at the end of the run may take. Cut at a quarter of the drain margin
 * (1.25 s by default) whatever happened, a release on an API server answering in 1.5 s
 * gave up, and the Lease stayed held: the next run skipped until it expired. A run that
 * ends without a stop has no SIGKILL coming: the API calls' own 5 s. A stopped run has
 * until the drain ends (gracePeriodSeconds after the stop) less half the margin, for the
 * exit and the lines after it; at least the quarter of the margin it always had, and no
 * more after a second signal (which ends the run a margin later).
 */
export function releaseBoundMs(
  config: Pick<Config, 'drain'>,
  run: { stop?: AbortSignal; force?: AbortSignal; stoppedMono?: number },
  nowMono = performance.now(),
): number {
  const { stop, force, stoppedMono } = run;
  if (!stop?.aborted && !force?.aborted) return API_TIMEOUT_MS;
  const floor = requestTimeoutMs(config);
  if (stoppedMono === undefined || force?.aborted) return floor;
  const { gracePeriodSeconds, marginSeconds } = config.drain;
  const left = stoppedMono + (gracePeriodSeconds - marginSeconds / 2) * 1000 - nowMono;
  return Math.min(API_TIMEOUT_MS, Math.max(floor, left));
}

/** The characters of the 5 a name generator appends (names.SimpleNameGenerator), as to a Job's pods. */
const GENERATED_SUFFIX = /^[bcdfghjklmnpqrstvwxz2456789]{5}$/;

/**
 * How long to wait (ms) for a Lease that an earlier pod of this pod's own Job holds, else
 * undefined (skip now, as for any holder). The Job controller names its pods `<job>-` (cut at
 * 58 characters) and 5 generated characters, and with a podFailurePolicy (the chart's, the
 * manifests') starts a replacement only once the pod before has failed: that holder was
 * killed (OOM, its node lost) and can renew no more. Skipped, the retry exited 0, the Job
 * counted as succeeded and the backlog waited for the next fire. Only a Lease that expires
 * within our own duration is waited for; after the wait it is read again (a holder that
 * renewed is alive, and is not taken).
 */
export function earlierPodWait(holder: string | undefined, expiresAt: Date | undefined, me: PodIdentity, durationSeconds: number, now = Date.now()): number | undefined {
  if (!holder || !expiresAt || !me.jobName) return undefined;
  const pod = holder.split('/')[0] ?? '';
  const prefix = `${me.jobName}-`.slice(0, 58);
  if (pod === me.podName || !pod.startsWith(prefix) || !GENERATED_SUFFIX.test(pod.slice(prefix.length))) return undefined;
  const left = expiresAt.getTime() - now;
  if (left > durationSeconds * 1000) return undefined;
  // A moment past the expiry, so that the read after it finds it expired by our clock.
  return Math.max(0, left) + 250;
}
