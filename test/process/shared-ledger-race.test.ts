import { existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { lockLedgerFile, tryLock } from '../../src/ledger/sqlite/flock.js';
import { holderLine } from '../../src/ledger/store-files.js';
import { FIXTURES, finished, runCli, spawnCli } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];
const FILES = ['a.txt', 'b.txt', 'c.txt'];

/** Configs of the given names in one directory, each with its own source, output and lock.path, all on `state.sqlite`. */
function jobs(names: string[], state: (name: string) => string, lock?: (name: string) => string) {
  const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-shared-ledger-'));
  const job = (name: string) => {
    const source = path.join(dir, `${name}-in`);
    mkdirSync(source);
    for (const f of FILES) writeFileSync(path.join(source, f), `${name} ${f}`);
    const configPath = path.join(dir, `${name}.yaml`);
    const out = path.join(dir, `${name}-out`);
    const config = { name, source: { directory: source }, output: { directory: out }, handler: { command: COPY }, state: { sqlite: state(name) }, lock: { path: lock?.(name) ?? `.cronsafe/${name}.lock` }, log: { level: 'info' } };
    writeFileSync(configPath, YAML.stringify(config));
    return { name, configPath, out };
  };
  return { dir, jobs: names.map(job) };
}
const outputs = (dir: string) => (existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.out')).sort() : []);

/** The job recorded in a ledger, if it has its tables yet (undefined: not migrated yet; null: none recorded). */
function recordedJob(file: string): string | null | undefined {
  if (!existsSync(file)) return undefined;
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    if (!db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'meta'").get()) return undefined;
    return (db.prepare("SELECT value FROM meta WHERE key = 'job'").pluck().get() as string | undefined) ?? null;
  } finally {
    db.close();
  }
}

/** What a run does right after its lock, on a new ledger: record its job's name. */
function recordJob(file: string, job: string): void {
  const db = new Database(file);
  try {
    db.pragma('busy_timeout = 5000');
    db.prepare("INSERT OR IGNORE INTO meta (key, value) VALUES ('job', ?)").run(job);
  } finally {
    db.close();
  }
}

describe('two jobs started together on one new ledger', () => {
  it('the start that finds the run lock held does not take the new ledger as its own: another job is refused with 78, naming both jobs and the file', async () => {
    const { dir, jobs: [alpha, beta] } = jobs(['alpha', 'beta'], () => 'shared/ledger.db');
    const ledger = path.join(dir, 'shared/ledger.db');
    mkdirSync(path.dirname(ledger));
    // Alpha's run between its lock and its open: the ledger file flocked, no job recorded yet.
    const release = lockLedgerFile(ledger)!;
    expect(release).not.toBeNull();
    try {
      const b = spawnCli(['run', '-c', beta!.configPath]);
      // Beta found the lock held and opened the ledger for its skip (it made the tables).
      await until(() => recordedJob(ledger) !== undefined, 'the skipping start made the ledger');
      // Before: beta recorded itself as the owner and exited 0 ("skipped: another run holds
      // the lock"), and alpha, which held the lock, was then refused (78) on its own ledger.
      expect(recordedJob(ledger)).toBeNull();
      recordJob(ledger, 'alpha');
      const { code } = await b.exited;
      expect(code, b.stdout()).toBe(78);
      expect(b.stderr()).toContain('state.sqlite');
      expect(b.stderr()).toContain(ledger);
      expect(b.stderr()).toContain('job "alpha"');
      expect(b.stderr()).toContain('"beta"');
      expect(finished(b)).toBeUndefined(); // refused, not a skip ("run finished", outcome skipped-locked)
    } finally {
      release();
    }
    expect(recordedJob(ledger)).toBe('alpha');
    const a = await runCli(['run', '-c', alpha!.configPath]);
    expect(a.code, a.stderr).toBe(0);
    expect(outputs(alpha!.out)).toEqual(FILES.map((f) => `${f}.out`));
    expect(outputs(beta!.out)).toEqual([]);
  });

  it('a second start of the same job on a new ledger still skips with 0, once the run holding it recorded its name', async () => {
    const { dir, jobs: [alpha] } = jobs(['alpha'], () => 'shared/ledger.db');
    const ledger = path.join(dir, 'shared/ledger.db');
    mkdirSync(path.dirname(ledger));
    const release = lockLedgerFile(ledger)!;
    try {
      const second = spawnCli(['run', '-c', alpha!.configPath]);
      await until(() => recordedJob(ledger) !== undefined, 'the skipping start made the ledger');
      recordJob(ledger, 'alpha');
      const { code } = await second.exited;
      expect(code, second.stderr()).toBe(0);
      expect(finished(second)).toMatchObject({ outcome: 'skipped-locked' });
      expect(second.lines.filter((l) => l.level === 'warn')).toEqual([]); // the skip was recorded
    } finally {
      release();
    }
  });

  it('two configs sharing lock.path but not the ledger: the one kept out skips with 0 and its own new ledger is its own', async () => {
    const { dir, jobs: [, beta] } = jobs(['alpha', 'beta'], (name) => `.cronsafe/${name}.db`, () => 'shared.lock');
    const lockFile = path.join(dir, 'shared.lock');
    // Alpha's run holds the shared lock.path (a flock, as the run's; the holder line names alpha).
    writeFileSync(lockFile, '');
    const held = tryLock(lockFile, holderLine('host:1:run', 'alpha'))!;
    try {
      const b = await runCli(['run', '-c', beta!.configPath]);
      expect(b.code, b.stderr).toBe(0);
      expect(finished(b)).toMatchObject({ outcome: 'skipped-locked' });
      expect(recordedJob(path.join(dir, '.cronsafe/beta.db'))).toBe('beta');
    } finally {
      held.release();
    }
  });

  it('started at once through the CLI, again and again: never one skipped (0) while the other is refused (78)', async () => {
    for (let i = 0; i < 3; i++) {
      const { dir, jobs: [alpha, beta] } = jobs(['alpha', 'beta'], () => 'shared/ledger.db');
      const [a, b] = [spawnCli(['run', '-c', alpha!.configPath]), spawnCli(['run', '-c', beta!.configPath])];
      const codes = [(await a.exited).code, (await b.exited).code].sort();
      // One ran (0, completed), the other is refused (78); which one is a race.
      expect(codes, `${a.stderr()}${b.stderr()}`).toEqual([0, 78]);
      const winner = codes[0] === (await a.exited).code ? a : b;
      expect(finished(winner)).toMatchObject({ outcome: 'completed' });
      expect(recordedJob(path.join(dir, 'shared/ledger.db'))).toBe(winner === a ? 'alpha' : 'beta');
    }
  });
});
