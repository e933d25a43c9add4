/**
 * Reads of an open ledger by the operator commands (status, dead-letter list, requeue,
 * plan, schedule) and the daemon. The open already names the store when it fails; a read can still fail after it
 * (a damaged SQLite file whose first pages are sound, a PostgreSQL connection dropped
 * meanwhile), and must say the same: `state store unavailable (sqlite <path>): ...`, exit 1,
 * one line, never a driver's stack trace.
 */
import { ConfigError, EdgeError } from '../errors.js';
import type { Store } from './open.js';

const DOING = 'cannot read the ledger';

function named(store: Store, err: unknown, doing: string): Error {
  return err instanceof EdgeError || err instanceof ConfigError ? err : store.unavailable(doing, err);
}

/** `read`, with its failure as the store's error (`doing` says what failed). */
export function reading<T>(store: Store, read: Promise<T>, doing = DOING): Promise<T> {
  return read.catch((err: unknown) => Promise.reject(named(store, err, doing)));
}

/** `pages` (a ledger's paged listing), with a failure to fetch a page as the store's error; what the caller does with a page is its own. */
export async function* readingPages<T>(store: Store, pages: AsyncIterable<T>): AsyncGenerator<T> {
  const it = pages[Symbol.asyncIterator]();
  try {
    for (;;) {
      const next = await reading(store, it.next());
      if (next.done) return;
      yield next.value;
    }
  } finally {
    // The caller stopped early (its output failed): end the listing's own cursor.
    await it.return?.();
  }
}
