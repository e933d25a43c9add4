/**
 * `cronsafe schedule` only reads the ledger. When its read-only open failed for any reason it
 * opened the ledger for writing instead, which migrates: another application's SQLite
 * database named by a mistyped state.sqlite got cronsafe's tables written into it, and an
 * empty file became a ledger, with exit 0, where status and plan say "holds no cronsafe
 * ledger" (exit 1) and change nothing. Only a ledger of an older schema (an upgrade) is
 * still opened for writing, as before.
 */
import { statSync, writeFileSync, mkdirSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/ledger/sqlite/migrate.js';
import { MIGRATIONS } from '../../src/ledger/sqlite/migrations/index.js';
import { runCli, workspace } from '../helpers/cli.js';

const KNOWN = Math.max(...MIGRATIONS.map((m) => m.version));
const ws = () => workspace({ handler: { command: ['true'] }, schedule: { cron: '*/5 * * * *', timeZone: 'UTC' } });
const tables = (file: string): string[] => {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`).pluck().all() as string[];
  } finally {
    db.close();
  }
};

describe('schedule on a state.sqlite that holds no cronsafe ledger', () => {
  it("another application's database: exit 78 naming state.sqlite, nothing written to it", async () => {
    const w = ws();
    mkdirSync(w.state, { recursive: true });
    const app = new Database(w.db);
    app.exec(`CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users (name) VALUES ('alice')`);
    app.close();
    const r = await runCli(['schedule', '--json', '-c', w.configPath]);
    expect(r.code, r.stdout + r.stderr).toBe(78);
    expect(r.stderr).toContain(`state.sqlite: ${w.db} is an SQLite database of something else (its tables: "users"), not a cronsafe ledger`);
    expect(r.stdout).toBe('');
    expect(tables(w.db)).toEqual(['users']);
  });

  // An empty file is no ledger yet (a first run on a full disk leaves one; the next run
  // makes it the ledger): answered as for no file, and left empty.
  it('an empty file: answered as no ledger yet (exit 0), the file left empty', async () => {
    const w = ws();
    mkdirSync(w.state, { recursive: true });
    writeFileSync(w.db, '');
    const r = await runCli(['schedule', '--json', '-c', w.configPath]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ lastRunStartedAt: null });
    expect(statSync(w.db).size).toBe(0);
  });

  it('a ledger of an older schema is still opened (and migrated) to read its last run', async () => {
    const w = ws();
    mkdirSync(w.state, { recursive: true });
    const old = new Database(w.db);
    migrate(old, MIGRATIONS.slice(0, KNOWN - 1));
    old.close();
    const r = await runCli(['schedule', '--json', '-c', w.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ lastRunStartedAt: null });
  });
});
