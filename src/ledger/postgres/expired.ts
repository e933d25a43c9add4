import type { Ledger, ReclaimOptions } from '../types.js';

/**
 * A ledger that can tell expired claims from live ones (the PostgreSQL adapter). With
 * many pods sharing a pass, a claim not owned by this run may belong to a live pod, so
 * crash recovery must take only claims whose lease has expired (reclaimOrphans' "every
 * claim but mine" is right only under an exclusive lock).
 */
export interface ReclaimsExpired {
  reclaimExpired(opts: ReclaimOptions): Promise<number>;
}

/** Checked by shape, so the runner need not load pg to ask (this module imports nothing). */
export const reclaimsExpired = (ledger: Ledger): ledger is Ledger & ReclaimsExpired =>
  typeof (ledger as Partial<ReclaimsExpired>).reclaimExpired === 'function';
