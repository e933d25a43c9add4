/**
 * An item's state in the ledger: its own module so that types.ts (the Ledger interface) and
 * requeue-types.ts (the part of it requeue uses) both import it without importing each other.
 */
export type ItemState = 'pending' | 'claimed' | 'done' | 'dead';
