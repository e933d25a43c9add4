/**
 * Which Job (and CronJob) this process runs for. The chart hands the pod its Job's name
 * and uid through the downward API (CRONSAFE_JOB_NAME / CRONSAFE_JOB_UID, from the
 * `batch.kubernetes.io/job-name` and `controller-uid` labels), so no API call is needed for
 * that; without them the pod itself is read (CRONSAFE_POD_NAME, needs `get pods`) and its
 * controlling ownerReference followed.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type * as K8s from '@kubernetes/client-node';
import { apiFailure, type Kube } from './client.js';

/** What an Event's involvedObject names. */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
  uid?: string;
}

export type Found<T> = { ok: true; value: T } | { ok: false; reason: string };

const STOPPED = 'the run was stopped before the API server answered';

type KubeReads = Pick<Kube, 'core' | 'batch' | 'namespace' | 'identity' | 'options'>;

/** This pod's Job, from the env, else from the pod's ownerReferences. */
export async function findJobRef(kube: KubeReads, stop?: AbortSignal): Promise<Found<ObjectRef>> {
  const { identity, namespace } = kube;
  if (identity.jobName) {
    return { ok: true, value: { apiVersion: 'batch/v1', kind: 'Job', name: identity.jobName, namespace, ...(identity.jobUid ? { uid: identity.jobUid } : {}) } };
  }
  if (!identity.podName) {
    return { ok: false, reason: "not in a Job's pod: neither CRONSAFE_JOB_NAME nor CRONSAFE_POD_NAME is set (the chart sets both through the downward API)" };
  }
  const podName = identity.podName;
  const read = await retrying(() => kube.core.readNamespacedPod({ name: podName, namespace }, kube.options(undefined, stop)), stop);
  if (!read.ok) return { ok: false, reason: `cannot read pod ${namespace}/${podName} to find its Job: ${read.reason}` };
  const pod = read.value;
  const owner = controllerOf(pod.metadata?.ownerReferences, 'Job');
  if (!owner) return { ok: false, reason: `pod ${namespace}/${identity.podName} is not controlled by a Job` };
  return { ok: true, value: { apiVersion: owner.apiVersion, kind: 'Job', name: owner.name, namespace, uid: owner.uid } };
}

/** Tries of a read at the start answered 429 or 5xx (or refused or cut), READ_RETRY_MS apart. */
export const READ_TRIES = 3;
export const READ_RETRY_MS = 1000;

/**
 * A read at the start (the pod, the Job): a 429 (API Priority and Fairness) or a 5xx is
 * tried again, as client-go does with such answers; so is a connection refused or cut (an
 * API server restarting), as client-go tries a GET again after a reset or an EOF. Taken at
 * once for "cannot read", one such answer lost the run its scheduled time (a manual Job was
 * then judged a stale fire and skipped, exit 0) and its CronJob's Events. A timeout is not
 * tried again: it has taken its 5 s already. `stop` (SIGTERM) cuts it short.
 */
async function retrying<T>(read: () => Promise<T>, stop?: AbortSignal): Promise<Found<T>> {
  for (let tried = 1; ; tried++) {
    try {
      return { ok: true, value: await read() };
    } catch (err) {
      const f = apiFailure(err);
      const passing = f.kind === 'unreachable' || (f.kind === 'server' && f.status !== undefined && (f.status === 429 || f.status >= 500));
      const again = !stop?.aborted && tried < READ_TRIES && passing;
      if (again) await delay(READ_RETRY_MS, undefined, { signal: stop }).catch(() => undefined);
      if (!again || stop?.aborted) return { ok: false, reason: stop?.aborted ? STOPPED : f.message };
    }
  }
}

/** Read the Job (`get jobs`), trying a 429, a 5xx or a refused or cut connection again; `stop` (SIGTERM) cuts it short. */
export async function readJob(kube: KubeReads, job: ObjectRef, stop?: AbortSignal): Promise<Found<K8s.V1Job>> {
  const read = await retrying(() => kube.batch.readNamespacedJob({ name: job.name, namespace: job.namespace }, kube.options(undefined, stop)), stop);
  return read.ok ? read : { ok: false, reason: `cannot read Job ${job.namespace}/${job.name}: ${read.reason}` };
}

/** The CronJob that made this Job, if any (a Job from `kubectl create job` without --from has none). */
export function cronJobOf(job: K8s.V1Job): ObjectRef | undefined {
  const owner = controllerOf(job.metadata?.ownerReferences, 'CronJob');
  const namespace = job.metadata?.namespace;
  if (!owner || !namespace) return undefined;
  return { apiVersion: owner.apiVersion, kind: 'CronJob', name: owner.name, namespace, uid: owner.uid };
}

function controllerOf(refs: K8s.V1OwnerReference[] | undefined, kind: string): K8s.V1OwnerReference | undefined {
  const ofKind = (refs ?? []).filter((r) => r.kind === kind);
  return ofKind.find((r) => r.controller) ?? ofKind[0];
}
