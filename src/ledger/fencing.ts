import type { Claim, ItemState } from './types.js';

/** The parts of an item's current row that decide whether a claim still holds. */
export interface ClaimHolder {
  state: ItemState;
  owner: string | null;
  attempts: number;
}

/**
 * Why a fenced write (complete/fail/release) was rejected, for logs and for the
 * `fenced` outcome. Only called on the slow path, after the guarded write matched
 * no row; `current` is the row as it is now (null: not in the ledger).
 */
export function fenceReason(claim: Claim, current: ClaimHolder | null): string {
  const held = `attempt ${claim.attempt} by ${claim.owner}`;
  if (current === null) return `item ${claim.id} is not in the ledger (claim was ${held})`;
  if (current.state !== 'claimed') return `item ${claim.id} is ${current.state}, no longer claimed (claim was ${held})`;
  if (current.owner !== claim.owner) {
    return `item ${claim.id} is now claimed by ${current.owner ?? 'nobody'} (claim was ${held})`;
  }
  if (current.attempts !== claim.attempt) {
    return `item ${claim.id} is now on attempt ${current.attempts} (claim was ${held})`;
  }
  return `item ${claim.id} changed while writing (claim was ${held})`;
}
