import { realpathSync } from 'node:fs';
import type { Database } from 'better-sqlite3';
import { ConfigError } from '../../errors.js';
import { isTextFile } from '../store-files.js';
import { LedgerTooNew } from '../no-ledger.js';
import { lockHolder } from './flock.js';
import { MIGRATIONS, type Migration } from './migrations/index.js';

const CREATE_TABLE = `CREATE TABLE IF NOT EXISTS schema_migrations (
  version    INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  applied_at INTEGER NOT NULL
)`;

/**
 * Refuse a database that is not a ledger (ConfigError, exit 78), before anything is written
 * to it: state.sqlite pointed at another program's SQLite file got cronsafe's tables (and
 * WAL mode) at the first run. Ours: no table at all (a new or empty file), or our own
 * `schema_migrations` (its `name` and `applied_at` columns: Rails and others keep a table of
 * that name too), which the first migration creates before anything else.
 */
export function assertLedgerFile(db: Database, file: string = db.name): void {
  let tables: string[];
  try {
    tables = db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name`).pluck().all() as string[];
  } catch (err) {
    // Not SQLite at all (a text file, another job's lock file): SQLite writes nothing to it,
    // but every run and status failed with exit 1 "file is not a database", naming no key,
    // while validate said OK.
    if ((err as { code?: unknown }).code !== 'SQLITE_NOTADB') throw err;
    // Looked at where SQLite opened it: state.sqlite may be a link (these reads never follow one).
    const real = realFile(file);
    const holder = lockHolder(real);
    // Binary (an SQLite file's first page always holds NUL bytes): as likely this job's own
    // ledger with a damaged header as anything else. That is the state store unusable, exit 1
    // as a damaged page of it is; told "not a cronsafe ledger, point state.sqlite at a new
    // file", an operator started a new ledger, and every item done was run again.
    if (holder === null && !isTextFile(real)) throw err;
    const what = holder === null ? 'its first bytes are not an SQLite header' : `it is a run lock file, last held by ${holder}: another job's lock.path?`;
    throw new ConfigError(
      `state.sqlite: ${file} is not an SQLite database (${what}), not a cronsafe ledger; nothing was written to it. Point state.sqlite at a file of cronsafe's own (a new path, or leave it unset)`,
      undefined,
      'state.sqlite',
    );
  }
  if (tables.length === 0) return;
  if (tables.includes('schema_migrations')) {
    const columns = new Set((db.prepare(`SELECT name FROM pragma_table_info('schema_migrations')`).pluck().all() as string[]));
    if (columns.has('version') && columns.has('name') && columns.has('applied_at')) return;
  }
  const shown = tables.slice(0, 5).map((t) => JSON.stringify(t)).join(', ') + (tables.length > 5 ? `, and ${tables.length - 5} more` : '');
  throw new ConfigError(
    `state.sqlite: ${file} is an SQLite database of something else (its tables: ${shown}), not a cronsafe ledger; nothing was written to it. Point state.sqlite at a file of cronsafe's own (a new path, or leave it unset)`,
    undefined,
    'state.sqlite',
  );
}

/** `file` with its links resolved, or as given when it cannot be. */
function realFile(file: string): string {
  try {
    return realpathSync.native(file);
  } catch {
    return file;
  }
}

/**
 * Apply the migrations not yet recorded in `schema_migrations`, all in one IMMEDIATE
 * transaction with the table itself, so two processes opening the same file cannot both
 * apply one (the second waits on the write lock, then sees the rows and skips), and a
 * reader (status, plan) never sees a ledger half made: a first run's file has no tables or
 * the whole schema. Each migration committed on its own, `plan` run while a first run made
 * the ledger said it had an older schema (or none) and exited 1.
 * Returns the versions applied by this call.
 */
export function migrate(db: Database, migrations: readonly Migration[] = MIGRATIONS): number[] {
  const known = Math.max(0, ...migrations.map((m) => m.version));
  const applied: number[] = [];
  db.transaction(() => {
    db.exec(CREATE_TABLE);
    const newest = (db.prepare('SELECT max(version) AS v FROM schema_migrations').get() as { v: number | null }).v;
    if (newest !== null && newest > known) {
      // Running old code on a newer schema would silently misread it.
      throw new LedgerTooNew(
        `ledger ${db.name} has schema version ${newest}, newer than this cronsafe knows (${known}); upgrade cronsafe`,
      );
    }
    const isApplied = db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?').pluck();
    const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
    for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
      if (isApplied.get(m.version) !== undefined) continue;
      db.exec(m.sql);
      record.run(m.version, m.name, Date.now());
      applied.push(m.version);
    }
  }).immediate();
  return applied;
}
