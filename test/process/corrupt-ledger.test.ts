/**
 * A ledger that opens but whose pages are damaged (a bad disk, a restore cut short): the
 * commands that read it must say which store failed, in one line, as they do when it cannot
 * be opened. Before, a failure after the open (the counts, a page of dead items) ended as
 * `cronsafe: fatal: SqliteError: database disk image is malformed` and a stack trace.
 */
import { closeSync, openSync, statSync, writeSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { runCli, workspace } from '../helpers/cli.js';

/** `n` dead items, 128 per transaction, as the runner records them. */
async function seedDead(db: string, n: number): Promise<void> {
  const ledger = await openSqliteLedger(db, { job: 'test-job' });
  const retry = { maxAttempts: 1, backoffMs: 0, backoffMaxMs: 0 };
  try {
    for (let start = 0; start < n; start += 128) {
      const now = Date.UTC(2026, 0, 1) + start;
      const batch = Array.from({ length: Math.min(128, n - start) }, (_, i) => ({ id: `d/item-${start + i}.scc` }));
      const ids = await ledger.discover(batch, { runId: 'seed', now });
      const claims = await ledger.claim(ids, { owner: 'seed', runId: 'seed', now, leaseMs: 60_000 });
      await ledger.fail(claims.map((claim) => ({ claim, error: `exit code 1: ${claim.id}: a last error long enough to fill pages` })), { now, retry });
    }
  } finally {
    await ledger.close();
  }
}

/** Zero the file's pages from `from` to `to` (fractions; default the second quarter): the schema (the first pages) still reads, the items do not. */
function damage(db: string, from = 0.5, to = 0.75): void {
  const pages = Math.floor(statSync(db).size / 4096);
  const fd = openSync(db, 'r+');
  try {
    const zeros = Buffer.alloc(4096);
    for (let p = Math.floor(pages * from); p < Math.floor(pages * to); p++) writeSync(fd, zeros, 0, zeros.length, p * 4096);
  } finally {
    closeSync(fd);
  }
}

describe('a damaged SQLite ledger: the reading commands name the store, in one line, exit 1', () => {
  it.each([
    [['status']],
    [['status', '--json']],
    [['dead-letter', 'list', '--json']],
    [['dead-letter', 'list']],
    [['requeue', '--all', '--include-dead', '--dry-run']],
    [['requeue', '--all']],
    [['plan']],
  ])('%j', async (args: string[]) => {
    const ws = workspace({ handler: { command: ['true'] } });
    await seedDead(ws.db, 3000);
    damage(ws.db);
    const r = await runCli([...args, '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^cronsafe: state store unavailable \\(sqlite ${ws.db.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}\\): .*database disk image is malformed \\(the ledger file [^\\n]* is damaged: [^\\n]*\\)\\n$`));
  }, 60_000);
});

/** `n` finished runs, as runs record them (one row each, the newest last). */
async function seedRuns(db: string, n: number): Promise<void> {
  const ledger = await openSqliteLedger(db, { job: 'test-job' });
  try {
    for (let i = 0; i < n; i++) {
      const startedAt = Date.UTC(2026, 0, 1) + i * 60_000;
      await ledger.startRun({ runId: `run-${i}-with-a-long-enough-id-to-fill-pages`, owner: `host:${i}:a-long-owner-string-to-fill-pages`, startedAt, scheduledFor: startedAt });
      await ledger.finishRun(`run-${i}-with-a-long-enough-id-to-fill-pages`, startedAt + 1000, 'completed', {});
    }
  } finally {
    await ledger.close();
  }
}

describe('a damaged SQLite ledger: schedule, which reads the last run start, names the store too', () => {
  it('schedule', async () => {
    const ws = workspace({ handler: { command: ['true'] }, schedule: { cron: '*/5 * * * *', timeZone: 'UTC' } });
    await seedRuns(ws.db, 3000);
    damage(ws.db, 0.5, 1);
    const r = await runCli(['schedule', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^cronsafe: state store unavailable \\(sqlite ${ws.db.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}\\): .*database disk image is malformed \\(the ledger file [^\\n]* is damaged: [^\\n]*\\)\\n$`));
  }, 60_000);
});
