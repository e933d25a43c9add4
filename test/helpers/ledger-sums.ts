import Database from 'better-sqlite3';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import type { ItemRecord } from '../../src/ledger/types.js';

/** `of(row)` summed over `ids` in the SQLite ledger at `db` (a missing row counts 0). */
async function sumOver(db: string, ids: string[], of: (r: ItemRecord) => number): Promise<number> {
  const ledger = await openSqliteLedger(db);
  try {
    let n = 0;
    for (const id of ids) {
      const r = await ledger.get(id);
      if (r) n += of(r);
    }
    return n;
  } finally {
    await ledger.close();
  }
}

/** Attempts charged over `ids` (attempts less hand-backs), as the ledger reads them. */
export const charged = (db: string, ids: string[]): Promise<number> => sumOver(db, ids, (r) => r.attempts - r.released);

/** The ledger's `attempts` over `ids`: attempts count the handler's starts. */
export const attempts = (db: string, ids: string[]): Promise<number> => sumOver(db, ids, (r) => r.attempts);

/**
 * The items of `ids` charged other than once (attempts less hand-backs), or not done, each
 * with its state, count and last error: {} when none.
 */
export async function notChargedOnce(db: string, ids: string[]): Promise<Record<string, string>> {
  const ledger = await openSqliteLedger(db);
  try {
    const out: Record<string, string> = {};
    for (const id of ids) {
      const r = await ledger.get(id);
      const n = r === null ? 0 : r.attempts - r.released;
      if (n !== 1 || r?.state !== 'done') out[id] = `${r?.state ?? '(no row)'}, ${n} charged: ${r?.lastError ?? ''}`;
    }
    return out;
  } finally {
    await ledger.close();
  }
}

/** The runs recorded (outcome, null while running), and every item's state and attempts, read from the SQLite ledger at `db`. */
export function ledgerRows(db: string): { runs: unknown[]; items: unknown[] } {
  const ledger = new Database(db, { readonly: true });
  try {
    return {
      runs: ledger.prepare('SELECT outcome FROM runs ORDER BY seq').pluck().all(),
      items: ledger.prepare('SELECT id, state, attempts FROM items ORDER BY id').all(),
    };
  } finally {
    ledger.close();
  }
}
