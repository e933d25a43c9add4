import type { ClaimOptions, FenceOutcome, Ledger, SettleOutcome, Settlement } from './types.js';

/**
 * Ledger.settle as a sequence of the adapter's own verbs, one transaction each: fails
 * grouped by retry policy, hand-backs by reason, then the claim. Same outcomes as the
 * one-transaction form, with more commits; for an adapter that has no single-transaction
 * settle (yet).
 */
export async function settleInSteps(
  ledger: Ledger,
  s: Settlement,
  now: number,
  claim?: { ids: string[]; opts: ClaimOptions },
  random?: () => number,
): Promise<SettleOutcome> {
  const complete = await ledger.complete(s.complete, now);
  const fail = new Array<FenceOutcome>(s.fail.length);
  for (const [retry, idx] of groupIndexes(s.fail, (f) => f.retry)) {
    const outs = await ledger.fail(idx.map((i) => ({ claim: s.fail[i]!.claim, error: s.fail[i]!.error })), { now, retry, random });
    idx.forEach((i, k) => (fail[i] = outs[k]!));
  }
  const release = new Array<FenceOutcome>(s.release.length);
  for (const [key, idx] of groupIndexes(s.release, (r) => `${r.unstarted === true ? 'u' : 's'}${r.reason}`)) {
    const outs = await ledger.release(idx.map((i) => s.release[i]!.claim), now, key.slice(1), key.startsWith('u'));
    idx.forEach((i, k) => (release[i] = outs[k]!));
  }
  const gone = await ledger.forget(s.gone, now);
  const claims = claim ? await ledger.claim(claim.ids, claim.opts) : [];
  return { complete, fail, release, gone, claims };
}

/** Indexes of `items` grouped by key, in first-seen order. */
function groupIndexes<T, K>(items: T[], key: (t: T) => K): Map<K, number[]> {
  const m = new Map<K, number[]>();
  items.forEach((it, i) => {
    const k = key(it);
    const g = m.get(k);
    if (g) g.push(i);
    else m.set(k, [i]);
  });
  return m;
}
