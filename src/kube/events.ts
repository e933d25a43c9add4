/**
 * Kubernetes Events (opt-in `events.enabled`) for what an operator should see in
 * `kubectl describe job|cronjob`: a start skipped because another run holds the lock, an
 * overrun, a dead letter. core/v1 Events on the pod's Job and, when the Job has one, its
 * CronJob (its uid is what `kubectl describe` matches on). Messages may name an item id;
 * metric labels never do.
 *
 * Best effort: posts are not awaited by the run (flush() at the end waits for those in
 * flight). A refusal that will not change during the run (403 without RBAC, 401, 404, 400,
 * 422) turns Events off for the rest of the run with one log line. A failure that passes
 * (429, 5xx, a timeout, an API server unreachable for a moment) costs that Event only:
 * tried again once a moment later (not after a flush() that ends a stopped run), then
 * skipped with one log line per streak of failures, and the next Events are posted as usual.
 */
import { hostname } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import type * as K8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Config } from '../config/types.js';
import type { PassObserver } from '../runner/pass.js';
import { escapeControls, escapeInvisible } from '../terminal-safe.js';
import { API_TIMEOUT_MS, apiFailure, connectKube, requestTimeoutMs, type ApiFailure, type Kube } from './client.js';
import { cronJobOf, findJobRef, readJob, type ObjectRef } from './workload.js';

/** What a run reports as Events. No method throws. */
export interface EventSink {
  /** This start was skipped: another run holds the lock (`detail` says which lock). */
  skipped(detail?: string): void;
  /** An occurrence came due while this run was still active. */
  overrun(occurrence: Date): void;
  deadLettered(id: string, error: string): void;
  /**
   * Wait for the Events in flight. Once `stop` is aborted (SIGTERM: the run must end before
   * the kubelet's SIGKILL), now or while waiting, no Event is tried again and those in
   * flight are cut at the margin's bound.
   */
  flush(stop?: AbortSignal): Promise<void>;
}

export const noEvents: EventSink = {
  skipped: () => undefined,
  overrun: () => undefined,
  deadLettered: () => undefined,
  flush: async () => undefined,
};

export const REASONS = { skipped: 'CronsafeSkipped', overrun: 'CronsafeOverrun', deadLetter: 'CronsafeDeadLetter' } as const;

/** Per reason and run: a poison batch must not flood etcd with one Event per item. */
export const MAX_EVENTS_PER_REASON = 10;
const MAX_MESSAGE = 1024;

export interface EventSinkOptions {
  kube: Pick<Kube, 'core' | 'options'>;
  /** Objects each Event is posted on (the Job, then its CronJob). */
  targets: ObjectRef[];
  log: Logger;
  /** reportingInstance: the pod name. */
  instance: string;
  now?: () => number;
  maxPerReason?: number;
  /** How long a stopped flush() waits for the posts in flight (requestTimeoutMs): a stopped run must end before its SIGKILL. */
  endTimeoutMs?: number;
}

/** `ms`, or less when `signal` aborts first. */
const pause = (ms: number, signal?: AbortSignal): Promise<void> => delay(ms, undefined, { signal }).catch(() => undefined);

/** Pause before an Event that met a 429, a 5xx or a timeout is posted again (once). */
export const EVENT_RETRY_MS = 1000;

/** A refusal the run cannot outlive: RBAC (403), credentials (401), a namespace gone (404), a body refused (400, 422). */
const permanent = (f: ApiFailure) => f.kind === 'forbidden' || f.kind === 'unauthorized' || f.kind === 'not-found' || f.kind === 'invalid';

export class KubeEventSink implements EventSink {
  private disabled = false;
  /** A transient failure was logged, and no Event has been posted since. */
  private failing = false;
  /** Aborted by a stopped flush(): no Event is tried again after it (a stopped run is ending). */
  private readonly flushing = new AbortController();
  /** Aborted `endTimeoutMs` into a stopped flush(): the posts still in flight are cut. */
  private readonly cut = new AbortController();
  private readonly pending = new Set<Promise<void>>();
  private readonly counts = new Map<string, number>();
  private readonly max: number;

  constructor(private readonly o: EventSinkOptions) {
    this.max = o.maxPerReason ?? MAX_EVENTS_PER_REASON;
  }

  skipped(detail = 'another run holds the lock'): void {
    this.post(REASONS.skipped, `Start skipped: ${detail}.`);
  }

  overrun(occurrence: Date): void {
    this.post(REASONS.overrun, `The occurrence of ${occurrence.toISOString()} came due while this run was still active.`);
  }

  deadLettered(id: string, error: string): void {
    this.post(REASONS.deadLetter, `Item ${JSON.stringify(id)} was dead-lettered: ${error}`);
  }

  async flush(stop?: AbortSignal): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const stopped = () => {
      this.flushing.abort();
      if (this.o.endTimeoutMs !== undefined) timer ??= setTimeout(() => this.cut.abort(), this.o.endTimeoutMs);
    };
    if (stop?.aborted) stopped();
    else stop?.addEventListener('abort', stopped, { once: true });
    await Promise.allSettled([...this.pending]);
    stop?.removeEventListener('abort', stopped);
    clearTimeout(timer);
  }

  private post(reason: string, message: string): void {
    if (this.disabled) return;
    const n = (this.counts.get(reason) ?? 0) + 1;
    this.counts.set(reason, n);
    if (n > this.max + 1) return;
    // A handler's error, an id or a lease holder, escaped as the log escapes them: raw, its
    // ESC or C1 controls would drive the terminal of whoever runs `kubectl describe`; and as
    // the text listings show them, the characters a terminal does not show (`invoice<RLO>gpj.exe`
    // read `invoiceexe.jpg`, `a<ZWSP>.txt` read `a.txt`).
    const text = n <= this.max ? escapeInvisible(escapeControls(message)) : `More than ${this.max} ${reason} Events in this run; the rest are only logged (see \`cronsafe status\` and \`cronsafe dead-letter list\`).`;
    for (const target of this.o.targets) {
      const p = this.create(target, reason, text).finally(() => this.pending.delete(p));
      this.pending.add(p);
    }
  }

  private async create(target: ObjectRef, reason: string, message: string): Promise<void> {
    const now = new Date((this.o.now ?? Date.now)());
    const body: K8s.CoreV1Event = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { generateName: `${target.name}.`, namespace: target.namespace },
      involvedObject: { ...target },
      reason,
      message: message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE - 3)}...` : message,
      type: 'Warning',
      source: { component: 'cronsafe' },
      reportingComponent: 'cronsafe',
      reportingInstance: this.o.instance,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    };
    for (let tried = false; ; tried = true) {
      if (this.disabled) return;
      try {
        await this.o.kube.core.createNamespacedEvent({ namespace: target.namespace, body }, this.o.kube.options(undefined, this.cut.signal));
        this.failing = false;
        return;
      } catch (err) {
        const f = apiFailure(err);
        if (permanent(f)) return this.disable(f);
        // A 429, a 5xx, a timeout, a refused connection (an API server restarting): this
        // Event is tried again once, a moment later. (It turned Events off for the whole run.)
        if (tried || this.flushing.signal.aborted) return this.skip(f);
        await pause(EVENT_RETRY_MS, this.flushing.signal);
        if (this.flushing.signal.aborted) return this.skip(f);
      }
    }
  }

  private skip(f: ApiFailure): void {
    if (this.failing || this.disabled) return;
    this.failing = true;
    this.o.log.warn({ reason: f.message }, 'Kubernetes Events: an Event could not be posted and is skipped; the next ones are tried as usual');
  }

  private disable(f: ApiFailure): void {
    if (this.disabled) return;
    this.disabled = true;
    const hint = f.kind === 'forbidden' ? ' (grant `create` on `events`; the chart does with events.enabled)' : '';
    this.o.log.warn({ reason: f.message }, `Kubernetes Events disabled for the rest of this run${hint}`);
  }
}

/**
 * The run's EventSink: a no-op unless `events.enabled`. Finding the Job (and its CronJob)
 * happens here, once; when it cannot be found there is nothing to post on, so Events are
 * off for the run, said in one line.
 */
export async function openEventSink(config: Config, log: Logger, env: NodeJS.ProcessEnv = process.env, stop?: AbortSignal): Promise<EventSink> {
  if (!config.events?.enabled) return noEvents;
  const off = (reason: string) => {
    log.warn({ reason }, 'Kubernetes Events disabled for this run');
    return noEvents;
  };
  // Each call may take the API's 5 s: cut at a quarter of the drain margin (1.25 s), on an
  // API server under load the Job read failed (no CronJob) and no Event arrived. Only the
  // end of a stopped run cuts the posts still in flight that soon (flush).
  const c = await connectKube({ env, timeoutMs: API_TIMEOUT_MS });
  if (!c.ok) return off(c.reason);
  // A SIGTERM cuts the reads short: each may take 5 s of the grace period otherwise.
  const job = await findJobRef(c.kube, stop);
  if (!job.ok) return off(job.reason);
  const targets = [job.value];
  // The Job names its CronJob and its own uid; without `get jobs` Events go on the Job only.
  const read = await readJob(c.kube, job.value, stop);
  if (read.ok) {
    job.value.uid ??= read.value.metadata?.uid;
    const cronJob = cronJobOf(read.value);
    if (cronJob) targets.push(cronJob);
  } else {
    log.info({ reason: read.reason }, 'Kubernetes Events: posting on the Job only (its CronJob is unknown)');
  }
  return new KubeEventSink({ kube: c.kube, targets, log, instance: c.kube.identity.podName ?? hostname(), endTimeoutMs: requestTimeoutMs(config) });
}

/** The pass observer, also telling `events` about each dead letter. */
export function withDeadLetterEvents(observer: PassObserver, events: EventSink): PassObserver {
  if (events === noEvents) return observer;
  return {
    attempt: (outcome, durationMs) => observer.attempt(outcome, durationMs),
    ...(observer.live ? { live: (read) => observer.live?.(read) } : {}),
    deadLettered: (id, error) => {
      observer.deadLettered?.(id, error);
      events.deadLettered(id, error);
    },
  };
}
