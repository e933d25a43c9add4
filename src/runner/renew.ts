import type { Logger } from 'pino';
import type { Claim, Ledger } from '../ledger/types.js';
import { AbortReason } from './drain.js';

export interface RenewalOptions {
  ledger: Ledger;
  owner: string;
  /** Claims this pass holds (queued or in flight), by id. */
  held: Map<string, Claim>;
  /** Abort handles of in-flight attempts, by id. */
  inflight: Map<string, { abort(reason?: unknown): void }>;
  log: Logger;
  now: () => number;
  leaseMs: number;
  everyMs: number;
  killAfterMs: () => number;
  /** A renewal reached the ledger: every claim the owner held then has its lease from `at`. */
  onRenewed?: (at: number) => void;
  /** A renewal found this claim taken over: it was not renewed (onRenewed's `at` is not its lease). */
  onLost?: (claim: Claim) => void;
}

/**
 * Heartbeat: extend the lease of every claim held, every `everyMs`, so that a short lease
 * still covers slow items. A claim the ledger reports as no longer ours (expired and taken
 * over by another pod) has its attempt aborted; its completion would be fenced anyway.
 * Returns the timer (clear it when the pass ends).
 */
export function startRenewal(o: RenewalOptions): NodeJS.Timeout {
  const timer = setInterval(() => {
    if (o.held.size === 0) return;
    // The claims as renewed: a completion may commit while the renewal is in flight (its
    // id then reads as lost) and a retry may re-claim the id; only the same claim is lost.
    const renewed = new Map(o.held);
    const at = o.now();
    o.ledger
      .renew(o.owner, [...renewed.keys()], at + o.leaseMs)
      .then((lost) => {
        o.onRenewed?.(at);
        for (const id of lost) {
          const claim = renewed.get(id);
          if (!claim || o.held.get(id) !== claim) continue;
          o.onLost?.(claim);
          o.log.warn({ itemId: id }, 'claim lost (lease expired and taken over); aborting this attempt');
          o.inflight.get(id)?.abort(new AbortReason('claim lost', o.killAfterMs()));
        }
      })
      .catch((err: unknown) => o.log.warn({ err }, 'lease renewal failed; will retry'));
  }, o.everyMs);
  timer.unref();
  return timer;
}
