import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { migrate } from '../../src/ledger/sqlite/migrate.js';
import { MIGRATIONS } from '../../src/ledger/sqlite/migrations/index.js';
import { FIXTURES, runCli } from '../helpers/cli.js';

const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];

/** Two jobs' configs (with a schedule) that name one state.sqlite, not made yet. */
function twoConfigs() {
  const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-op-identity-'));
  const config = (name: string) => {
    const source = path.join(dir, `${name}-in`);
    mkdirSync(source);
    for (const f of ['a.txt', 'b.txt', 'c.txt']) writeFileSync(path.join(source, f), `${name} ${f}`);
    const file = path.join(dir, `${name}.yaml`);
    const schedule = { cron: '*/5 * * * *', timeZone: 'UTC' };
    writeFileSync(file, YAML.stringify({ name, source: { directory: source }, output: { directory: path.join(dir, `${name}-out`) }, handler: { command: COPY }, state: { sqlite: 'shared.db' }, schedule }));
    return file;
  };
  return { alpha: config('alpha'), beta: config('beta'), db: path.join(dir, 'shared.db') };
}

/** Two jobs whose configs name one state.sqlite; alpha has run on it (three items done). */
async function sharedLedger() {
  const { alpha, beta, db } = twoConfigs();
  const r = await runCli(['run', '-c', alpha]);
  expect(r.code, r.stderr).toBe(0);
  // b.txt dead, as a run dead-letters it: what dead-letter retry moves.
  const h = new Database(db);
  h.prepare(`UPDATE items SET state = 'dead', dead_at = done_at, done_at = NULL, last_error = 'x' WHERE id = 'b.txt'`).run();
  h.close();
  return { alpha, beta, db };
}

function ledgerOf(db: string): { job: string | undefined; items: Array<{ id: string; state: string }> } {
  const h = new Database(db, { readonly: true });
  try {
    const job = h.prepare(`SELECT value FROM meta WHERE key = 'job'`).pluck().get() as string | undefined;
    return { job, items: h.prepare('SELECT id, state FROM items ORDER BY id').all() as Array<{ id: string; state: string }> };
  } finally {
    h.close();
  }
}

const WRITES = [
  ['requeue', '--all'],
  ['requeue', 'a.txt'],
  ['dead-letter', 'retry', '--all'],
  ['dead-letter', 'retry', 'b.txt'],
];

describe("requeue and dead-letter retry on a ledger that is not this job's", () => {
  it('no job recorded yet (a run that died between its migration and its name): exit 1, nothing changed, the ledger not made theirs (before: beta adopted it, and alpha was refused with 78)', async () => {
    const { alpha, beta, db } = await sharedLedger();
    const h = new Database(db);
    h.prepare(`DELETE FROM meta WHERE key = 'job'`).run();
    h.close();
    const before = ledgerOf(db);
    for (const args of WRITES) {
      const r = await runCli([...args, '-c', beta]);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(1);
      expect(r.stderr).toContain('no job is recorded');
      expect(r.stderr).toContain('job "beta"');
      expect(ledgerOf(db)).toEqual(before);
    }
    // Nor under alpha's own config: it cannot tell either (its run names it).
    const own = await runCli(['requeue', '--all', '-c', alpha]);
    expect(own.code).toBe(1);
    expect(ledgerOf(db)).toEqual(before);
    // The job whose ledger it is still runs on it, and names it.
    const run = await runCli(['run', '-c', alpha]);
    expect(run.code, run.stderr).toBe(0);
    expect(ledgerOf(db).job).toBe('alpha');
    const retried = await runCli(['dead-letter', 'retry', 'b.txt', '-c', alpha]);
    expect(retried.code, retried.stderr).toBe(0);
    expect(retried.stdout).toBe('requeued 1 dead item\n');
  });

  it("another job's: exit 78 naming the owner, nothing changed", async () => {
    const { beta, db } = await sharedLedger();
    const before = ledgerOf(db);
    expect(before.job).toBe('alpha');
    for (const args of WRITES) {
      const r = await runCli([...args, '-c', beta]);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain('is the ledger of job "alpha"');
      expect(ledgerOf(db)).toEqual(before);
    }
  });
});

/** A ledger of an older schema (migrations up to `version`), `job` recorded when given. */
function olderLedger(db: string, version: number, job?: string): void {
  const h = new Database(db);
  migrate(h, MIGRATIONS.filter((m) => m.version <= version));
  if (job !== undefined) h.prepare(`INSERT INTO meta (key, value) VALUES ('job', ?)`).run(job);
  h.close();
}
const schemaOf = (db: string): number => {
  const h = new Database(db, { readonly: true });
  try {
    return h.prepare('SELECT max(version) FROM schema_migrations').pluck().get() as number;
  } finally {
    h.close();
  }
};
const LATEST = Math.max(...MIGRATIONS.map((m) => m.version));
/** The job recorded in `db`; undefined too when its schema has no meta table yet (before version 3). */
const recordedJob = (db: string): string | undefined => {
  const h = new Database(db, { readonly: true });
  try {
    if (h.prepare(`SELECT 1 FROM sqlite_master WHERE name = 'meta'`).get() === undefined) return undefined;
    return h.prepare(`SELECT value FROM meta WHERE key = 'job'`).pluck().get() as string | undefined;
  } finally {
    h.close();
  }
};

describe('a ledger of an older schema', () => {
  it("another job's: run and schedule refuse it (78) before migrating it (before: upgraded, then refused, and its owner's older cronsafe could no longer open it)", async () => {
    const { beta, db } = twoConfigs();
    olderLedger(db, LATEST - 1, 'alpha');
    for (const args of [['run'], ['schedule']]) {
      const r = await runCli([...args, '-c', beta]);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain('is the ledger of job "alpha"');
      expect(schemaOf(db)).toBe(LATEST - 1);
    }
  });

  it("no job recorded (from before job names): schedule answers without making it its job's (before: recorded as beta's, and alpha's run was refused with 78)", async () => {
    const { alpha, beta, db } = twoConfigs();
    olderLedger(db, 2);
    const r = await runCli(['schedule', '--json', '-c', beta]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ job: 'beta' });
    expect(recordedJob(db)).toBeUndefined();
    // Not migrated either (before: to the latest schema, which an older cronsafe refuses).
    expect(schemaOf(db)).toBe(2);
    const run = await runCli(['run', '-c', alpha]);
    expect(run.code, run.stderr).toBe(0);
    expect(ledgerOf(db).job).toBe('alpha');
  });

  it.each([
    ['its own job recorded', LATEST - 1, 'beta'],
    ['no job recorded (from before job names)', 2, undefined],
  ])("%s: schedule --json reads the last run's start and leaves it unmigrated, so the job's older cronsafe still opens it (before: migrated, and refused as newer)", async (_what, version, job) => {
    const { beta, db } = twoConfigs();
    olderLedger(db, version, job);
    // A run the older cronsafe started on it.
    const started = Date.parse('2026-12-01T10:00:00.000Z');
    const h = new Database(db);
    h.prepare(`INSERT INTO runs (run_id, owner, started_at, finished_at, outcome) VALUES ('old-run', 'host:1:old-run', ?, ?, 'completed')`).run(started, started + 1000);
    h.close();
    const r = await runCli(['schedule', '--json', '--at', '2026-12-01T10:02:00Z', '-c', beta]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ job: 'beta', lastRunStartedAt: '2026-12-01T10:00:00.000Z' });
    expect(schemaOf(db)).toBe(version);
    expect(recordedJob(db)).toBe(job);
    // status still says what it does of such a ledger: it does not migrate it either.
    const status = await runCli(['status', '-c', beta]);
    expect(status.code).toBe(1);
    expect(status.stderr).toMatch(/older than this cronsafe's .*`cronsafe run` migrates it \(this command does not\)/);
    expect(schemaOf(db)).toBe(version);
  });
});
