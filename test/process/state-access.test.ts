import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/ledger/sqlite/migrate.js';
import { MIGRATIONS } from '../../src/ledger/sqlite/migrations/index.js';
import { CLI, configure, FIXTURES, runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

const KNOWN = Math.max(...MIGRATIONS.map((m) => m.version));
const isRoot = process.getuid?.() === 0;

/** The CLI as `nobody`, for directories that root could write anyway. */
async function asNobody(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { uid: 65534, gid: 65534, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const hard = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  clearTimeout(hard);
  return { code, stdout, stderr };
}

const failing = { module: path.join(FIXTURES, 'process/fail-some-module.mjs') };

describe('SQLite state problems name the store in use and its path (exit 1)', () => {
  it('the run lock directory cannot be made: its parent is a file (a config error, named, as for the ledger below)', async () => {
    const ws = workspace({ handler: failing }, { 'a.scc': 'a' });
    writeFileSync(path.join(ws.dir, 'plain-file'), '');
    const lock = path.join(ws.dir, 'plain-file', 'locks', 'job.lock');
    const cfg = workspace({ handler: failing, state: { sqlite: ws.db }, lock: { path: lock } }, { 'a.scc': 'a' });
    const r = await runCli(['run', '-c', cfg.configPath]);
    expect(r.code).toBe(78);
    expect(r.stderr).toContain(`lock.path: ${lock} cannot be created: a parent of the lock file is not a directory`);
    expect(r.stderr).not.toMatch(/postgres/);
  });

  it("the ledger's directory cannot be made: its parent is a file (a config error, named)", async () => {
    const ws = workspace({ handler: failing }, { 'a.scc': 'a' });
    writeFileSync(path.join(ws.dir, 'plain-file'), '');
    const db = path.join(ws.dir, 'plain-file', 'state', 'cronsafe.db');
    const cfg = workspace({ handler: failing, state: { sqlite: db } }, { 'a.scc': 'a' });
    const r = await runCli(['run', '-c', cfg.configPath]);
    expect(r.code).toBe(78);
    expect(r.stderr).toContain('state.sqlite');
    expect(r.stderr).toContain(`a parent of the ledger file is not a directory: ${db}`);
  });

  it.skipIf(!isRoot)('the state directory is not writable (as an unprivileged user)', async () => {
    const ws = workspace({ handler: failing }, { 'a.scc': 'a' });
    chmodSync(ws.dir, 0o755);
    mkdirSync(ws.state, { recursive: true, mode: 0o755 });
    const r = await asNobody(['run', '-c', ws.configPath]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`state store unavailable (sqlite ${ws.db}): cannot take the run lock ${path.join(ws.state, 'cronsafe.lock')}: EACCES`);
  });

  // The chart's layout: the lock file on the pod's /tmp, the ledger on a volume where this
  // user may not create its directory (a volume that ignores fsGroup, init-dirs turned off,
  // or a read-only file system). It said "cannot take the run lock <lock.path>: EACCES ...
  // mkdir '<state>'", naming the lock file, which was free, for the ledger's directory.
  it.skipIf(!isRoot)("the ledger's directory cannot be created (as an unprivileged user): run names the ledger's directory, not the lock file", async () => {
    const ws = workspace({ handler: failing }, { 'a.scc': 'a' });
    const locks = path.join(ws.dir, 'locks');
    mkdirSync(locks);
    chmodSync(locks, 0o777);
    configure(ws, { lock: { path: path.join(locks, 'job.lock') } });
    chmodSync(ws.dir, 0o755);
    const r = await asNobody(['run', '-c', ws.configPath]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`cronsafe: state store unavailable (sqlite ${ws.db}): cannot create the ledger's directory ${ws.state}: EACCES: permission denied, mkdir '${ws.state}'\n`);
    expect(existsSync(ws.state)).toBe(false);
  });

  // The same layout with the state directory there but not this user's to write (a volume
  // that ignores fsGroup with init-dirs off, a directory pre-created by root): the ledger's
  // open said "cannot take the run lock <lock.path>: EACCES ... open '<ledger>'".
  it.skipIf(!isRoot)('the ledger cannot be created in a state directory this user may not write (as an unprivileged user): run names the ledger and its directory, not the lock file', async () => {
    const ws = workspace({ handler: failing }, { 'a.scc': 'a' });
    const locks = path.join(ws.dir, 'locks');
    mkdirSync(locks);
    chmodSync(locks, 0o777);
    configure(ws, { lock: { path: path.join(locks, 'job.lock') } });
    chmodSync(ws.dir, 0o755);
    mkdirSync(ws.state, { mode: 0o755 });
    const r = await asNobody(['run', '-c', ws.configPath]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `cronsafe: state store unavailable (sqlite ${ws.db}): cannot open the ledger ${ws.db}: ${ws.state} is not writable by this user (uid 65534): it is owned by uid 0 with mode 755 (EACCES: permission denied, open '${ws.db}')\n`,
    );
    expect(existsSync(ws.db)).toBe(false);
  });

  // Its files (the ledger, the lock) still writable: SQLite cannot make the -wal and -shm
  // beside the ledger, and said only "attempt to write a readonly database" of a writable ledger.
  it.skipIf(!isRoot)('the state directory made read-only after a run: run names the directory (exit 1), not SQLite\'s "attempt to write a readonly database"', async () => {
    const ws = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'a' });
    chmodSync(ws.dir, 0o755);
    mkdirSync(ws.state);
    for (const p of [ws.dir, ws.source, ws.state, path.join(ws.source, 'a.txt'), ws.configPath]) chownSync(p, 65534, 65534);
    const first = await asNobody(['run', '-c', ws.configPath]);
    expect(first.code, first.stderr).toBe(0);
    chmodSync(ws.state, 0o555);
    const r = await asNobody(['run', '-c', ws.configPath]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `cronsafe: state store unavailable (sqlite ${ws.db}): ${ws.state} is not writable by this user (uid 65534), its owner: its mode is 555, so SQLite cannot make ${ws.db}-wal and ${ws.db}-shm beside the ledger; give its owner write permission (chmod u+w ${ws.state})\n`,
    );
  });

  it('the state volume full when a run starts (the chart: outputs and ledger on one PVC): one line naming the ledger, no stack trace', async (ctx) => {
    const files = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`item-${i}.txt`, `${i}\n`]));
    const ws = workspace({}, files);
    const volume = path.join(ws.dir, 'volume');
    mkdirSync(volume);
    if (!isRoot || spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=3m', 'tmpfs', volume]).status !== 0) ctx.skip();
    try {
      const h = path.join(ws.dir, 'big.sh');
      // Each output is 100 KiB: the 3 MiB volume is full after fewer than thirty.
      writeFileSync(h, '#!/bin/sh\nhead -c 102400 /dev/zero > "$2"\n', { mode: 0o755 });
      const db = path.join(volume, 'state', 'cronsafe.db');
      configure(ws, { output: { directory: path.join(volume, 'out') }, state: { sqlite: db }, handler: { command: [h, '{path}', '{output}'] } });
      const filling = await runCli(['run', '-c', ws.configPath]);
      expect(filling.code, filling.stderr).toBe(1);
      // Still full: the next run cannot write its start into the ledger, or, when what the
      // first run's stop freed lets it (the ledger's pages reused), stops at its first
      // output on the same full volume. Either way one line naming what is full.
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code).toBe(1);
      expect(r.stderr.split('\n')).toHaveLength(2);
      const ledgerFull = r.stderr.startsWith(`cronsafe: state store unavailable (sqlite ${db}): `) && r.stderr.endsWith(': database or disk is full\n');
      const outputFull = r.stderr.startsWith(`cronsafe: run failed: the file system of output.directory ${path.join(volume, 'out')} is full; stopping, nothing charged`);
      expect(ledgerFull || outputFull, r.stderr).toBe(true);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    } finally {
      spawnSync('umount', ['-l', volume]);
    }
  }, 120_000);
});

describe('the state volume filled between runs (by something else)', () => {
  it("says the ledger's file system has no space left, not only SQLite's 'disk I/O error' (its -shm cannot be made)", async (ctx) => {
    const ws = workspace({ handler: failing }, { 'a.scc': 'a' });
    const volume = path.join(ws.dir, 'volume');
    mkdirSync(volume);
    if (!isRoot || spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', volume]).status !== 0) ctx.skip();
    try {
      const db = path.join(volume, 'state', 'cronsafe.db');
      configure(ws, { state: { sqlite: db } });
      const first = await runCli(['run', '-c', ws.configPath]);
      expect(first.code, first.stderr).toBe(0);
      // A clean close removed the -wal and -shm; now the volume fills up.
      spawnSync('dd', ['if=/dev/zero', `of=${path.join(volume, 'filler')}`, 'bs=4k']);
      // (`status` and the other readers read it all the same: readers-ledger-full.test.ts.)
      for (const args of [['run'], ['dead-letter', 'retry', '--all']]) {
        const r = await runCli([...args, '-c', ws.configPath]);
        expect(r.code, r.stderr).toBe(1);
        expect(r.stderr.startsWith(`cronsafe: state store unavailable (sqlite ${db}): `), r.stderr).toBe(true);
        expect(r.stderr).toContain(`the file system of state.sqlite (${path.dirname(db)}) has no space left`);
      }
    } finally {
      spawnSync('umount', ['-l', volume]);
    }
  }, 60_000);
});

describe('the state volume out of inodes between runs (many small files)', () => {
  it("says the ledger's file system has no space left, not only SQLite's 'unable to open database file' (its -wal cannot be made)", async (ctx) => {
    const ws = workspace({ handler: failing }, { 'a.scc': 'a' });
    const volume = path.join(ws.dir, 'volume');
    mkdirSync(volume);
    if (!isRoot || spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4m,nr_inodes=16', 'tmpfs', volume]).status !== 0) ctx.skip();
    try {
      const db = path.join(volume, 'state', 'cronsafe.db');
      configure(ws, { state: { sqlite: db } });
      const first = await runCli(['run', '-c', ws.configPath]);
      expect(first.code, first.stderr).toBe(0);
      // A clean close removed the -wal and -shm; now small files take every inode left.
      for (let i = 0; spawnSync('touch', [path.join(volume, `f${i}`)]).status === 0; i++);
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr.startsWith(`cronsafe: state store unavailable (sqlite ${db}): `), r.stderr).toBe(true);
      expect(r.stderr).toContain(`the file system of state.sqlite (${path.dirname(db)}) has no space left`);
    } finally {
      spawnSync('umount', ['-l', volume]);
    }
  }, 60_000);
});

describe('status and dead-letter list only read the ledger', () => {
  it.skipIf(!isRoot)('work on a read-only state directory, creating nothing', async () => {
    const ws = workspace({ handler: failing, retry: { maxAttempts: 1 } }, { 'ok.scc': 'o', 'corrupt.scc': 'x' });
    chmodSync(ws.dir, 0o755);
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    chmodSync(ws.db, 0o644);
    const files = readdirSync(ws.state).sort();
    expect(files.filter((f) => f.endsWith('-wal') || f.endsWith('-shm'))).toEqual([]); // a clean close removes them

    const status = await asNobody(['status', '-c', ws.configPath, '--json']);
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 1 });
    const list = await asNobody(['dead-letter', 'list', '-c', ws.configPath, '--json']);
    expect(list.code, list.stderr).toBe(0);
    expect((JSON.parse(list.stdout) as Array<{ id: string }>).map((d) => d.id)).toEqual(['corrupt.scc']);
    expect(readdirSync(ws.state).sort()).toEqual(files);
    // retry must write: it says which store it cannot write, without a driver's stack trace.
    const retry = await asNobody(['dead-letter', 'retry', '-c', ws.configPath, 'corrupt.scc']);
    expect(retry.code).toBe(1);
    expect(retry.stderr).toContain(`state store unavailable (sqlite ${ws.db})`);
    expect(retry.stderr).not.toMatch(/\n\s+at /);
  });

  it('a ledger path under a file is a config error in validate, not a failure at run time', async () => {
    const ws = workspace({ handler: failing });
    writeFileSync(path.join(ws.dir, 'plain-file'), 'x');
    configure(ws, { state: { sqlite: path.join(ws.dir, 'plain-file', 'ledger.db') } });
    const r = await runCli(['validate', '-c', ws.configPath]);
    expect(r.code).toBe(78);
    expect(r.stderr).toContain('state.sqlite');
    expect(r.stderr).toContain('a parent of the ledger file is not a directory');
  });

  it('say when there is no ledger yet, and do not create one', async () => {
    const ws = workspace({ handler: failing });
    // [the writers too: dead-letter retry made an empty ledger (and its directory) at a
    // mistyped state.sqlite and said "requeued 0 dead items", exit 0]
    for (const args of [['status'], ['dead-letter', 'list'], ['dead-letter', 'retry', '--all'], ['dead-letter', 'retry', 'a.scc'], ['requeue', '--all']]) {
      const r = await runCli([...args, '-c', ws.configPath]);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr).toContain(`state store unavailable (sqlite ${ws.db}): no ledger file at ${ws.db}: no run has created it yet (check state.sqlite)`);
    }
    expect(existsSync(ws.db)).toBe(false);
    expect(existsSync(ws.state)).toBe(false);
  });

  it('a first run on a full state volume leaves an empty ledger file: status says no ledger yet (not "holds no cronsafe ledger"), schedule answers, the next run makes it', async (ctx) => {
    const ws = workspace({ schedule: { cron: '*/5 * * * *', timeZone: 'UTC' } }, { 'a.txt': 'a' });
    const volume = path.join(ws.dir, 'volume');
    mkdirSync(volume);
    if (!isRoot || spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', volume]).status !== 0) ctx.skip();
    try {
      const db = path.join(volume, 'cronsafe.db');
      configure(ws, { state: { sqlite: db }, lock: { path: path.join(volume, 'cronsafe.lock') }, handler: { command: ['true'] } });
      const filler = path.join(volume, 'filler');
      spawnSync('dd', ['if=/dev/zero', `of=${filler}`, 'bs=4k']);
      const first = await runCli(['run', '-c', ws.configPath]);
      expect(first.code).toBe(1);
      expect(first.stderr).toContain('database or disk is full');
      expect(readFileSync(db).length).toBe(0);
      for (const args of [['status'], ['dead-letter', 'list']]) {
        const r = await runCli([...args, '-c', ws.configPath]);
        expect(r.code, args.join(' ')).toBe(1);
        expect(r.stderr).toBe(`cronsafe: state store unavailable (sqlite ${db}): no ledger in ${db} yet: the file is empty (a first run is creating it now, or could not write it: a full disk?); the next run creates it\n`);
      }
      const schedule = await runCli(['schedule', '-c', ws.configPath, '--json']);
      expect(schedule.code, schedule.stderr).toBe(0);
      rmSync(filler);
      const next = await runCli(['run', '-c', ws.configPath]);
      expect(next.code, next.stderr).toBe(0);
      const status = await runCli(['status', '-c', ws.configPath, '--json']);
      expect(JSON.parse(status.stdout).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
    } finally {
      spawnSync('umount', ['-l', volume]);
    }
  }, 60_000);

  // A state volume mounted read-only (readOnly: true, a restored snapshot, a disk the kernel
  // remounted read-only after errors): the operator's writers said only SQLite's "unable to
  // open database file", which reads as a missing or damaged ledger.
  it("a state volume mounted read-only: dead-letter retry and requeue say that its file system is read-only; status still reads", async (ctx) => {
    const ws = workspace({ handler: failing, retry: { maxAttempts: 1 } }, { 'corrupt.scc': 'x', 'ok.scc': 'y' });
    const volume = path.join(ws.dir, 'volume');
    mkdirSync(volume);
    if (!isRoot || spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', volume]).status !== 0) ctx.skip();
    try {
      const db = path.join(volume, 'job.db');
      configure(ws, { state: { sqlite: db }, lock: { path: path.join(ws.dir, 'job.lock') } });
      expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
      expect(spawnSync('mount', ['-o', 'remount,ro', volume]).status).toBe(0);
      for (const args of [['dead-letter', 'retry', '--all'], ['requeue', '--all']]) {
        const r = await runCli([...args, '-c', ws.configPath]);
        expect(r.code, args.join(' ')).toBe(1);
        expect(r.stderr).toMatch(new RegExp(`^cronsafe: state store unavailable \\(sqlite ${db}\\): [^\\n]*\\(the file system of state\\.sqlite \\(${volume}\\) is mounted read-only: mount it read-write\\)\\n$`));
      }
      const status = await runCli(['status', '-c', ws.configPath, '--json']);
      expect(status.code, status.stderr).toBe(0);
      expect(JSON.parse(status.stdout).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 1 });
    } finally {
      spawnSync('umount', ['-l', volume]);
    }
  }, 60_000);

  // The kernel's own errors=remount-ro on ext4 (Linux 6.x: `emergency_ro`) leaves the mount
  // read-write to access(2), so the hint above was never given: SQLite's "unable to open
  // database file" alone again, which reads as a missing or damaged ledger.
  it('a state volume on ext4 gone read-only after an error (errors=remount-ro): dead-letter retry and requeue say so', async (ctx) => {
    const ws = workspace({ handler: failing, retry: { maxAttempts: 1 } }, { 'corrupt.scc': 'x', 'ok.scc': 'y' });
    const volume = path.join(ws.dir, 'volume');
    const image = path.join(ws.dir, 'state.img');
    mkdirSync(volume);
    if (!isRoot || spawnSync('truncate', ['-s', '16M', image]).status !== 0 || spawnSync('mkfs.ext4', ['-q', '-F', image]).status !== 0) ctx.skip();
    if (spawnSync('mount', ['-o', 'loop,errors=remount-ro', image, volume]).status !== 0) ctx.skip();
    try {
      const trigger = `/sys/fs/ext4/${path.basename(spawnSync('findmnt', ['-n', '-o', 'SOURCE', volume]).stdout.toString().trim())}/trigger_fs_error`;
      if (!existsSync(trigger)) ctx.skip();
      const db = path.join(volume, 'job.db');
      configure(ws, { state: { sqlite: db }, lock: { path: path.join(ws.dir, 'job.lock') } });
      expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
      spawnSync('sync');
      writeFileSync(trigger, '1');
      for (const args of [['dead-letter', 'retry', '--all'], ['requeue', '--all']]) {
        const r = await runCli([...args, '-c', ws.configPath]);
        expect(r.code, args.join(' ')).toBe(1);
        expect(r.stderr).toMatch(new RegExp(`^cronsafe: state store unavailable \\(sqlite ${db}\\): [^\\n]*\\(the file system of state\\.sqlite \\(${volume}\\) went read-only after an error [^\\n]*\\)\\n$`));
      }
    } finally {
      spawnSync('umount', ['-l', volume]);
    }
  }, 60_000);

  it('say that an older ledger needs a run to migrate it, and leave it as it is', async () => {
    const ws = workspace({ handler: failing });
    mkdirSync(ws.state, { recursive: true });
    const old = new Database(ws.db);
    migrate(old, MIGRATIONS.slice(0, KNOWN - 1));
    old.close();
    // Every command that only reads says so of itself (it named status and dead-letter list to plan and requeue --dry-run).
    // And the commands that write (requeue, dead-letter retry), which said so of themselves too.
    for (const args of [['status'], ['dead-letter', 'list'], ['plan'], ['requeue', '--all', '--dry-run'], ['requeue', '--all'], ['dead-letter', 'retry', '--all']]) {
      const r = await runCli([...args, '-c', ws.configPath]);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr).toContain(
        `ledger ${ws.db} has schema version ${KNOWN - 1}, older than this cronsafe's (${KNOWN}); \`cronsafe run\` migrates it (this command does not)`,
      );
    }
    const after = new Database(ws.db, { readonly: true });
    expect(after.prepare('SELECT max(version) AS v FROM schema_migrations').get()).toEqual({ v: KNOWN - 1 });
    after.close();
  });
});

describe.skipIf(PG_SKIP_REASON !== undefined)('status on PostgreSQL only reads', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('says when the schema holds no ledger yet (and creates none), then reads with a SELECT-only role', async () => {
    const url = await server.createDatabase('ro');
    const ws = workspace({ handler: failing, state: { postgres: url, schema: 'qc' }, retry: { maxAttempts: 1 } }, { 'corrupt.scc': 'x' });
    const none = await runCli(['status', '-c', ws.configPath]);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/state store unavailable \(postgres\): open read-only on PostgreSQL .* schema qc holds no cronsafe ledger yet/);
    const retry = await runCli(['dead-letter', 'retry', '--all', '-c', ws.configPath]);
    expect(retry.code, retry.stdout).toBe(1);
    expect(retry.stderr).toMatch(/schema qc holds no cronsafe ledger yet/);
    expect(await server.admin(`SELECT 1 FROM pg_namespace WHERE nspname = 'qc'`, [], 'ro')).toEqual([]);

    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    await server.admin(`CREATE ROLE reader LOGIN; GRANT USAGE ON SCHEMA qc TO reader; GRANT SELECT ON ALL TABLES IN SCHEMA qc TO reader`, [], 'ro');
    const reader = workspace({ handler: failing, state: { postgres: url.replace('postgres@', 'reader@'), schema: 'qc' } });
    const status = await runCli(['status', '-c', reader.configPath, '--json']);
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout).items).toEqual({ pending: 0, claimed: 0, done: 0, dead: 1 });
  }, 60_000);

  it('runs with exactly the grants docs/postgres.md lists for the role after the first start', async () => {
    // Read from the page, so that the page and the role the ledger needs cannot drift apart.
    const doc = readFileSync(path.join(import.meta.dirname, '../../docs/postgres.md'), 'utf8').replace(/\s+/g, ' ');
    const privileges = /then only `USAGE` on the schema and `([A-Z/]+)` on its tables/.exec(doc)?.[1];
    expect(privileges, 'the grants sentence in docs/postgres.md').toBeDefined();
    const url = await server.createDatabase('grants');
    const ws = workspace({ handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: url, schema: 'qc' } }, { 'a.txt': 'a', 'b.txt': 'b' });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0); // the first start, privileged
    await server.admin(
      `CREATE ROLE worker LOGIN; GRANT USAGE ON SCHEMA qc TO worker; GRANT ${privileges!.split('/').join(', ')} ON ALL TABLES IN SCHEMA qc TO worker`,
      [],
      'grants',
    );
    configure(ws, { state: { postgres: url.replace('postgres@', 'worker@'), schema: 'qc' } });
    rmSync(path.join(ws.source, 'a.txt'));
    writeFileSync(path.join(ws.source, 'c.txt'), 'c');
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(path.join(ws.out, 'c.txt.out'), 'utf8')).toBe('c');
  }, 60_000);

  it('makes its tables in a schema a DBA created for the role, without CREATE on the database', async () => {
    // The common hand-over: `CREATE SCHEMA qc AUTHORIZATION app`, and no CREATE on the database.
    // CREATE SCHEMA IF NOT EXISTS is refused there even though the schema exists.
    const url = await server.createDatabase('handed');
    await server.admin(`CREATE ROLE schema_owner LOGIN; CREATE SCHEMA qc AUTHORIZATION schema_owner`, [], 'handed');
    const ws = workspace(
      { handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: url.replace('postgres@', 'schema_owner@'), schema: 'qc' } },
      { 'a.txt': 'a' },
    );
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(path.join(ws.out, 'a.txt.out'), 'utf8')).toBe('a');
  }, 60_000);
});
