/**
 * The Kubernetes Lease lock (opt-in `lock.kubernetesLease`): one coordination.k8s.io/v1
 * Lease named after the job, held for the whole pass. It closes what the in-pod flock
 * cannot see: a second pod on another node (`kubectl create job --from`, a pod still
 * terminating) with its own volume or a shared PostgreSQL ledger.
 *
 * Optimistic concurrency only: every write is a replace carrying the resourceVersion we
 * read, so of two contenders who read the same free Lease, the API server lets exactly one
 * write and answers the other 409. Nothing is ever updated blind.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type * as K8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { apiFailure, type ApiFailure, type Kube } from '../client.js';
import { decideAcquire, timeOf } from './state.js';

export interface LeaseLockOptions {
  kube: Pick<Kube, 'k8s' | 'coordination' | 'options'>;
  name: string;
  namespace: string;
  /** holderIdentity: pod name + run id, unique per run. */
  identity: string;
  durationSeconds: number;
  renewSeconds: number;
  /**
   * Bound of the whole release (a renewal in flight, the write, its tries again), asked when
   * the release starts: after a drain it must fit before the kubelet's SIGKILL (run-lease.ts).
   * Else the connection's request timeout.
   */
  releaseTimeoutMs?: number | (() => number);
  log: Logger;
  /** Injected clock (epoch ms). */
  now?: () => number;
  /** The run's stop (SIGTERM): the acquire's reads are cut short, and no write starts after it. */
  stop?: AbortSignal;
  /** How long the acquire tries again after a 429 or 5xx (ACQUIRE_RETRY_MS; tests shorten it). */
  acquireRetryMs?: number;
}

/** After a failed renewal the next try comes this soon (client-go's retryPeriod), or at renewSeconds if sooner. */
export const RENEW_RETRY_SECONDS = 2;

/**
 * How long after its last successful renewal the holder takes its Lease for lost (ms): two
 * thirds of the duration (client-go's defaults: renewDeadline 10 s of a 15 s leaseDuration),
 * so that it stops claiming while nobody can take the Lease yet, with the rest of the
 * duration left for its drain and for the nodes' clocks to differ. Lost only at the expiry,
 * the run claimed up to the moment another pod could take the Lease by its own clock (sooner,
 * if that clock ran ahead), and its drain overlapped that pod's run. Never before two tries
 * after the scheduled renewal (renewSeconds, then two retries), so one failed answer is not
 * a loss; never past the expiry (then the deadline is the expiry, as with renewSeconds close
 * to the duration).
 */
export function renewDeadlineMs(durationSeconds: number, renewSeconds: number): number {
  const tries = renewSeconds + 2 * Math.min(renewSeconds, RENEW_RETRY_SECONDS);
  return Math.min(durationSeconds, Math.max((durationSeconds * 2) / 3, tries)) * 1000;
}

export type LeaseAcquire =
  | { status: 'acquired'; lease: HeldLease }
  /** Another run holds it (or won the race for it): skip like a held local lock. */
  | { status: 'held'; holder?: string; expiresAt?: Date }
  /**
   * The API could not be used (RBAC, unreachable): the caller degrades. `unanswered`: a write
   * of this acquire got no answer (timed out, cut, 5xx) and may have taken the Lease all the
   * same (releaseIfOurs at the end of the run).
   */
  | { status: 'unavailable'; failure: ApiFailure; unanswered?: boolean }
  /** The run was stopped before it took the Lease (`unanswered` as above). */
  | { status: 'stopped'; unanswered?: boolean };

/**
 * How long the acquire keeps trying when the API server answers 429 or 5xx (throttled, or
 * restarting behind its load balancer during a control plane upgrade), every
 * RENEW_RETRY_SECONDS, before the run goes on without the Lease. Such an answer says
 * nothing about who holds the Lease: taken at once for "unavailable", one 503 let a run
 * start beside the run holding it. client-go retries such answers too (Retry-After).
 */
export const ACQUIRE_RETRY_MS = 10_000;
/** Pause before the release's write is tried again after a 429 or 5xx, or a refused or cut connection. */
const RELEASE_RETRY_MS = 250;
/**
 * Writes of one renewal (or release) answered 409 while the Lease, read again, still names
 * this run: then the next try comes RENEW_RETRY_SECONDS later, as after a failed renewal.
 */
const RENEW_REREADS = 3;
/**
 * Rounds of the acquire when the Lease was still free after its write was refused: deleted
 * between the read and the write, or changed by a writer that did not take it.
 */
const ACQUIRE_ROUNDS_WHILE_FREE = 3;

/** An answer that says "try again": throttled (429) or the server's own trouble (5xx). */
const transient = (f: ApiFailure) => f.kind === 'server' && f.status !== undefined && (f.status === 429 || f.status >= 500);
/**
 * For the acquire, also no answer at all: a connection refused or cut (the API server's
 * process restarting during a control plane upgrade), or none in time. That says nothing
 * about who holds the Lease either.
 */
const noAnswer = (f: ApiFailure) => transient(f) || f.kind === 'unreachable' || f.kind === 'timeout';

/**
 * Acquire the Lease: create it if missing, take it over if free or expired, else report the holder.
 * A stop (SIGTERM) aborts the read, and no write starts after it: on an API server answering
 * in seconds, read and write took up to 10 s of the drain's grace period. A write already
 * sent is waited for, so a Lease it took is released at the end rather than left to expire.
 * A 429 or 5xx, or no answer (refused, cut, timed out), is tried again for up to
 * ACQUIRE_RETRY_MS; a Lease deleted between the read and the write, or changed without
 * being taken (kubectl annotate), is read again rather than taken for held.
 */
export async function acquireLease(o: LeaseLockOptions): Promise<LeaseAcquire> {
  const giveUpAt = performance.now() + (o.acquireRetryMs ?? ACQUIRE_RETRY_MS);
  let warned = false;
  // A write answered by no answer in an earlier round: it may have landed (the round after
  // it then finds the Lease naming this run, and takes it, unless that round fails too).
  let unanswered = false;
  const ending = <T extends LeaseAcquire>(r: T): T => (unanswered && (r.status === 'unavailable' || r.status === 'stopped') ? { ...r, unanswered: true } : r);
  // Rounds that found the Lease still free after a refused write, counted apart from those
  // tried again after a 503: counted together, two 503s and one `kubectl annotate` ended the
  // acquire as "held" by nobody, and the run skipped (exit 0) with its backlog left.
  let freeRounds = 0;
  // Every write of this acquire: the Lease naming this run after a 409 was taken by one of them.
  const sent: SentWrite[] = [];
  for (;;) {
    const r = await acquireOnce(o, sent);
    if (r.status === 'again') {
      if (++freeRounds < ACQUIRE_ROUNDS_WHILE_FREE) continue;
      return { status: 'held' };
    }
    if (r.status === 'unavailable' && r.unanswered) unanswered = true;
    if (r.status !== 'unavailable' || !noAnswer(r.failure)) return ending(r);
    if (o.stop?.aborted) return ending({ status: 'stopped' });
    const wait = Math.min(RENEW_RETRY_SECONDS * 1000, giveUpAt - performance.now());
    if (wait <= 0) return ending(r);
    if (!warned) {
      o.log.info({ lease: o.name, err: r.failure.message }, 'Kubernetes Lease: the API server cannot answer now; trying again');
      warned = true;
    }
    await pause(wait, o.stop);
    if (o.stop?.aborted) return ending({ status: 'stopped' });
  }
}

/**
 * The end of a run whose acquire went on without the Lease (or was stopped) after a write
 * that got no answer (acquireLease's `unanswered`): an API server answering after the
 * timeout executes it all the same, and the Lease then named this run, which neither
 * renewed nor released it: every run within its duration skipped as held by a run that had
 * ended. Read it, and release it while it names this run (with the resourceVersion read: a
 * run that took it meanwhile keeps it). Quiet when it does not.
 */
export async function releaseIfOurs(o: LeaseLockOptions): Promise<void> {
  const { kube, name, namespace } = o;
  const bound = typeof o.releaseTimeoutMs === 'function' ? o.releaseTimeoutMs() : o.releaseTimeoutMs;
  const deadline = bound === undefined ? undefined : performance.now() + bound;
  const current = await kube.coordination.readNamespacedLease({ name, namespace }, kube.options(bound)).catch(() => undefined);
  if (current?.spec?.holderIdentity !== o.identity) return;
  const renewedAt = timeOf(current.spec.renewTime) ?? (o.now ?? Date.now)();
  const left = deadline === undefined ? undefined : Math.max(1, deadline - performance.now());
  o.log.info({ lease: name }, 'Kubernetes Lease: a write of the acquire that got no answer had taken it after all; releasing it');
  await new HeldLease({ ...o, releaseTimeoutMs: left }, current, renewedAt).release();
}

/** `ms`, or less when `stop` aborts first. */
const pause = (ms: number, stop?: AbortSignal): Promise<void> => delay(ms, undefined, { signal: stop }).catch(() => undefined);

/** A write of the acquire: the renewTime it carried (epoch ms) and when it was sent (monotonic). */
interface SentWrite {
  at: number;
  mono: number;
}

/**
 * One read and (at most) one write. `again`: the write was refused, but nobody took the
 * Lease meanwhile (it was deleted, or another writer changed only its metadata).
 */
async function acquireOnce(o: LeaseLockOptions, sent: SentWrite[] = []): Promise<LeaseAcquire | { status: 'again' }> {
  const { kube, name, namespace } = o;
  const clock = o.now ?? Date.now;
  let current: K8s.V1Lease | undefined;
  try {
    current = await kube.coordination.readNamespacedLease({ name, namespace }, kube.options(undefined, o.stop));
  } catch (err) {
    if (o.stop?.aborted) return { status: 'stopped' };
    const f = apiFailure(err);
    if (f.kind !== 'not-found') return { status: 'unavailable', failure: f };
  }
  if (o.stop?.aborted) return { status: 'stopped' };
  const now = clock();
  const sentAt = performance.now();
  const micro = (ms: number) => new kube.k8s.V1MicroTime(ms);
  const lostRace = async (): Promise<LeaseAcquire | { status: 'again' }> => {
    // Who beat us. Nobody, when there is no Lease at all (it was deleted), or when it is
    // still free: a 409 says only that it changed since our read, and another writer
    // touching its metadata (`kubectl annotate`, a label sync) takes nothing. Then it is
    // free, and read again; taken for held, the run skipped with its backlog left.
    let gone = false;
    const winner = await kube.coordination.readNamespacedLease({ name, namespace }, kube.options(undefined, o.stop)).catch((err: unknown) => {
      gone = !o.stop?.aborted && apiFailure(err).kind === 'not-found';
      return undefined;
    });
    if (gone) return { status: 'again' };
    // A stop (SIGTERM) cut the read: the run drains; taken for held, it ended as a skip (exit 0).
    if (o.stop?.aborted) return { status: 'stopped' };
    if (!winner) return { status: 'held' };
    const ours = adopt(winner);
    if (ours) return ours;
    const d = decideAcquire(winner.spec, o.identity, clock(), o.durationSeconds);
    return d.action === 'take' ? { status: 'again' } : { status: 'held', holder: d.holder, expiresAt: d.expiresAt };
  };

  /**
   * The Lease names this run after a refused write: only a write of this acquire that got no
   * answer (a timeout) yet landed can have done that (the identity is unique per run). It is
   * ours: held from the renewTime that write carried, on the monotonic clock from when it was
   * sent (unknown: from the first write, which is sooner, so never held past its expiry).
   * Taken for free instead, further 409s (kubectl annotate) used up the rounds and the run
   * skipped (exit 0) as "held" by nobody, its backlog left, and the Lease naming it blocked
   * every run until it expired. Past its expiry it is taken again as any free Lease.
   */
  const adopt = (winner: K8s.V1Lease): LeaseAcquire | undefined => {
    const spec = winner.spec;
    const renewedAt = timeOf(spec?.renewTime);
    if (spec?.holderIdentity !== o.identity || renewedAt === undefined || sent.length === 0) return undefined;
    const mono = (sent.find((w) => w.at === renewedAt) ?? sent[0]!).mono;
    // Past its renew deadline (below) it would be lost at once: taken again instead, as free.
    if (mono + renewDeadlineMs(o.durationSeconds, o.renewSeconds) <= performance.now() + 1000) return undefined;
    o.log.info({ lease: name }, 'Kubernetes Lease: a write of the acquire that got no answer had taken it after all; holding it');
    return { status: 'acquired', lease: new HeldLease(o, winner, renewedAt, mono) };
  };

  if (!current) {
    sent.push({ at: now, mono: sentAt });
    const body: K8s.V1Lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name, namespace, labels: { 'app.kubernetes.io/managed-by': 'cronsafe' } },
      spec: { holderIdentity: o.identity, acquireTime: micro(now), renewTime: micro(now), leaseDurationSeconds: o.durationSeconds, leaseTransitions: 0 },
    };
    try {
      const created = await kube.coordination.createNamespacedLease({ namespace, body }, kube.options());
      return { status: 'acquired', lease: new HeldLease(o, created, now, sentAt) };
    } catch (err) {
      const f = apiFailure(err);
      return f.kind === 'conflict' ? lostRace() : { status: 'unavailable', failure: f, unanswered: noAnswer(f) };
    }
  }

  const decision = decideAcquire(current.spec, o.identity, now, o.durationSeconds);
  if (decision.action === 'held') return { status: 'held', holder: decision.holder, expiresAt: decision.expiresAt };
  sent.push({ at: now, mono: sentAt });
  const body: K8s.V1Lease = {
    ...current,
    spec: {
      ...current.spec,
      holderIdentity: o.identity,
      acquireTime: micro(now),
      renewTime: micro(now),
      leaseDurationSeconds: o.durationSeconds,
      leaseTransitions: decision.transitions,
    },
  };
  try {
    const taken = await kube.coordination.replaceNamespacedLease({ name, namespace, body }, kube.options());
    if (decision.previousHolder) o.log.warn({ lease: name, previousHolder: decision.previousHolder }, 'Kubernetes Lease: took over an expired Lease');
    return { status: 'acquired', lease: new HeldLease(o, taken, now, sentAt) };
  } catch (err) {
    const f = apiFailure(err);
    // 409: a contender wrote between our read and our write. 404: it was deleted meanwhile.
    return f.kind === 'conflict' || f.kind === 'not-found' ? lostRace() : { status: 'unavailable', failure: f, unanswered: noAnswer(f) };
  }
}

/**
 * A Lease we hold: renewed every renewSeconds until release(). `lost` aborts when it can
 * no longer be ours: a renewal answered 409 and the Lease, read again, names another holder
 * or is gone (deleted), or no renewal succeeded within the renew deadline (renewDeadlineMs:
 * before the expiry, from which on another run may take it).
 */
export class HeldLease {
  private readonly lostCtl = new AbortController();
  /** Aborted (with a reason string) when the Lease is lost. */
  readonly lost: AbortSignal = this.lostCtl.signal;
  private renewTimer: NodeJS.Timeout | undefined;
  private expiryTimer: NodeJS.Timeout | undefined;
  /** Renewals and the release write one after the other: each carries the previous one's resourceVersion. */
  private busy: Promise<void> = Promise.resolve();
  private stopped = false;
  /** Cuts a renewal still in flight releaseTimeoutMs into release(): waited for, it took up to 5 s of the drain margin. */
  private readonly stopCtl = new AbortController();
  private failing = false;
  private readonly clock: () => number;

  /**
   * renewedAt (epoch ms, the renewTime written) on the monotonic clock: the renewals and the
   * expiry are timed on it. Timed on the wall clock, a step back (NTP) during a renewal call
   * put the next renewal and the expiry that far off (the Lease lapsed while the run went
   * on as its holder), a step forward lost the Lease at once.
   */
  private renewedMono: number;

  constructor(
    private readonly o: LeaseLockOptions,
    private current: K8s.V1Lease,
    private renewedAt: number,
    renewedMono = performance.now(),
  ) {
    this.renewedMono = renewedMono;
    this.clock = o.now ?? Date.now;
    this.armExpiry();
    this.scheduleRenewal();
  }

  get name(): string {
    return this.o.name;
  }

  /**
   * Whether it may still be ours, asked synchronously before each claim. The deadline is a
   * timer, and a timer waits for the event loop: once a module handler that blocked it for
   * longer than the duration returned, the claim loop started new items before the timer
   * ran, while another run may have held the Lease already. Past its renew deadline (on the
   * same monotonic clock as the timer) it is lost now, as the timer would have lost it.
   */
  checkExpiry(): boolean {
    if (!this.stopped && performance.now() >= this.renewedMono + this.deadlineMs) this.loseUnrenewed();
    return !this.lost.aborted;
  }

  private get deadlineMs(): number {
    return renewDeadlineMs(this.o.durationSeconds, this.o.renewSeconds);
  }

  private loseUnrenewed(): void {
    const { durationSeconds } = this.o;
    const deadline = this.deadlineMs / 1000;
    this.lose(deadline < durationSeconds
      ? `not renewed within the renew deadline (${deadline}s of the ${durationSeconds}s Lease duration): another run may take it at its expiry`
      : `not renewed within the Lease duration (${durationSeconds}s)`);
  }

  /** Epoch ms after which others may take it, unless renewed. */
  get expiresAt(): number {
    return this.renewedAt + this.o.durationSeconds * 1000;
  }

  /**
   * Stop renewing and hand the Lease back (holderIdentity cleared), so the next run need not
   * wait for it to expire. All of it (a renewal in flight, the write, a write tried again
   * after a 429, a 5xx or a refused or cut connection) within one bound, releaseTimeoutMs.
   */
  async release(): Promise<void> {
    if (this.stopped) return this.busy;
    this.stop();
    const bound = typeof this.o.releaseTimeoutMs === 'function' ? this.o.releaseTimeoutMs() : this.o.releaseTimeoutMs;
    const deadline = bound === undefined ? undefined : performance.now() + bound;
    // A renewal in flight is waited for (the release must carry its resourceVersion), but
    // only for half the bound, so the write has the other half.
    const cut = bound === undefined ? undefined : setTimeout(() => this.stopCtl.abort(), bound / 2);
    this.busy = this.busy.finally(() => clearTimeout(cut)).then(() => this.writeRelease(deadline));
    return this.busy;
  }

  private async writeRelease(deadline: number | undefined): Promise<void> {
    if (this.lost.aborted) return;
    const { kube, name, namespace, log } = this.o;
    const left = () => (deadline === undefined ? undefined : Math.max(1, deadline - performance.now()));
    let rereads = 0;
    for (;;) {
      const body: K8s.V1Lease = {
        ...this.current,
        spec: { ...this.current.spec, holderIdentity: undefined, renewTime: new kube.k8s.V1MicroTime(this.clock()) },
      };
      try {
        await kube.coordination.replaceNamespacedLease({ name, namespace, body }, kube.options(left()));
        log.info({ lease: name }, 'Kubernetes Lease released');
        return;
      } catch (err) {
        const f = apiFailure(err);
        if (f.kind === 'conflict' && rereads < RENEW_REREADS) {
          // A renewal cut short by the release (its answer lost) may have landed, or another
          // writer touched the Lease's metadata (`kubectl annotate`): still ours with a newer
          // resourceVersion. Read again, and release that one.
          rereads++;
          const fresh = await kube.coordination.readNamespacedLease({ name, namespace }, kube.options(left())).catch((e: unknown) =>
            apiFailure(e).kind === 'not-found' ? null : undefined,
          );
          if (fresh?.spec?.holderIdentity === this.o.identity) {
            this.current = fresh;
            continue;
          }
          if (fresh === null) {
            // Deleted (its replace fails the uid precondition: 409): nobody holds it.
            log.info({ lease: name }, 'Kubernetes Lease: not released, it was deleted');
            return;
          }
          if (fresh) {
            log.info({ lease: name, holder: fresh.spec?.holderIdentity || undefined }, 'Kubernetes Lease: not released, it no longer names this run');
            return;
          }
        }
        // A 429 or 5xx, or a connection refused or cut (an API server restarting), is tried
        // again while the bound allows: given up, the Lease stayed held until it expired and
        // the next run skipped.
        const l = left();
        const pauseMs = Math.min(RELEASE_RETRY_MS, (l ?? 0) / 4);
        if (noAnswer(f) && l !== undefined && l > pauseMs + RELEASE_RETRY_MS) {
          await pause(pauseMs);
          continue;
        }
        // A 403 is RBAC that allows create but not update (a run shorter than renewSeconds
        // never renewed, so this is its only word on it): every run will leave it held.
        const hint = f.kind === 'forbidden' ? ' (grant update on leases: the chart does with lock.kubernetesLease.enabled)' : '';
        log.warn({ lease: name, err: f.message, expiresAt: new Date(this.expiresAt).toISOString() },
          `Kubernetes Lease: could not release it; the next run can take it once it expires${hint}`);
        return;
      }
    }
  }

  private stop(): void {
    this.stopped = true;
    clearTimeout(this.renewTimer);
    clearTimeout(this.expiryTimer);
  }

  /**
   * renewSeconds after the last renewTime (timed from the end of the call, each renewal
   * came one answer's latency late, and a slow API server let the Lease expire); after a
   * failure every RENEW_RETRY_SECONDS: a whole renewSeconds left room for one or two tries
   * before the expiry, and an API server back within it (a control plane upgrade) found
   * the Lease already lost.
   */
  private scheduleRenewal(): void {
    if (this.stopped) return;
    const ms = this.failing
      ? Math.min(this.o.renewSeconds, RENEW_RETRY_SECONDS) * 1000
      : Math.max(0, this.renewedMono + this.o.renewSeconds * 1000 - performance.now());
    this.renewTimer = setTimeout(() => {
      this.busy = this.busy.then(() => this.renew()).finally(() => this.scheduleRenewal());
    }, ms);
    this.renewTimer.unref();
  }

  /** Past the renew deadline we stop as if it were lost: at the expiry nobody may assume we still hold it. */
  private armExpiry(): void {
    clearTimeout(this.expiryTimer);
    const ms = this.renewedMono + this.deadlineMs - performance.now();
    this.expiryTimer = setTimeout(() => this.loseUnrenewed(), Math.max(0, ms));
    this.expiryTimer.unref();
  }

  private async renew(): Promise<void> {
    if (this.stopped) return;
    const { kube, name, namespace, log } = this.o;
    let f: ApiFailure;
    for (let reread = 0; ; reread++) {
      const now = this.clock();
      const sentAt = performance.now();
      const body: K8s.V1Lease = {
        ...this.current,
        spec: { ...this.current.spec, holderIdentity: this.o.identity, renewTime: new kube.k8s.V1MicroTime(now), leaseDurationSeconds: this.o.durationSeconds },
      };
      try {
        const renewed = await kube.coordination.replaceNamespacedLease({ name, namespace, body }, kube.options(undefined, this.stopCtl.signal));
        // Kept even when release() came meanwhile: the write landed, so the release must
        // carry its resourceVersion (an older one is answered 409 and the Lease stays held).
        this.current = renewed;
        this.renewedAt = now;
        this.renewedMono = sentAt;
        if (this.stopped) return;
        this.armExpiry();
        if (this.failing) log.info({ lease: name }, 'Kubernetes Lease: renewed again');
        this.failing = false;
        return;
      } catch (err) {
        if (this.stopped) return; // cut short by release(), or lost meanwhile
        f = apiFailure(err);
      }
      if (f.kind === 'not-found') return this.lose(f.message);
      if (f.kind !== 'conflict') break;
      // A 409 says only that the Lease changed since our copy: our last write may have landed
      // with its answer lost (a timeout), or another writer touched its metadata (`kubectl
      // annotate`, a label sync). Who holds it decides, read again each time: while it names
      // this run it is ours (written again with the fresh resourceVersion); lost only when it
      // names another holder or is gone. A deleted Lease shows up here too: our copy's uid no
      // longer matches (409, not 404).
      const fresh = await kube.coordination.readNamespacedLease({ name, namespace }, kube.options(undefined, this.stopCtl.signal)).catch((e: unknown) =>
        apiFailure(e).kind === 'not-found' ? null : undefined,
      );
      if (this.stopped) return;
      if (fresh === null) return this.lose('the Lease was deleted');
      if (fresh && fresh.spec?.holderIdentity !== this.o.identity) {
        // Cleared by someone else (`kubectl patch` freeing it): nobody holds it, but any run may take it now.
        return this.lose(fresh.spec?.holderIdentity ? `taken over by ${fresh.spec.holderIdentity}` : 'released by someone else (holderIdentity cleared): another run may take it now');
      }
      if (fresh) this.current = fresh;
      // The read failed as well (an API server that lost our write's answer is likely to fail
      // this read too), or the Lease keeps changing under us: a failed renewal, retried below
      // until its renew deadline. It is never kept past that deadline, and never taken for lost
      // while it still names this run.
      if (!fresh || reread + 1 >= RENEW_REREADS) break;
    }
    // Anything else may pass (timeout, restart of the API server): retry until the renew deadline.
    if (!this.failing) {
      // A 403 here is RBAC that allows create but not update: every renewal will fail.
      const hint = f.kind === 'forbidden' ? ' (grant update on leases: the chart does with lock.kubernetesLease.enabled)' : '';
      const giveUpAt = new Date(this.renewedAt + this.deadlineMs).toISOString();
      log.warn({ lease: name, err: f.message, giveUpAt, expiresAt: new Date(this.expiresAt).toISOString() },
        `Kubernetes Lease: renewal failed; retrying until its renew deadline${hint}`);
    }
    this.failing = true;
  }

  private lose(reason: string): void {
    if (this.stopped || this.lost.aborted) return;
    this.stop();
    this.stopCtl.abort(); // a lost Lease is not released: a renewal in flight has nothing left to carry
    this.o.log.error({ lease: this.o.name, reason }, 'Kubernetes Lease lost: another run may start; this one stops claiming and drains');
    this.lostCtl.abort(`Kubernetes Lease lost: ${reason}`);
  }
}
