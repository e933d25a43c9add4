import type { Claim, ClaimOptions, DiscoveredItem, FailOptions, Ledger, RefreshPolicy, RetryPolicy } from '../../src/ledger/types.js';

/** Shared clock origin and policies for the ledger contract suites. */
export const T0 = 1_700_000_000_000;
export const LEASE_MS = 60_000;
/** backoffMs 1000: with random 0 the first retry waits exactly 500 ms (equal jitter). */
export const RETRY: RetryPolicy = { maxAttempts: 3, backoffMs: 1000, backoffMaxMs: 8000 };

/** Gives each contract test the ledger opened for it. */
export type UseLedger = () => Ledger;

export function items(...ids: string[]): DiscoveredItem[] {
  return ids.map((id) => ({ id }));
}

export function claimOpts(over: Partial<DiscoverClaimOptions> = {}): DiscoverClaimOptions {
  return { owner: 'owner-a', runId: 'run-1', now: T0, leaseMs: LEASE_MS, ...over };
}

export function failOpts(over: Partial<FailOptions> = {}): FailOptions {
  return { now: T0, retry: RETRY, random: () => 0, ...over };
}

/** Options of the discover-then-claim shorthand below. */
export type DiscoverClaimOptions = ClaimOptions & { refresh?: RefreshPolicy; limit?: number };

/**
 * What the runner does for a batch whose items get handler slots at once: discover, then
 * claim (at most `limit`) of the ids discover reports claimable.
 */
export async function discoverAndClaim(ledger: Ledger, batch: DiscoveredItem[], opts: DiscoverClaimOptions): Promise<Claim[]> {
  const ids = await ledger.discover(batch, { runId: opts.runId, now: opts.now, refresh: opts.refresh });
  const wanted = opts.limit === undefined ? ids : ids.slice(0, Math.max(0, opts.limit));
  return ledger.claim(wanted, opts);
}

/** Discover and claim one item; fails the test when it is not claimed. */
export async function claimOne(ledger: Ledger, id: string, over: Partial<ClaimOptions> = {}): Promise<Claim> {
  const [claim] = await discoverAndClaim(ledger, items(id), claimOpts(over));
  if (claim === undefined) throw new Error(`expected ${id} to be claimed`);
  return claim;
}

/** Claim and fail `id` until it is dead (maxAttempts times, each after its backoff). */
export async function killItem(ledger: Ledger, id: string, retry: RetryPolicy = RETRY): Promise<void> {
  let now = T0;
  for (let i = 1; i <= retry.maxAttempts; i++) {
    const claim = await claimOne(ledger, id, { now });
    const [out] = await ledger.fail([{ claim, error: `boom ${i}` }], failOpts({ now, retry }));
    now = out?.result === 'applied' && out.availableAt !== undefined ? out.availableAt : now;
  }
  const rec = await ledger.get(id);
  if (rec?.state !== 'dead') throw new Error(`expected ${id} to be dead, is ${rec?.state}`);
}
