/**
 * The run's use of the Lease lock (lock.kubernetesLease): connect, acquire, and turn the
 * outcome into what executeRun needs: hold it, skip (another run holds it), or run on
 * the local lock alone when the API cannot be used.
 */
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { Config } from '../../config/types.js';
import { API_TIMEOUT_MS, connectKube, requestTimeoutMs } from '../client.js';
import { acquireLease, type HeldLease } from './lock.js';

export interface RunLease {
  /** Held for this run: release() it at the end; `lost` aborts if it is taken away. */
  held?: HeldLease;
  /** Another run holds it: skip, with this as the reason. */
  skip?: string;
}

/**
 * Degrading on an unusable API (403, unreachable) rather than skipping: a skip is exit 0
 * and would hide missing RBAC behind runs that never work; running on the local lock keeps
 * today's guarantees, and the ledger's fenced claims still keep two runs from committing
 * the same item twice.
 */
export async function acquireRunLease(config: Config, log: Logger, runId: string, stop?: AbortSignal, env: NodeJS.ProcessEnv = process.env): Promise<RunLease> {
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
  const r = await acquireLease({
    kube: c.kube,
    name: kl.name,
    namespace,
    identity,
    durationSeconds: kl.durationSeconds,
    renewSeconds: kl.renewSeconds,
    releaseTimeoutMs: requestTimeoutMs(config),
    log,
    stop,
  });
  if (r.status === 'acquired') {
    log.info({ lease: kl.name, namespace, holder: identity, durationSeconds: kl.durationSeconds }, 'Kubernetes Lease acquired');
    return { held: r.lease };
  }
  // The pass that follows sees the stop and claims nothing.
  if (r.status === 'stopped') return {};
  if (r.status === 'held') {
    const until = r.expiresAt ? ` until ${r.expiresAt.toISOString()} unless renewed` : '';
    return { skip: `the Kubernetes Lease ${namespace}/${kl.name} is held by ${r.holder ?? 'another run'}${until}` };
  }
  const hint = r.failure.kind === 'forbidden' ? ' (grant get, update and create on leases; the chart does with lock.kubernetesLease.enabled)' : '';
  return degraded(`${r.failure.message}${hint}`);
}
