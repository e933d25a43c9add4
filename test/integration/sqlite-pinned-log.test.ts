import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { startHeartbeat } from '../../src/lock/heartbeat.js';
import { memoryLogger } from '../helpers/log.js';
import { until } from '../helpers/wait.js';
import { T0 } from '../contract/ledger-fixtures.js';

// A `sqlite3` shell left inside a read transaction on the ledger kept every checkpoint from
// copying the write-ahead log back: it grew with every write of the run (56 MiB for 60,000
// items, ~1 KiB an item), and nothing said so until the state volume was full. The run's
// heartbeat now warns, naming the cause (src/ledger/sqlite/pinned-log.ts).

const root = mkdtempSync(join(tmpdir(), 'cronsafe-pinned-'));
let n = 0;
const freshFile = (): string => join(root, `t${++n}`, 'state', 'cronsafe.db');
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** ~100 MiB written into the ledger file by another connection, in 25 transactions (as a run's many). */
function writeMuch(file: string): void {
  const db = new Database(file);
  try {
    db.exec('CREATE TABLE IF NOT EXISTS filler (b BLOB)');
    const fill = db.prepare('WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 1000) INSERT INTO filler SELECT randomblob(3500) FROM c');
    for (let i = 0; i < 25; i++) fill.run();
  } finally {
    db.close();
  }
}

const pinnedWarnings = (lines: Record<string, unknown>[]) => lines.filter((l) => typeof l.msg === 'string' && l.msg.startsWith("the ledger's write-ahead log has grown to"));

describe("a reader holding the SQLite ledger's write-ahead log", () => {
  it("the run's heartbeat warns that the log grows and why; once the reader ends its transaction it is copied back", async () => {
    const file = freshFile();
    const ledger = await openSqliteLedger(file, { writeBehind: true });
    await ledger.discover([{ id: 'a' }], { runId: 'p1', now: T0 });
    // `sqlite3 cronsafe.db` then `BEGIN; SELECT count(*) FROM items;`, left open.
    const shell = new Database(file, { readonly: true });
    shell.prepare('BEGIN').run();
    expect(shell.prepare('SELECT count(*) FROM items').pluck().get()).toBe(1);
    const { log, lines } = memoryLogger('info');
    const stop = startHeartbeat(ledger, 'p1', 50, log);
    try {
      writeMuch(file);
      expect(statSync(`${file}-wal`).size).toBeGreaterThan(80 * 1024 * 1024);
      await until(() => pinnedWarnings(lines).length > 0, 'a warning that the write-ahead log is held');
      const [warning] = pinnedWarnings(lines);
      expect(warning).toMatchObject({ level: 40, walBytes: statSync(`${file}-wal`).size });
      expect(warning?.msg).toContain('another connection has held a read transaction open on the ledger (a sqlite3 shell left inside BEGIN');

      shell.prepare('COMMIT').run();
      // Nothing holds the log now: a checkpoint copies it all back.
      expect(await ledger.pinnedLog?.()).toBeNull();
      // The log did not double again meanwhile: said once.
      expect(pinnedWarnings(lines)).toHaveLength(1);
    } finally {
      stop();
      shell.close();
      await ledger.close();
    }
  }, 60_000);

  it('as much written with no reader holding the log: no warning', async () => {
    const file = freshFile();
    const ledger = await openSqliteLedger(file, { writeBehind: true });
    await ledger.discover([{ id: 'a' }], { runId: 'p1', now: T0 });
    const { log, lines } = memoryLogger('info');
    const stop = startHeartbeat(ledger, 'p1', 50, log);
    try {
      writeMuch(file);
      expect(await ledger.pinnedLog?.()).toBeNull();
      await ledger.heartbeat('p1', T0);
      expect(pinnedWarnings(lines)).toEqual([]);
    } finally {
      stop();
      await ledger.close();
    }
  }, 60_000);
});
