import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { CLI, configure, FIXTURES, finished, runCli, spawnCliRaw, statusJson, workspace, type Workspace } from '../helpers/cli.js';
import { filesIn, filesUnder } from '../helpers/wait.js';

const ITEM = [process.execPath, path.join(FIXTURES, 'process/item-exec.mjs'), '{path}', '{id}'];
const bytes = (...xs: Array<number | string>) => Buffer.concat(xs.map((x) => (typeof x === 'string' ? Buffer.from(x) : Buffer.of(x))));

/** Into the workspace's source: `caf\xe9.txt` and `sub\xff/inner.txt` (names that are not UTF-8). */
function addByteNames(ws: Workspace): void {
  const src = Buffer.from(`${ws.source}/`);
  writeFileSync(Buffer.concat([src, bytes('caf', 0xe9, '.txt')]), 'latin-1 name');
  mkdirSync(Buffer.concat([src, bytes('sub', 0xff)]));
  writeFileSync(Buffer.concat([src, bytes('sub', 0xff, '/inner.txt')]), 'inside an odd directory');
}

describe('file names are bytes: any name Linux allows is an item', () => {
  it('non-UTF-8 names and backslashes are processed; the handler reads the real file', async () => {
    const ws = workspace({ handler: { command: ITEM } }, { 'plain.txt': 'plain', 'back\\slash.txt': 'backslash' });
    addByteNames(ws);

    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)?.counts).toMatchObject({ succeeded: 4 });
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 4, dead: 0 });

    const got = (id: string) => JSON.parse(readFileSync(path.join(ws.out, `${id}.out`), 'utf8'));
    // Ids: valid UTF-8 without a backslash as is; `\` -> `\\`; a non-UTF-8 byte -> `\xHH`.
    const cases: Array<[string, string, boolean]> = [
      ['plain.txt', 'plain', false],
      ['back\\\\slash.txt', 'backslash', false],
      ['caf\\xe9.txt', 'latin-1 name', true],
      ['sub\\xff/inner.txt', 'inside an odd directory', true],
    ];
    for (const [id, content, link] of cases) {
      const g = got(id);
      expect(g.content, id).toBe(content);
      expect(g.argv[1]).toBe(id);
      expect(g.env.id).toBe(id);
      expect(g.env.path).toBe(g.argv[0]);
      expect(g.link, id).toBe(link);
      // A UTF-8 name gets its real path; the others a link to it with the escaped name.
      if (!link) expect(g.argv[0]).toBe(path.join(ws.source, id.replace('\\\\', '\\')));
      else expect(path.basename(g.argv[0])).toBe(id.slice(id.lastIndexOf('/') + 1));
    }
    // The links were removed after their attempts.
    expect(filesUnder(path.join(ws.out, '.cronsafe-tmp'))).toEqual([]);
  });
});

describe('module handlers: item.path opens the real file for any name', () => {
  it('a non-UTF-8 name is read through item.path (a link with the escaped name) and item.rawPath; the link is removed after', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/item-module.mjs') } }, { 'plain.txt': 'plain' });
    addByteNames(ws);

    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    // Before: item.path was the lossy text (`caf\uFFFD.txt`), ENOENT, and the items were charged.
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 3, dead: 0 });
    const got = (id: string) => JSON.parse(readFileSync(path.join(ws.out, `${id}.out`), 'utf8'));
    expect(got('plain.txt')).toMatchObject({ path: path.join(ws.source, 'plain.txt'), content: 'plain', raw: 'plain', link: false });
    for (const [id, content] of [['caf\\xe9.txt', 'latin-1 name'], ['sub\\xff/inner.txt', 'inside an odd directory']] as const) {
      const g = got(id);
      expect(g, id).toMatchObject({ content, raw: content, link: true });
      expect(path.basename(g.path)).toBe(id.slice(id.lastIndexOf('/') + 1));
    }
    expect(filesUnder(path.join(ws.out, '.cronsafe-tmp'))).toEqual([]);
  });
});

describe('a link for a name that is not UTF-8, without output.directory', () => {
  it('with no usable $TMPDIR for it: the pass stops (exit 1) naming TMPDIR, and the item is not charged', async () => {
    const ws = workspace({ handler: { command: ITEM }, output: undefined });
    writeFileSync(Buffer.concat([Buffer.from(`${ws.source}/`), bytes('caf', 0xe9, '.txt')]), 'latin-1 name');
    const missing = path.join(ws.dir, 'no-such-tmp');
    const r = await runCli(['run', '-c', ws.configPath], { env: { ...process.env, TMPDIR: missing } });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(missing);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 1, claimed: 0, done: 0, dead: 0 });
    const ledger = await openSqliteLedger(ws.db);
    try {
      const row = await ledger.get('caf\\xe9.txt');
      // Charged: attempts counted and not handed back.
      expect(row && row.attempts - row.released).toBe(0);
    } finally {
      await ledger.close();
    }
  });
});

describe('an attempt that stops the pass (the environment\'s fault) once the scan is over', () => {
  it('is handed back once: the run says released 1 for claimed 1, not 2 (before: claimed again by the sweep after the stop, and handed back again), run after run', async () => {
    const ws = workspace({ handler: { command: ITEM }, output: undefined, log: { level: 'info' } });
    writeFileSync(Buffer.concat([Buffer.from(`${ws.source}/`), bytes('caf', 0xe9, '.txt')]), 'latin-1 name');
    const env = { ...process.env, TMPDIR: path.join(ws.dir, 'no-such-tmp') };
    // The re-claim raced the stop (most runs lost it): several runs, each must count once.
    for (let run = 0; run < 5; run++) {
      const r = await runCli(['run', '-c', ws.configPath], { env });
      expect(r.code, r.stderr).toBe(1);
      expect(finished(r)?.counts).toMatchObject({ claimed: 1, released: 1, succeeded: 0, failed: 0 });
    }
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 1, claimed: 0, done: 0, dead: 0 });
  });
});

describe('a link for a name that is not UTF-8, with a relative $TMPDIR', () => {
  it('is an absolute path: the handler, which runs in source.directory, reads the real file through it', async () => {
    // TMPDIR=tmp, relative to cronsafe's working directory; the handler's is source.directory.
    const script = 'cat -- "$1"; echo " via $2"';
    const ws = workspace({ handler: { command: ['sh', '-c', script, 'sh', '{path}', '{path}'] }, output: undefined, log: { level: 'info' } });
    writeFileSync(Buffer.concat([Buffer.from(`${ws.source}/`), bytes('caf', 0xe9, '.txt')]), 'latin-1 name');
    mkdirSync(path.join(ws.dir, 'tmp'));
    const r = await runCli(['run', '-c', ws.configPath], { cwd: ws.dir, env: { TMPDIR: 'tmp' } });
    expect(r.code, r.stderr).toBe(0);
    const said = r.lines.filter((l) => l.stream !== undefined).map((l) => l.msg);
    expect(said).toHaveLength(1);
    expect(said[0]).toMatch(new RegExp(`^latin-1 name via ${path.join(ws.dir, 'tmp')}/cronsafe-item-\\w+/caf\\\\xe9\\.txt$`));
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
    // The link's directory is removed after the attempt.
    expect(readdirSync(path.join(ws.dir, 'tmp'))).toEqual([]);
  });
});

describe('output names that cannot be written as <id>.out', () => {
  it('`a` beside `a.out/b`, and a 255-byte name: each handler runs once and every output is kept', async () => {
    const long = `${'n'.repeat(251)}.txt`; // 255 bytes: the longest name; + .out is too long
    const markers = 'markers';
    const ws = workspace(
      { handler: { command: [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'] }, concurrency: 1 },
      { a: 'a', 'a.out/b': 'b', [long]: 'long' },
    );
    const r = await runCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: path.join(ws.dir, markers), SLOW_MS: '0' } });
    expect(r.code, r.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 3, dead: 0 });
    expect(filesIn(path.join(ws.dir, markers))).toHaveLength(3); // one attempt each
    expect(readFileSync(path.join(ws.out, 'a.out'), 'utf8')).toContain('/a');
    expect(readFileSync(path.join(ws.out, 'a.out~', 'b.out'), 'utf8')).toContain('a.out/b');
    const longOut = readdirSync(ws.out).filter((f) => f.startsWith('nnnn'));
    expect(longOut).toHaveLength(1);
    expect(longOut[0]).toMatch(/^n+~[0-9a-f]{16}\.out$/);
    expect(Buffer.byteLength(longOut[0]!)).toBeLessThanOrEqual(255);
    expect(existsSync(path.join(ws.out, 'a.out', 'b.out'))).toBe(false);
  });
});

describe('an item whose path is longer than Linux allows (PATH_MAX)', () => {
  it('is dead-lettered at once, its handler never run (before: run and charged on every attempt, ENAMETOOLONG)', async () => {
    const ws = workspace({}, { 'ok.txt': 'ok' });
    const log = path.join(ws.dir, 'invocations.log');
    configure(ws, { handler: { command: ['/bin/sh', path.join(FIXTURES, 'process/logged-copy.sh'), '{path}', '{output}'], env: { INVOCATIONS: log, DELAY: '0' } } });
    // Directories the scan can open one by one (each path under 4,096 bytes, whatever the
    // length of TMPDIR), a file whose whole path is past 4,096 bytes.
    const levels = Math.floor((4095 - Buffer.byteLength(ws.source)) / 251);
    const script = `const fs = require('node:fs'); const n = 'd'.repeat(250); for (let i = 0; i < ${levels}; i++) { fs.mkdirSync(n); process.chdir(n); } fs.writeFileSync('f'.repeat(250), 'long');`;
    const made = spawnSync(process.execPath, ['-e', script], { cwd: ws.source });
    expect(made.status, String(made.stderr)).toBe(0);
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    const dead = JSON.parse((await runCli(['dead-letter', 'list', '-c', ws.configPath, '--json'])).stdout) as Array<{ id: string; attempts: number; lastError: string }>;
    expect(dead).toHaveLength(1);
    expect(dead[0]!.id.endsWith('f'.repeat(250))).toBe(true);
    expect(dead[0]!.lastError).toMatch(/longer than Linux allows \(PATH_MAX.*\(the handler was not run\)$/);
    expect(readFileSync(log, 'utf8').trim().split('\n').map((l) => l.split(' ')[0])).toEqual(['ok.txt']);
  });

  it('its output path past PATH_MAX: dead-lettered at once, its handler never run (before: run, then the commit failed, on every attempt)', async () => {
    const ws = workspace({}, { 'ok.txt': 'ok' });
    const log = path.join(ws.dir, 'invocations.log');
    const out = path.join(ws.dir, ...['o', 'p', 'q', 'r'].map((c) => c.repeat(250)));
    configure(ws, {
      output: { directory: out },
      handler: { command: ['/bin/sh', path.join(FIXTURES, 'process/logged-copy.sh'), '{path}', '{output}'], env: { INVOCATIONS: log, DELAY: '0' } },
    });
    // The item's own path is under 4,096 bytes; with the longer output directory, its output's is not.
    const script = "const fs = require('node:fs'); const n = 'd'.repeat(250); for (let i = 0; i < 13; i++) { fs.mkdirSync(n); process.chdir(n); } fs.writeFileSync('g'.repeat(100), 'mid');";
    const made = spawnSync(process.execPath, ['-e', script], { cwd: ws.source });
    expect(made.status, String(made.stderr)).toBe(0);
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    const dead = JSON.parse((await runCli(['dead-letter', 'list', '-c', ws.configPath, '--json'])).stdout) as Array<{ id: string; lastError: string }>;
    expect(dead.map((d) => d.id.endsWith('g'.repeat(100)))).toEqual([true]);
    expect(dead[0]!.lastError).toMatch(/^the output path is \d+ bytes, longer than Linux allows \(PATH_MAX.*\(the handler was not run\)$/);
    expect(readFileSync(log, 'utf8').trim().split('\n').map((l) => l.split(' ')[0])).toEqual(['ok.txt']);
  });
});

describe('globs written with an id: its escapes (\\xHH, \\\\) are that text of the id', () => {
  it('source.exclude `latin\\xe9/**` and `back\\\\slash/**` leave those directories out, not the UTF-8 `latiné/`; requeue --glob takes the same', async () => {
    const ws = workspace({ handler: { command: ITEM } }, { 'latiné/a.txt': 'utf-8 twin', 'back\\slash/b.txt': 'backslash dir', 'keep.txt': 'keep' });
    mkdirSync(Buffer.concat([Buffer.from(`${ws.source}/`), bytes('latin', 0xe9)]));
    writeFileSync(Buffer.concat([Buffer.from(`${ws.source}/`), bytes('latin', 0xe9, '/a.txt')]), 'latin-1 dir');
    // Before: picomatch read `\xe9` as the regular expression's é and `\\` as one backslash,
    // so the first glob left out the UTF-8 `latiné/` instead, and the second matched nothing.
    configure(ws, { source: { directory: ws.source, exclude: ['latin\\xe9/**', 'back\\\\slash/**'] } });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(filesUnder(ws.out).filter((f) => !f.startsWith('.cronsafe-tmp')).sort()).toEqual(['keep.txt.out', 'latiné/a.txt.out']);

    // Every file an item now; requeue by glob picks the escaped ids, and only them.
    configure(ws, { source: { directory: ws.source } });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ done: 4 });
    const dry = await runCli(['requeue', '-c', ws.configPath, '--glob', 'latin\\xe9/*', '--glob', 'back\\\\slash/*', '--dry-run', '--json']);
    expect(dry.code, dry.stderr).toBe(0);
    expect((JSON.parse(dry.stdout) as { first: string[] }).first.sort()).toEqual(['back\\\\slash/b.txt', 'latin\\xe9/a.txt']);
  });
});

describe("what a handler leaves beside its {output} under a name that is not UTF-8", () => {
  it('is removed at the next start, as any other leftover (before: it stayed in .cronsafe-tmp for good)', async () => {
    // A file and a directory named `caf<0xE9>`, `d<0xE9>` in the attempt's temp directory.
    const script = `t=$(dirname "$1"); printf x > "$t/$(printf 'caf\\351')"; mkdir "$t/$(printf 'd\\351')"; printf y > "$t/$(printf 'd\\351')/f"; cp "$2" "$1"`;
    const ws = workspace({ handler: { command: ['/bin/sh', '-c', script, 'sh', '{output}', '{path}'] } }, { 'a.txt': 'a' });
    const temp = path.join(ws.out, '.cronsafe-tmp');
    // Names as bytes (a string listing cannot even open `d<0xE9>`), under the job's and the
    // attempts' directories (.cronsafe-tmp/job-<name>/<prefix>.<n>/).
    const left = () =>
      readdirSync(temp).flatMap((job) =>
        readdirSync(path.join(temp, job)).flatMap((slot) => readdirSync(path.join(temp, job, slot), { encoding: 'buffer' }).map((n) => n.toString('latin1'))),
      );
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(left().sort()).toEqual(['caf\xe9', 'd\xe9']); // left until the next start
    const again = await runCli(['run', '-c', ws.configPath]);
    expect(again.code, again.stderr).toBe(0);
    expect(left()).toEqual([]);
    expect(readFileSync(path.join(ws.out, 'a.txt.out'), 'utf8')).toBe('a');
  });
});

describe('a ${VAR} whose value is not UTF-8', () => {
  it('is refused (exit 78, validate and run alike) naming the key and the variable, not read as another name (an exclude that excluded nothing)', async () => {
    const ws = workspace({ handler: { command: ITEM } }, { 'ok.txt': 'ok' });
    addByteNames(ws);
    configure(ws, { source: { directory: ws.source, exclude: ['${EXCL}'] } });
    // Node cannot put bytes that are not UTF-8 into a child's environment: the shell does.
    const withLatin1 = async (cmd: string) => {
      const r = spawnCliRaw('/bin/sh', ['-c', 'EXCL=$(printf "caf\\351.txt") exec "$0" "$@"', process.execPath, CLI, cmd, '-c', ws.configPath]);
      const { code } = await r.exited;
      return { code, stderr: r.stderr() };
    };
    for (const cmd of ['validate', 'run']) {
      const r = await withLatin1(cmd);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toMatch(/source\.exclude\[0\]: environment variable EXCL holds bytes that are not UTF-8/);
    }
    expect(existsSync(ws.db)).toBe(false);
    // U+FFFD written as UTF-8 is a character like any other.
    const ok = await runCli(['validate', '-c', ws.configPath], { env: { EXCL: 'caf\uFFFD.txt' } });
    expect(ok.code, ok.stderr).toBe(0);
  });
});

describe('a CRONSAFE_STATE_POSTGRES whose value is not UTF-8', () => {
  // A Secret's URL with a Latin-1 password: validate said OK, and every run failed to
  // authenticate (exit 1, toward backoffLimit) with a password that was not the one given.
  it('is refused (exit 78, validate and run alike) naming state.postgres and the variable, never its value', async () => {
    const ws = workspace({ handler: { command: ITEM } }, { 'ok.txt': 'ok' });
    const withLatin1 = async (cmd: string) => {
      const r = spawnCliRaw('/bin/sh', ['-c', 'CRONSAFE_STATE_POSTGRES=$(printf "postgres://app:caf\\351-s3cret@db/x") exec "$0" "$@"', process.execPath, CLI, cmd, '-c', ws.configPath]);
      const { code } = await r.exited;
      return { code, stderr: r.stderr() };
    };
    for (const cmd of ['validate', 'run']) {
      const r = await withLatin1(cmd);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain('state.postgres: the environment variable CRONSAFE_STATE_POSTGRES holds bytes that are not UTF-8, which would be read as another text (U+FFFD): set it as UTF-8\n');
      expect(r.stderr).not.toContain('s3cret');
    }
  });
});
