import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { migrate } from '../../src/ledger/sqlite/migrate.js';
import { MIGRATIONS } from '../../src/ledger/sqlite/migrations/index.js';
import { FIXTURES, finished, runCli } from '../helpers/cli.js';

const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];
const FILES = ['a.txt', 'b.txt', 'c.txt'];

/** Two jobs' configs side by side in one directory, each with its own source and output. */
function twoJobs(state: Record<string, unknown> | undefined) {
  const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-jobs-'));
  const job = (name: string) => {
    const source = path.join(dir, `${name}-in`);
    mkdirSync(source);
    for (const f of FILES) writeFileSync(path.join(source, f), `${name} ${f}`);
    const configPath = path.join(dir, `${name}.yaml`);
    const config = { name, source: { directory: source }, output: { directory: path.join(dir, `${name}-out`) }, handler: { command: COPY }, log: { level: 'info' } };
    writeFileSync(configPath, YAML.stringify(state ? { ...config, state } : config));
    return { name, configPath, out: path.join(dir, `${name}-out`) };
  };
  return { dir, alpha: job('alpha'), beta: job('beta') };
}
const outputs = (dir: string) => (existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.out')).sort() : []);

describe('a ledger belongs to one job', () => {
  it('two configs in one directory without state: each gets its own ledger and does its own items', async () => {
    const { dir, alpha, beta } = twoJobs(undefined);
    const a = await runCli(['run', '-c', alpha.configPath]);
    expect(a.code, a.stderr).toBe(0);
    const b = await runCli(['run', '-c', beta.configPath]);
    expect(b.code, b.stderr).toBe(0);
    // Before: beta saw alpha's done ids as its own and wrote nothing.
    expect(outputs(beta.out)).toEqual(FILES.map((f) => `${f}.out`));
    expect(finished(b)?.counts).toMatchObject({ succeeded: 3 });
    expect(readdirSync(path.join(dir, '.cronsafe')).filter((f) => f.endsWith('.db')).sort()).toEqual(['alpha.db', 'beta.db']);
  });

  it('an explicitly shared state.sqlite is refused with exit 78 before anything runs, by run, status and dead-letter', async () => {
    const { dir, alpha, beta } = twoJobs({ sqlite: 'shared/state.db' });
    expect((await runCli(['run', '-c', alpha.configPath])).code).toBe(0);
    const b = await runCli(['run', '-c', beta.configPath]);
    expect(b.code).toBe(78);
    expect(b.stderr).toMatch(/state\.sqlite/);
    expect(b.stderr).toMatch(/name/);
    expect(b.stderr).toContain('job "alpha"');
    expect(b.stderr).toContain(path.join(dir, 'shared/state.db'));
    expect(outputs(beta.out)).toEqual([]);
    for (const args of [['status', '--json'], ['dead-letter', 'list'], ['validate']]) {
      const r = await runCli([...args, '-c', beta.configPath]);
      expect(r.code, args.join(' ')).toBe(78);
      expect(r.stderr).toContain('job "alpha"');
    }
    // Alpha's own ledger is untouched and still its own.
    const again = await runCli(['status', '--json', '-c', alpha.configPath]);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout).items).toMatchObject({ done: 3 });
    expect((await runCli(['validate', '-c', alpha.configPath])).code).toBe(0);
  });

  it('validate leaves an older schema or an unreadable ledger file to run (run migrates, or says what is wrong)', async () => {
    const { alpha } = twoJobs({ sqlite: 'shared/state.db' });
    const file = path.join(path.dirname(alpha.configPath), 'shared/state.db');
    mkdirSync(path.dirname(file), { recursive: true });
    const db = new Database(file);
    migrate(db, MIGRATIONS.slice(0, 1));
    db.close();
    const r = await runCli(['validate', '-c', alpha.configPath]);
    expect(r.code, r.stderr).toBe(0);
  });

  it('upgrades: the old default cronsafe.db is kept by its first job, and another job starts its own', async () => {
    const { dir, alpha, beta } = twoJobs(undefined);
    // A ledger from before job identities (schema 1-2), where alpha already did a.txt.
    const legacy = path.join(dir, '.cronsafe', 'cronsafe.db');
    mkdirSync(path.dirname(legacy));
    const db = new Database(legacy);
    migrate(db, MIGRATIONS.filter((m) => m.version <= 2));
    db.prepare(`INSERT INTO items (id, state, attempts, available_at, first_seen_at, updated_at, done_at) VALUES ('a.txt', 'done', 1, 0, 0, 0, 0)`).run();
    db.close();

    const a = await runCli(['run', '-c', alpha.configPath]);
    expect(a.code, a.stderr).toBe(0);
    expect(a.lines.some((l) => l.msg.startsWith('using the old default ledger file'))).toBe(true);
    expect(outputs(alpha.out)).toEqual(['b.txt.out', 'c.txt.out']); // a.txt was done already
    expect(existsSync(path.join(dir, '.cronsafe', 'alpha.db'))).toBe(false);

    const b = await runCli(['run', '-c', beta.configPath]);
    expect(b.code, b.stderr).toBe(0);
    expect(outputs(beta.out)).toEqual(FILES.map((f) => `${f}.out`));
    expect(existsSync(path.join(dir, '.cronsafe', 'beta.db'))).toBe(true);
  });

  /** An old (no job recorded) cronsafe.db where alpha did a.txt, with the run locks of the jobs that used it. */
  function oldSharedLedger(dir: string, locks: string[]): string {
    const legacy = path.join(dir, '.cronsafe', 'cronsafe.db');
    mkdirSync(path.dirname(legacy));
    const db = new Database(legacy);
    migrate(db, MIGRATIONS.filter((m) => m.version <= 2));
    db.prepare(`INSERT INTO items (id, state, attempts, available_at, first_seen_at, updated_at, done_at) VALUES ('a.txt', 'done', 1, 0, 0, 0, 0)`).run();
    db.close();
    for (const job of locks) writeFileSync(path.join(dir, '.cronsafe', `${job}.lock`), '');
    return legacy;
  }

  it("upgrades: another job that starts first does not adopt the old ledger its lock says was alpha's", async () => {
    const { dir, alpha, beta } = twoJobs(undefined);
    oldSharedLedger(dir, ['alpha']);
    const b = await runCli(['run', '-c', beta.configPath]);
    expect(b.code, b.stderr).toBe(0);
    expect(outputs(beta.out)).toEqual(FILES.map((f) => `${f}.out`)); // all of beta's, a.txt included
    expect(existsSync(path.join(dir, '.cronsafe', 'beta.db'))).toBe(true);
    const a = await runCli(['run', '-c', alpha.configPath]);
    expect(a.code, a.stderr).toBe(0);
    expect(a.lines.some((l) => l.msg.startsWith('using the old default ledger file'))).toBe(true);
    expect(outputs(alpha.out)).toEqual(['b.txt.out', 'c.txt.out']);
  });

  it('upgrades: an old ledger both jobs ran on (both locks beside it) is refused with 78 until state.sqlite says which', async () => {
    const { dir, alpha, beta } = twoJobs(undefined);
    const legacy = oldSharedLedger(dir, ['alpha', 'beta']);
    for (const ws of [alpha, beta]) {
      for (const args of [['validate'], ['run']]) {
        const r = await runCli([...args, '-c', ws.configPath]);
        expect(r.code, `${args[0]}: ${r.stderr}`).toBe(78);
        expect(r.stderr).toContain('state.sqlite');
        expect(r.stderr).toContain('items may be mixed');
      }
      expect(outputs(ws.out)).toEqual([]);
    }
    // Told explicitly, alpha keeps it.
    writeFileSync(alpha.configPath, YAML.stringify({ ...(YAML.parse(readFileSync(alpha.configPath, 'utf8')) as object), state: { sqlite: legacy } }));
    const a = await runCli(['run', '-c', alpha.configPath]);
    expect(a.code, a.stderr).toBe(0);
    expect(outputs(alpha.out)).toEqual(['b.txt.out', 'c.txt.out']);
  });

  // A job named `cronsafe`: its default `<name>.db` is the old shared default's file name.
  function namedCronsafe(dir: string) {
    const source = path.join(dir, 'cronsafe-in');
    mkdirSync(source);
    for (const f of FILES) writeFileSync(path.join(source, f), `cronsafe ${f}`);
    const configPath = path.join(dir, 'cronsafe.yaml');
    const out = path.join(dir, 'cronsafe-out');
    writeFileSync(configPath, YAML.stringify({ name: 'cronsafe', source: { directory: source }, output: { directory: out }, handler: { command: COPY }, log: { level: 'info' } }));
    return { configPath, out };
  }

  it("upgrades: a job named cronsafe does not adopt the old default ledger its lock says was alpha's (78 until state.sqlite says)", async () => {
    const { dir, alpha } = twoJobs(undefined);
    const legacy = oldSharedLedger(dir, ['alpha']);
    const job = namedCronsafe(dir);
    // Before: exit 0, alpha's old ledger became cronsafe's; its a.txt was skipped as done
    // (never processed), and alpha then started a new ledger and did a.txt again.
    for (const args of [['run'], ['validate'], ['status']]) {
      const r = await runCli([...args, '-c', job.configPath]);
      expect(r.code, `${args[0]}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain('state.sqlite');
      expect(r.stderr).toContain(legacy);
      expect(r.stderr).toContain('"alpha"');
    }
    expect(outputs(job.out)).toEqual([]);
    const a = await runCli(['run', '-c', alpha.configPath]);
    expect(a.code, a.stderr).toBe(0);
    expect(a.lines.some((l) => l.msg.startsWith('using the old default ledger file'))).toBe(true);
    expect(outputs(alpha.out)).toEqual(['b.txt.out', 'c.txt.out']); // alpha's ledger is still alpha's

    // Given a file of its own, as the message says, it does all of its own items.
    writeFileSync(job.configPath, YAML.stringify({ ...(YAML.parse(readFileSync(job.configPath, 'utf8')) as object), state: { sqlite: '.cronsafe/cronsafe.own.db' } }));
    const c = await runCli(['run', '-c', job.configPath]);
    expect(c.code, c.stderr).toBe(0);
    expect(outputs(job.out)).toEqual(FILES.map((f) => `${f}.out`));
  });

  it('upgrades: a job named cronsafe beside the old default ledger alpha adopted is told its default is that file, not to leave state.sqlite unset', async () => {
    const { dir, alpha } = twoJobs(undefined);
    const legacy = oldSharedLedger(dir, ['alpha']);
    expect((await runCli(['run', '-c', alpha.configPath])).code).toBe(0); // alpha records itself in it
    const job = namedCronsafe(dir);
    const r = await runCli(['run', '-c', job.configPath]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toContain(legacy);
    expect(r.stderr).toContain('"alpha"');
    // Before: "give this job its own state.sqlite (or leave it unset: the default ... is one file per name)", and it was unset.
    expect(r.stderr).not.toContain('leave it unset');
    expect(r.stderr).toMatch(/job named "cronsafe"/);
  });

  it("upgrades: another job that starts first does not adopt the old ledger its lock says was the job named cronsafe's", async () => {
    const { dir, alpha } = twoJobs(undefined);
    oldSharedLedger(dir, ['cronsafe']);
    const job = namedCronsafe(dir);
    // Before: alpha took it (cronsafe.db, the other job's <name>.db, exists: read as that job
    // having a ledger of its own), skipped the job's done a.txt as its own, recorded itself in
    // it, and the job named cronsafe was refused (78) on the ledger it had run on.
    const a = await runCli(['run', '-c', alpha.configPath]);
    expect(a.code, a.stderr).toBe(0);
    expect(outputs(alpha.out)).toEqual(FILES.map((f) => `${f}.out`));
    expect(existsSync(path.join(dir, '.cronsafe', 'alpha.db'))).toBe(true);
    const c = await runCli(['run', '-c', job.configPath]);
    expect(c.code, c.stderr).toBe(0);
    expect(outputs(job.out)).toEqual(['b.txt.out', 'c.txt.out']); // its own a.txt was done already
  });

  it('upgrades: an old ledger both another job and the job named cronsafe ran on is refused to that job with 78, as for any two jobs', async () => {
    const { dir, alpha } = twoJobs(undefined);
    oldSharedLedger(dir, ['alpha', 'cronsafe']);
    const r = await runCli(['run', '-c', alpha.configPath]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toContain('items may be mixed');
    expect(outputs(alpha.out)).toEqual([]);
  });

  it('upgrades: a job named cronsafe keeps the old default ledger it ran on itself (its own lock beside it)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-jobs-'));
    oldSharedLedger(dir, ['cronsafe']);
    const job = namedCronsafe(dir);
    const r = await runCli(['run', '-c', job.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(outputs(job.out)).toEqual(['b.txt.out', 'c.txt.out']); // its own a.txt was done already
    expect((await runCli(['run', '-c', job.configPath])).code).toBe(0);
  });

  it('renaming a job: the refusal points to "Renaming a job", whose steps keep the ledger, and the old name is then nobody sharing the output directory', async () => {
    const { dir, alpha } = twoJobs(undefined);
    expect((await runCli(['run', '-c', alpha.configPath])).code).toBe(0);
    const config = YAML.parse(readFileSync(alpha.configPath, 'utf8')) as Record<string, unknown>;
    const ledger = path.join(dir, '.cronsafe', 'alpha.db');
    const renamed = path.join(dir, 'renamed.yaml');

    // The ledger kept by state.sqlite (as the chart does): refused, and told where to read how.
    writeFileSync(renamed, YAML.stringify({ ...config, name: 'omega', state: { sqlite: ledger } }));
    const refused = await runCli(['run', '-c', renamed]);
    expect(refused.code).toBe(78);
    expect(refused.stderr).toContain('"Renaming a job"'); // before: only "or fix name"
    const docs = readFileSync(path.join(FIXTURES, '../../docs/operations.md'), 'utf8');
    expect(docs).toContain('## Renaming a job');

    // The steps: the new name recorded, the default file renamed, the old temp directory gone.
    const db = new Database(ledger);
    db.prepare("UPDATE meta SET value = 'omega' WHERE key = 'job'").run();
    db.close();
    renameSync(ledger, path.join(dir, '.cronsafe', 'omega.db'));
    rmSync(path.join(dir, '.cronsafe', 'alpha.lock'));
    writeFileSync(renamed, YAML.stringify({ ...config, name: 'omega' }));
    const before = await runCli(['run', '-c', renamed]);
    expect(before.code, before.stderr).toBe(0);
    expect(finished(before)?.counts).toMatchObject({ scanned: 3, claimed: 0 }); // nothing done again
    // Until step 3, the old name is "another job" on the output directory, on every run; the warning says what to remove.
    const shared = before.lines.find((l) => l.msg?.startsWith('output.directory is shared'));
    expect(shared).toMatchObject({ jobs: ['alpha'] });
    expect(shared?.msg).toContain('.cronsafe-tmp/job-<name>'); // before: not said
    rmSync(path.join(alpha.out, '.cronsafe-tmp', 'job-alpha'), { recursive: true });
    const after = await runCli(['run', '-c', renamed]);
    expect(after.code, after.stderr).toBe(0);
    expect(after.lines.filter((l) => l.level === 'warn')).toEqual([]);
    expect(outputs(alpha.out)).toEqual(FILES.map((f) => `${f}.out`));
  });

  it('two configs with the same name and different sources (a copy-paste): the run says the source changed, each time it does', async () => {
    const { dir, alpha } = twoJobs(undefined);
    const copy = path.join(dir, 'alpha-copy.yaml');
    const other = path.join(dir, 'other-in');
    mkdirSync(other);
    for (const f of FILES) writeFileSync(path.join(other, f), `other ${f}`);
    const config = YAML.parse(readFileSync(alpha.configPath, 'utf8')) as { source: { directory: string } };
    writeFileSync(copy, YAML.stringify({ ...config, source: { directory: other } }));
    const warning = (r: { lines: Array<{ msg?: string; [k: string]: unknown }> }) => r.lines.find((l) => l.msg?.startsWith('source.directory is not the one'));

    const first = await runCli(['run', '-c', alpha.configPath]);
    expect(first.code, first.stderr).toBe(0);
    expect(warning(first)).toBeUndefined();
    const again = await runCli(['run', '-c', alpha.configPath]);
    expect(warning(again)).toBeUndefined(); // the same source: nothing to say

    // The copy's a.txt..c.txt are ids alpha finished: skipped as done, which the warning names.
    const b = await runCli(['run', '-c', copy]);
    expect(b.code, b.stderr).toBe(0);
    expect(warning(b)).toMatchObject({ level: 'warn', sourceDirectory: other, before: path.join(dir, 'alpha-in'), job: 'alpha' });
    expect(warning(b)?.msg).toContain('give each its own name');
    const back = await runCli(['run', '-c', alpha.configPath]);
    expect(warning(back)).toMatchObject({ sourceDirectory: path.join(dir, 'alpha-in'), before: other });
  });

  it('two configs of one name in two directories (each its default ledger) on one output directory: the run says another ledger of its name writes there', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'cronsafe-jobs-'));
    const out = path.join(root, 'out');
    const configs = ['first', 'copy'].map((d) => {
      const source = path.join(root, d, 'in');
      mkdirSync(source, { recursive: true });
      for (const f of FILES) writeFileSync(path.join(source, f), `${d} ${f}`);
      const configPath = path.join(root, d, 'job.yaml');
      writeFileSync(configPath, YAML.stringify({ name: 'same', source: { directory: source }, output: { directory: out }, handler: { command: COPY }, log: { level: 'info' } }));
      return configPath;
    });
    const warning = (r: { lines: Array<{ msg?: string; [k: string]: unknown }> }) => r.lines.find((l) => l.msg?.startsWith('output.directory was last written by a job named'));
    const first = await runCli(['run', '-c', configs[0]!]);
    expect(first.code, first.stderr).toBe(0);
    expect(warning(first)).toBeUndefined();
    expect(warning(await runCli(['run', '-c', configs[0]!]))).toBeUndefined(); // its own ledger: nothing to say
    // The copy's run replaces the first's outputs of a.txt..c.txt: before, nothing said so.
    const copy = await runCli(['run', '-c', configs[1]!]);
    expect(copy.code, copy.stderr).toBe(0);
    expect(readFileSync(path.join(out, 'a.txt.out'), 'utf8')).toMatch(/^copy a.txt/);
    expect(warning(copy)).toMatchObject({ level: 'warn', ledger: path.join(root, 'copy', '.cronsafe', 'same.db') });
    expect(warning(copy)?.msg).toContain('give each its own name');
    const back = await runCli(['run', '-c', configs[0]!]);
    expect(warning(back)).toMatchObject({ ledger: path.join(root, 'first', '.cronsafe', 'same.db') });
    expect(warning(await runCli(['run', '-c', configs[0]!]))).toBeUndefined(); // its own mark again
  });

  it('one source reached by two names (a link to the config\'s directory, a relative source.directory): nothing to say', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-jobs-'));
    mkdirSync(path.join(dir, 'in'));
    for (const f of FILES) writeFileSync(path.join(dir, 'in', f), f);
    writeFileSync(path.join(dir, 'job.yaml'), YAML.stringify({ name: 'linked', source: { directory: './in' }, output: { directory: './out' }, handler: { command: COPY }, log: { level: 'info' } }));
    // cron says /srv/job, a shell says where the link leads: one config, one source.
    const link = `${dir}-link`;
    symlinkSync(dir, link);
    const first = await runCli(['run', '-c', path.join(dir, 'job.yaml')]);
    expect(first.code, first.stderr).toBe(0);
    const viaLink = await runCli(['run', '-c', path.join(link, 'job.yaml')]);
    expect(viaLink.code, viaLink.stderr).toBe(0);
    expect(viaLink.lines.filter((l) => l.level === 'warn')).toEqual([]);
  });
});
