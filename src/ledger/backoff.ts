import type { RetryPolicy } from './types.js';

/**
 * Delay before retry number `charged` (1 after the first failed attempt):
 * `backoffMs * 2^(charged-1)`, capped at `backoffMaxMs`, with "equal jitter":
 * half of it fixed, half random. The fixed half keeps a retry from coming back
 * at once; the random half spreads out many items that failed together (a
 * downstream outage) so they do not all retry in the same instant.
 *
 * Pure: `random` returns a number in [0, 1) (Math.random in production).
 * The result is an integer in [ceil/2, ceil] where ceil is the capped exponential.
 */
export function backoffDelayMs(
  charged: number,
  policy: Pick<RetryPolicy, 'backoffMs' | 'backoffMaxMs'>,
  random: () => number,
): number {
  const { backoffMs, backoffMaxMs } = policy;
  if (!(backoffMs > 0) || !(backoffMaxMs > 0)) return 0;
  const exponent = Math.max(0, Math.floor(charged) - 1);
  // 2 ** exponent becomes Infinity past 1023; min() caps it, so no overflow.
  const ceiling = Math.min(backoffMaxMs, backoffMs * 2 ** exponent);
  const r = Math.min(1, Math.max(0, random()));
  return Math.round(ceiling / 2 + (ceiling / 2) * r);
}

/** Where a failed (or abandoned) attempt sends an item. */
export type FailureDecision = { state: 'dead' } | { state: 'pending'; availableAt: number };

/**
 * The retry policy for one failed attempt, shared by every ledger adapter:
 * dead once `charged` (attempts minus drain hand-backs) reaches `maxAttempts`,
 * else pending again after the backoff.
 */
export function decideAfterFailure(
  charged: number,
  retry: RetryPolicy,
  now: number,
  random: () => number,
): FailureDecision {
  if (charged >= retry.maxAttempts) return { state: 'dead' };
  return { state: 'pending', availableAt: now + backoffDelayMs(charged, retry, random) };
}
