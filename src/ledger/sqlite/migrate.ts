import type { Database } from 'better-sqlite3';
import { MIGRATIONS, type Migration } from './migrations/index.js';

const CREATE_TABLE = `CREATE TABLE IF NOT EXISTS schema_migrations (
  version    INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  applied_at INTEGER NOT NULL
)`;

/**
 * Apply the migrations not yet recorded in `schema_migrations`, each in its own
 * IMMEDIATE transaction, so two processes opening the same file cannot both apply
 * one (the second waits on the write lock, then sees the row and skips).
 * Returns the versions applied by this call.
 */
export function migrate(db: Database, migrations: readonly Migration[] = MIGRATIONS): number[] {
  db.exec(CREATE_TABLE);
  const known = Math.max(0, ...migrations.map((m) => m.version));
  const newest = (db.prepare('SELECT max(version) AS v FROM schema_migrations').get() as { v: number | null }).v;
  if (newest !== null && newest > known) {
    // Running old code on a newer schema would silently misread it.
    throw new Error(
      `ledger ${db.name} has schema version ${newest}, newer than this cronsafe knows (${known}); upgrade cronsafe`,
    );
  }
  const isApplied = db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?').pluck();
  const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
  const applied: number[] = [];
  for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
    db.transaction(() => {
      if (isApplied.get(m.version) !== undefined) return;
      db.exec(m.sql);
      record.run(m.version, m.name, Date.now());
      applied.push(m.version);
    }).immediate();
  }
  return applied;
}
