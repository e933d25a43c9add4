import { realpathSync, statSync } from 'node:fs';
import type Database from 'better-sqlite3';

/**
 * How large the write-ahead log grows before a reader is taken to be holding it back: twice
 * the pages between the run's checkpoints (wal_autocheckpoint 10,000, index.ts). A checkpoint
 * copies the log into the ledger and the next write starts it over (cut back to
 * journal_size_limit, 64 MiB); it cannot get past frames written after the start of another
 * connection's read transaction, which still reads the pages those frames replace. A `sqlite3`
 * shell left inside BEGIN, or a tool reading for hours, so made the log grow with every write
 * of every run (56 MiB for 60,000 items) until it ended, and nothing said why the state
 * volume filled.
 */
const PINNED_PAGES = 2 * 10_000;

/**
 * The size in bytes of the ledger's write-ahead log when it is past PINNED_PAGES and a
 * checkpoint cannot copy all of it back (another connection's read transaction holds it),
 * else null. A PASSIVE checkpoint, only then: it waits for no one, and copies what it may.
 */
export function pinnedLogBytes(db: Database.Database): number | null {
  let size: number;
  try {
    // Beside the file a link at state.sqlite points to, where SQLite keeps it.
    size = statSync(`${realpathSync(db.name)}-wal`).size;
  } catch {
    return null; // no log (or ':memory:'): nothing held
  }
  const page = db.pragma('page_size', { simple: true }) as number;
  if (size < PINNED_PAGES * page) return null;
  const [r] = db.pragma('wal_checkpoint(PASSIVE)') as { busy: number; log: number; checkpointed: number }[];
  return r !== undefined && r.log > r.checkpointed ? size : null;
}
