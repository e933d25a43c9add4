/**
 * The commands that only read (plan, status, dead-letter list, schedule) run while a first
 * run makes the SQLite ledger. That run's migrations committed one by one, so a reader in
 * between found a ledger of an older schema (or no table at all) and `plan` exited 1 with
 * "has schema version 1, older than this cronsafe's ... `cronsafe run` migrates it" or
 * "holds no cronsafe ledger", about a ledger being made at that instant. The schema is now
 * made in one transaction, and a file with no table yet is "no ledger yet", as an empty one.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/ledger/sqlite/migrate.js';
import { MIGRATIONS } from '../../src/ledger/sqlite/migrations/index.js';
import { CLI, runCli, statusJson, workspace } from '../helpers/cli.js';

type Seen = { code: number | null; stdout: string; stderr: string };

describe('readers while a first run makes the SQLite ledger', () => {
  it('plan says no ledger yet (exit 0), status and dead-letter list say it is being made, schedule answers; the run then completes', async () => {
    const ws = workspace({ handler: { command: ['true'] }, schedule: { cron: '*/5 * * * *', timeZone: 'UTC' } }, { 'a.txt': 'a', 'b.txt': 'b' });
    mkdirSync(ws.state, { recursive: true });
    // The first run's open, as src/ledger/sqlite/index.ts makes it: WAL, then the migrations,
    // which stop at the second one's start to let the readers look (real processes).
    const db = new Database(ws.db);
    db.pragma('auto_vacuum = INCREMENTAL');
    db.pragma('journal_mode = WAL');
    const seen: Record<string, Seen> = {};
    db.function('probe', () => {
      for (const args of [['plan', '--json'], ['status'], ['dead-letter', 'list'], ['schedule', '--json']]) {
        const r = spawnSync(process.execPath, [CLI, ...args, '-c', ws.configPath], { encoding: 'utf8', timeout: 30_000 });
        seen[args[0]!] = { code: r.status, stdout: r.stdout, stderr: r.stderr };
      }
      return 0;
    });
    const probed = MIGRATIONS.map((m, i) => (i === 1 ? { ...m, sql: `SELECT probe();\n${m.sql}` } : m));
    migrate(db, probed);
    db.close();

    const plan = seen.plan!;
    expect(plan.code, plan.stderr).toBe(0);
    expect(JSON.parse(plan.stdout)).toMatchObject({ ledger: 'none', wouldAttempt: 2, new: { count: 2 } });
    for (const cmd of ['status', 'dead-letter']) {
      expect(seen[cmd]!.code, cmd).toBe(1);
      expect(seen[cmd]!.stderr).toBe(
        `cronsafe: state store unavailable (sqlite ${ws.db}): no ledger in ${ws.db} yet: it holds no tables (a first run is creating it now, or could not write it: a full disk?); the next run creates it\n`,
      );
    }
    expect(seen.schedule!.code, seen.schedule!.stderr).toBe(0);
    expect(JSON.parse(seen.schedule!.stdout)).toMatchObject({ lastRunStartedAt: null });

    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
  }, 60_000);
});
