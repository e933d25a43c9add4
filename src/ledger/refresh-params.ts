import type { RefreshPolicy } from './types.js';

/**
 * A refresh policy (schedule.refresh) as both adapters' statements take it, or null when
 * it asks for nothing: then discovery runs no refresh statement at all and pays nothing.
 * `doneBefore` null disables the every-occurrence test. Throws before anything is written.
 */
export interface RefreshParams {
  doneBefore: number | null;
  onChange: boolean;
}

export function refreshParams(policy: RefreshPolicy | undefined): RefreshParams | null {
  if (policy === undefined) return null;
  const { doneBefore, onChange } = policy;
  if (doneBefore !== undefined && !Number.isFinite(doneBefore)) {
    throw new TypeError(`refresh.doneBefore must be epoch milliseconds, got ${String(doneBefore)}`);
  }
  if (doneBefore === undefined && onChange !== true) return null;
  return { doneBefore: doneBefore ?? null, onChange: onChange === true };
}
