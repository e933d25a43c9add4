import { chmodSync, chownSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { finished, runCli, workspace } from '../helpers/cli.js';
import { chownTree, NOBODY } from '../helpers/users.js';

const isRoot = process.getuid?.() === 0;
/** The group the runner and an operator share; the state directory is writable for it (setgid). */
const GROUP = 4242;
/** An operator in that group: may create files in the state directory, may not write the ledger (0644). */
const OPERATOR = 65533;

describe('a command of another user leaves nothing in the state directory that stops the run', () => {
  // An SQLite open by a user who may not write the ledger makes its -wal and -shm when they
  // are missing, owned by that user with the ledger's mode (0644): the runner could not write
  // them, and every run failed with "attempt to write a readonly database" until someone
  // deleted them.
  it.skipIf(!isRoot)('plan, status, dead-letter list, requeue and dead-letter retry as an operator of the group, then a run', async () => {
    const ws = workspace({ handler: { command: ['cp', '{path}', '{output}'] }, log: { level: 'info' } }, { 'a.txt': 'a' });
    chmodSync(ws.dir, 0o755);
    mkdirSync(ws.state);
    chownTree(ws.dir, NOBODY);
    chownSync(ws.state, NOBODY, GROUP);
    chmodSync(ws.state, 0o2775);
    const asRunner = { uid: NOBODY, gid: GROUP };
    const first = await runCli(['run', '-c', ws.configPath], asRunner);
    expect(first.code, first.stderr).toBe(0);
    const before = readdirSync(ws.state).sort();

    const asOperator = { uid: OPERATOR, gid: GROUP };
    for (const args of [['plan'], ['status'], ['dead-letter', 'list'], ['requeue', '--all', '--dry-run']]) {
      const r = await runCli([...args, '-c', ws.configPath], asOperator);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
    }
    expect(readdirSync(ws.state).sort()).toEqual(before);
    // A writer it may not be: refused before SQLite makes anything, naming the ledger's owner.
    for (const args of [['requeue', '--all'], ['dead-letter', 'retry', '--all']]) {
      const r = await runCli([...args, '-c', ws.configPath], asOperator);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`state store unavailable (sqlite ${ws.db}): ${ws.db} is not writable by this user (uid ${OPERATOR}): it is owned by uid ${NOBODY}`);
    }
    expect(readdirSync(ws.state).sort()).toEqual(before);

    writeFileSync(path.join(ws.source, 'b.txt'), 'b');
    chownSync(path.join(ws.source, 'b.txt'), NOBODY, NOBODY);
    const next = await runCli(['run', '-c', ws.configPath], asRunner);
    expect(next.code, next.stderr).toBe(0);
    expect(finished(next)?.counts).toMatchObject({ succeeded: 1 });

    // Such files left by an earlier version: the run names the file and its owner, not
    // SQLite's "attempt to write a readonly database".
    for (const f of [`${ws.db}-wal`, `${ws.db}-shm`]) {
      writeFileSync(f, '');
      chownSync(f, OPERATOR, GROUP);
    }
    const blocked = await runCli(['run', '-c', ws.configPath], asRunner);
    expect(blocked.code).toBe(1);
    expect(blocked.stderr).toContain(`${ws.db}-wal is not writable by this user (uid ${NOBODY}): it is owned by uid ${OPERATOR} with mode 644, so SQLite cannot write the ledger; give it to this user (chown)`);
  });
});

describe('a ledger its own user may not write (mode 0444: a backup restored read-only)', () => {
  // It said "it is owned by uid N with mode 444; run this as that user" to that very user.
  // And a run said "cannot take the run lock <lock.path>: EACCES ... open '<ledger>'", naming
  // the lock file (writable) for the ledger's refusal.
  it.skipIf(!isRoot)('run, requeue and dead-letter retry by its owner say to give the owner write permission, not to run as the owner', async () => {
    const ws = workspace({ handler: { command: ['cp', '{path}', '{output}'] } }, { 'a.txt': 'a' });
    chmodSync(ws.dir, 0o755);
    mkdirSync(ws.state);
    chownTree(ws.dir, NOBODY);
    const asOwner = { uid: NOBODY, gid: NOBODY };
    const first = await runCli(['run', '-c', ws.configPath], asOwner);
    expect(first.code, first.stderr).toBe(0);
    chmodSync(ws.db, 0o444);
    for (const args of [['run'], ['requeue', '--all'], ['dead-letter', 'retry', '--all']]) {
      const r = await runCli([...args, '-c', ws.configPath], asOwner);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`${ws.db} is not writable by this user (uid ${NOBODY}), its owner: its mode is 444; give its owner write permission (chmod u+w ${ws.db})`);
      expect(r.stderr).not.toContain('run this as that user');
      expect(r.stderr).not.toContain('cannot take the run lock');
    }
  });
});

describe('a user who may not search the state directory', () => {
  // The ledger is there, made by a run, in a directory of mode 0700 (the run's user's).
  // existsSync read EACCES as "no file": status and dead-letter said "no run has created it
  // yet", plan said "no ledger yet: every item is new" (exit 0, every done item counted as
  // new), and validate crashed on the start journal's lstat (`fatal:`, a stack trace).
  it.skipIf(!isRoot)('is told so, naming the ledger and EACCES, by every command; validate checks the config without a stack trace; so is one who may not read the ledger', async () => {
    const ws = workspace({ handler: { command: ['true'] }, log: { level: 'info' } }, { 'a.txt': 'a' });
    chmodSync(ws.dir, 0o755);
    chmodSync(ws.source, 0o755);
    const first = await runCli(['run', '-c', ws.configPath]);
    expect(first.code, first.stderr).toBe(0);
    chmodSync(ws.state, 0o700);
    const other = { uid: NOBODY, gid: NOBODY };
    for (const args of [['status'], ['status', '--json'], ['dead-letter', 'list'], ['plan'], ['plan', '--json'], ['requeue', '--all', '--dry-run'], ['requeue', '--all'], ['dead-letter', 'retry', '--all']]) {
      const r = await runCli([...args, '-c', ws.configPath], other);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(1);
      expect(r.stdout, args.join(' ')).toBe('');
      expect(r.stderr, args.join(' ')).toBe(
        `cronsafe: state store unavailable (sqlite ${ws.db}): cannot reach the ledger file ${ws.db}: a directory on its way is not searchable by this user (uid ${NOBODY}) (EACCES); run this as the ledger's owner\n`,
      );
    }
    const v = await runCli(['validate', '-c', ws.configPath], other);
    expect(v.stderr).not.toMatch(/fatal|\n\s+at /);
    expect(v.code, v.stderr).toBe(0);
    // The directory searchable, the ledger not readable (mode 0600: a umask of 077): SQLite
    // said only "unable to open database file".
    chmodSync(ws.state, 0o755);
    chmodSync(ws.db, 0o600);
    for (const args of [['status'], ['dead-letter', 'list'], ['plan'], ['requeue', '--all', '--dry-run']]) {
      const r = await runCli([...args, '-c', ws.configPath], other);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(1);
      expect(r.stderr, args.join(' ')).toBe(
        `cronsafe: state store unavailable (sqlite ${ws.db}): ${ws.db} is not readable by this user (uid ${NOBODY}): it is owned by uid 0 with mode 600; run this as that user\n`,
      );
    }
    // Its owner still sees it all.
    const status = await runCli(['status', '--json', '-c', ws.configPath]);
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout).items).toMatchObject({ done: 1 });
  });
});

describe('a ledger behind a directory its user may not search (mode 0700, another owner)', () => {
  // The run said "cannot take the run lock <lock.path>: EACCES ... lstat '<ledger>'", naming
  // the lock file (on a directory it may write) for the ledger's directory.
  it.skipIf(!isRoot)('run names the ledger file and the directory it cannot pass, as status does, not the run lock', async () => {
    const ws = workspace({ handler: { command: ['cp', '{path}', '{output}'] } }, { 'a.txt': 'a' });
    chmodSync(ws.dir, 0o755);
    chownTree(ws.dir, NOBODY);
    // The lock beside the config, where the run's user may write; the ledger under a
    // directory of root's with mode 0700.
    const locked = path.join(ws.dir, 'root-only');
    mkdirSync(locked, { mode: 0o700 });
    const db = path.join(locked, 'state', 'job.db');
    writeFileSync(ws.configPath, readFileSync(ws.configPath, 'utf8').replace(`sqlite: ${ws.db}`, `sqlite: ${db}`).replace(`path: ${path.join(ws.state, 'cronsafe.lock')}`, `path: ${path.join(ws.dir, 'job.lock')}`));
    const r = await runCli(['run', '-c', ws.configPath], { uid: NOBODY, gid: NOBODY });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`state store unavailable (sqlite ${db}): cannot reach the ledger file ${db}: a directory on its way is not searchable by this user (uid ${NOBODY}) (EACCES)`);
    expect(r.stderr).not.toContain('cannot take the run lock');
    expect(readdirSync(ws.dir)).not.toContain('out');
  });
});
