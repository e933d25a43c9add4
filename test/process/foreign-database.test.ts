/**
 * state.sqlite pointed at another program's SQLite database (a path mixed up with the app's
 * own `app.db`, or a Rails database with its own `schema_migrations`): the first run wrote
 * cronsafe's tables into it and switched it to WAL mode, and `validate` said OK. It is now
 * refused (exit 78, naming state.sqlite) before anything is written to it.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';

const digest = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

describe('state.sqlite naming a database that is not a ledger', () => {
  it.each([
    ['an application database', ['CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)', "INSERT INTO users (email) VALUES ('a@example.com')"], '"users"'],
    ['a Rails database (its own schema_migrations)', ['CREATE TABLE schema_migrations (version TEXT PRIMARY KEY)', "INSERT INTO schema_migrations VALUES ('20240101120000')", 'CREATE TABLE posts (id INTEGER PRIMARY KEY)'], '"posts", "schema_migrations"'],
  ])('%s: run, status, requeue and dead-letter retry exit 78 and leave it as it was', async (_what, sql, tables) => {
    const ws = workspace({ handler: { command: ['cp', '{path}', '{output}'] } }, { 'a.txt': 'a\n' });
    mkdirSync(path.dirname(ws.db), { recursive: true });
    const db = new Database(ws.db);
    for (const s of sql) db.exec(s);
    db.close();
    const before = digest(ws.db);

    for (const args of [['run'], ['status'], ['requeue', '--all'], ['dead-letter', 'retry', '--all']]) {
      const r = await runCli([...args, '-c', ws.configPath]);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(`state.sqlite: ${ws.db} is an SQLite database of something else (its tables: ${tables}), not a cronsafe ledger`);
    }
    // Before: cronsafe's tables were added to it, and it was switched to WAL mode.
    expect(digest(ws.db)).toBe(before);
    expect(existsSync(`${ws.db}-wal`)).toBe(false);
    expect(existsSync(path.join(ws.out, 'a.txt.out'))).toBe(false);
  });

  it('an empty file (touched for cronsafe) becomes the ledger, as before', async () => {
    const ws = workspace({ handler: { command: ['cp', '{path}', '{output}'] } }, { 'a.txt': 'a\n' });
    mkdirSync(path.dirname(ws.db), { recursive: true });
    writeFileSync(ws.db, '');
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(path.join(ws.out, 'a.txt.out'), 'utf8')).toBe('a\n');
  });
});
