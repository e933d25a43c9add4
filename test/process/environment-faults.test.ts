/**
 * Issue 10, cases 6, 8 and 10 (the pass part): the environment's faults stop the pass or
 * are forgotten, and are never charged to the items.
 */
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { until } from '../helpers/wait.js';
import { CLI, configure, FIXTURES, finished, runCli, spawnCli, spawnCliRaw, statusJson, workspace, type Workspace } from '../helpers/cli.js';
import { chownTree, NOBODY } from '../helpers/users.js';
import { attempts, charged, notChargedOnce } from '../helpers/ledger-sums.js';

const isRoot = process.getuid?.() === 0;

function backlog(n: number): Record<string, string> {
  const files: Record<string, string> = {};
  for (let i = 0; i < n; i++) files[`item-${String(i).padStart(3, '0')}.txt`] = `payload ${i}\n`;
  return files;
}

/**
 * A run of 10 items whose first attempt waits at a gate before it reads its input; while it
 * waits, `swap` puts the directory `prepare` returned (filled with files of the items' names)
 * at source.directory. The run must stop (exit 1) with nothing of that directory committed
 * and nothing charged.
 */
async function rootSwappedMidAttempt(prepare: (ws: Workspace) => string, swap: (ws: Workspace, other: string) => void, handler: 'command' | 'module without output' = 'command'): Promise<void> {
  const files = backlog(10);
  const ws = workspace({ concurrency: 1 }, files);
  const other = prepare(ws);
  mkdirSync(other, { recursive: true });
  for (const id of Object.keys(files)) writeFileSync(path.join(other, id), 'from the other directory\n');
  if (handler === 'command') {
    const script = path.join(ws.dir, 'gated-copy.sh');
    writeFileSync(script, `#!/bin/sh\necho "$1" >> '${ws.dir}/starts'\nif [ ! -e '${ws.dir}/go' ]; then touch '${ws.dir}/started'; while [ ! -e '${ws.dir}/go' ]; do sleep 0.01; done; fi\ncat "$1" > "$2"\n`, { mode: 0o755 });
    configure(ws, { handler: { command: [script, '{path}', '{output}'] } });
  } else {
    // Reads its input and succeeds, with no output to commit: only the check of the root
    // before its result is written stands between the other directory's file and "done".
    const module = path.join(ws.dir, 'gated-read.mjs');
    const at = (name: string) => JSON.stringify(path.join(ws.dir, name));
    writeFileSync(
      module,
      `import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';\n` +
        `export default async function (item) {\n  appendFileSync(${at('starts')}, item.path + '\\n');\n` +
        `  if (!existsSync(${at('go')})) { writeFileSync(${at('started')}, ''); while (!existsSync(${at('go')})) await new Promise((r) => setTimeout(r, 10)); }\n` +
        `  readFileSync(item.path);\n}\n`,
    );
    const { output: _, ...rest } = YAML.parse(readFileSync(ws.configPath, 'utf8')) as Record<string, unknown>;
    writeFileSync(ws.configPath, YAML.stringify({ ...rest, handler: { module } }));
  }
  const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
  await until(() => existsSync(path.join(ws.dir, 'started')), 'the first attempt to start');
  swap(ws, other);
  writeFileSync(path.join(ws.dir, 'go'), '');
  const { code } = await run.exited;
  expect(code, run.stderr()).toBe(1);
  expect(run.stderr()).toContain(`cronsafe: run failed: source.directory ${ws.source} is gone or is no longer the same directory`);
  const outputs = existsSync(ws.out) ? readdirSync(ws.out).filter((n) => n.endsWith('.out')) : [];
  expect(outputs).toEqual([]);
  expect((await statusJson(ws.configPath)).items).toEqual({ pending: 10, claimed: 0, done: 0, dead: 0 });
  expect(await charged(ws.db, Object.keys(files))).toBe(0);
}

/** `mv queue queue.old && mv next queue`: source.directory moved away, `other` put at its path. */
function movedAwayAndReplaced(ws: Workspace, other: string): void {
  renameSync(ws.source, `${ws.source}.old`);
  renameSync(other, ws.source);
}

/** A shell-script handler in the workspace: copies {path} to {output} after a short wait. */
function slowCopyScript(dir: string): string {
  const file = path.join(dir, 'slow-copy.sh');
  writeFileSync(file, `#!/bin/sh\necho "$1" >> '${dir}/starts'\nsleep 0.1\ncat "$1" > "$2"\n`, { mode: 0o755 });
  return file;
}

/** `mount -o remount,ro`, tried again while the file system is busy (a file open for writing); false if it never lands. */
async function remountReadOnly(dir: string): Promise<boolean> {
  for (let i = 0; i < 200; i++) {
    if (spawnSync('mount', ['-o', 'remount,ro', dir]).status === 0) return true;
    await new Promise((r) => setTimeout(r, 10));
  }
  return false;
}

/** Nothing left claimed or dead, and the only attempts charged are the ones that succeeded. */
async function expectOnlyDoneCharged(ws: { configPath: string; db: string }, ids: string[]): Promise<void> {
  const items = (await statusJson(ws.configPath)).items;
  expect(items).toMatchObject({ claimed: 0, dead: 0 });
  expect(await charged(ws.db, ids)).toBe(items.done);
}

describe("the environment's faults are not the items'", () => {
  it('the handler program vanishes mid-run: the pass stops with exit 1, nothing is charged or dead-lettered, the next run finishes', async () => {
    const files = backlog(30);
    const ws = workspace({ concurrency: 1 }, files);
    const script = slowCopyScript(ws.dir);
    configure(ws, { handler: { command: [script, '{path}', '{output}'] } });
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    await run.waitFor((l) => l.msg === 'item done', 30_000);
    unlinkSync(script);
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(1);
    expect(finished({ lines: run.lines })).toMatchObject({ outcome: 'failed', exitCode: 1 });
    const items = (await statusJson(ws.configPath)).items;
    expect(items.dead).toBe(0);
    expect(items.claimed).toBe(0);
    expect(items.done).toBeGreaterThan(0);
    expect(items.done).toBeLessThan(30);
    // Only the attempts that succeeded were charged, and no attempt was counted for the
    // spawn that found the program gone (its claim is undone: attempts count starts). Under
    // load the unlink can land between the kernel's exec of the script and the shell's open
    // of it: that child did start (and failed "vanished during the attempt"), before the
    // script's first line could log it.
    expect(await charged(ws.db, Object.keys(files))).toBe(items.done);
    const startedUnlogged = run.stderr().includes('vanished during the attempt') ? 1 : 0;
    expect(await attempts(ws.db, Object.keys(files))).toBe(readFileSync(path.join(ws.dir, 'starts'), 'utf8').trim().split('\n').length + startedUnlogged);
    slowCopyScript(ws.dir);
    const next = await runCli(['run', '-c', ws.configPath]);
    expect(next.code, next.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 30, dead: 0 });
  }, 120_000);

  // The race behind that test's rare failure under load: the program is removed between the
  // kernel's exec of it and its interpreter's open of it, so the child starts (no ENOENT from
  // the spawn) and then fails. Held open here by an interpreter that waits for a gate.
  it('the handler program vanishes while an attempt starts it: the attempt is not charged, the pass stops with exit 1', async () => {
    const files = backlog(3);
    const ws = workspace({ concurrency: 1 }, files);
    const interp = path.join(ws.dir, 'gated-sh');
    writeFileSync(interp, `#!/bin/sh\ntouch '${ws.dir}/started'\nwhile [ ! -e '${ws.dir}/go' ]; do sleep 0.01; done\nexec /bin/sh "$@"\n`, { mode: 0o755 });
    const script = path.join(ws.dir, 'copy.sh');
    writeFileSync(script, `#!${interp}\ncat "$1" > "$2"\n`, { mode: 0o755 });
    configure(ws, { handler: { command: [script, '{path}', '{output}'] } });
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    await until(() => existsSync(path.join(ws.dir, 'started')), 'the first attempt to start');
    unlinkSync(script);
    writeFileSync(path.join(ws.dir, 'go'), '');
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(1);
    expect(run.stderr()).toContain(`cronsafe: run failed: handler.command's ${JSON.stringify(script)} vanished`);
    await expectOnlyDoneCharged(ws, Object.keys(files));
  }, 60_000);

  // Only the program and the script it is given are watched: a handler that removes a
  // scratch file it is given and then fails has failed on its own. Watched, the pass stopped
  // on every run with that item never charged, and the items behind it never run.
  it('a handler that removes a scratch file it is given and fails: its own failure, charged; the pass goes on', async () => {
    const ws = workspace({ concurrency: 1 }, { 'a.txt': 'a', 'bad.txt': 'bad', 'c.txt': 'c' });
    const scratch = path.join(ws.dir, 'scratch');
    writeFileSync(scratch, '');
    const script = path.join(ws.dir, 'h.sh');
    writeFileSync(script, `case "$1" in *bad.txt) rm -f "$2"; exit 1 ;; esac\ntouch "$2"\n`);
    configure(ws, { handler: { command: ['/bin/sh', script, '{path}', scratch] } });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 1, claimed: 0, done: 2, dead: 0 });
    expect(await charged(ws.db, ['bad.txt'])).toBe(1);
  }, 60_000);

  it('the source directory is moved away mid-run: exit 1, nothing charged; moved back, the next run finishes', async () => {
    const files = backlog(30);
    const ws = workspace({ concurrency: 2 }, files);
    const script = slowCopyScript(ws.dir);
    configure(ws, { handler: { command: [script, '{path}', '{output}'] } });
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    await run.waitFor((l) => l.msg === 'item done', 30_000);
    renameSync(ws.source, `${ws.source}.moved`);
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(1);
    // Beside the JSON log on stdout, one plain line on stderr says why: whichever saw it
    // first, the pass's check of the source or the next handler's spawn (its working
    // directory is the source), naming the source directory either way.
    expect(run.stderr()).toMatch(
      /^cronsafe: run failed: (source\.directory .* is gone or is no longer the same directory|cannot run handler\.command .*\(working directory .* does not exist\))/m,
    );
    expect(run.stderr()).toContain(ws.source);
    // Named in the error: the source directory (gone, or the handler's working directory missing).
    const stopped = run.lines.find((l) => l.msg.startsWith('the environment cannot run items'));
    expect(String((stopped?.err as { message?: string } | undefined)?.message)).toContain(ws.source);
    const items = (await statusJson(ws.configPath)).items;
    expect(items).toMatchObject({ claimed: 0, dead: 0 });
    expect(await charged(ws.db, Object.keys(files))).toBe(items.done);
    // Attempts count starts: an attempt that found the source gone before its handler
    // started (the pass's check, or the spawn's missing working directory) counted none.
    expect(await attempts(ws.db, Object.keys(files))).toBe(readFileSync(path.join(ws.dir, 'starts'), 'utf8').trim().split('\n').length);
    renameSync(`${ws.source}.moved`, ws.source);
    const next = await runCli(['run', '-c', ws.configPath]);
    expect(next.code, next.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 30, dead: 0 });
  }, 120_000);

  it('the source directory replaced by an empty one mid-run (as a lazy unmount leaves its mount point): exit 1, nothing forgotten or charged', async () => {
    const files = backlog(30);
    const ws = workspace({ concurrency: 2 }, files);
    const script = slowCopyScript(ws.dir);
    configure(ws, { handler: { command: [script, '{path}', '{output}'] } });
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    await run.waitFor((l) => l.msg === 'item done', 30_000);
    renameSync(ws.source, `${ws.source}.mounted`);
    mkdirSync(ws.source);
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(1);
    expect(finished({ lines: run.lines })?.counts).toMatchObject({ gone: 0, deadLettered: 0 });
    const items = (await statusJson(ws.configPath)).items;
    expect(items).toMatchObject({ claimed: 0, dead: 0 });
    expect((items.pending ?? 0) + (items.done ?? 0)).toBe(30);
    expect(await charged(ws.db, Object.keys(files))).toBe(items.done);
  }, 120_000);

  // A release swap (`ln -sfn releases/B current`) with files of the same names: no attempt
  // fails, so only a check of the root itself sees it. The pass went on reading B under A's
  // scan, committed B's files as A's items, and exited 0; A's items were never run.
  it('source.directory, a link, repointed mid-run to a directory with files of the same names: exit 1, nothing of the other directory committed or charged', async () => {
    await rootSwappedMidAttempt(
      (ws) => {
        const releases = { a: path.join(ws.dir, 'release-a'), b: path.join(ws.dir, 'release-b') };
        renameSync(ws.source, releases.a);
        mkdirSync(releases.b);
        symlinkSync(releases.a, ws.source);
        return releases.b;
      },
      (ws, other) => {
        symlinkSync(other, `${ws.source}.new`);
        renameSync(`${ws.source}.new`, ws.source);
      },
    );
  }, 120_000);

  // Named by its real path, the root was not checked around each attempt (it cannot be
  // repointed), but it can be renamed and replaced: `mv queue queue.old && mkdir queue`, or
  // another volume mounted there. The same as the link's swap followed.
  it('source.directory, a real directory, moved away mid-run and one with files of the same names made at its path: exit 1, nothing of the other directory committed or charged', async () => {
    await rootSwappedMidAttempt((ws) => path.join(ws.dir, 'next'), movedAwayAndReplaced);
  }, 120_000);

  // A module handler with no output.directory: nothing to commit but the result, which the
  // check before each batch of results is written stops (one stat(2) per batch, not two per
  // attempt).
  it('source.directory replaced mid-run under a module handler with no output.directory: exit 1, nothing recorded done or charged', async () => {
    await rootSwappedMidAttempt((ws) => path.join(ws.dir, 'next'), movedAwayAndReplaced, 'module without output');
  }, 120_000);

  it('files deleted between the scan and their attempt are forgotten, not dead-lettered (no page); the rest is done', async () => {
    const files = backlog(20);
    const ws = workspace({ concurrency: 1 }, files);
    const script = slowCopyScript(ws.dir);
    configure(ws, { handler: { command: [script, '{path}', '{output}'] } });
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    // Scanned (all 20 fit one discovery batch), then the last ones are deleted.
    await run.waitFor((l) => l.msg === 'item done', 30_000);
    const deleted = Object.keys(files).slice(-5);
    for (const id of deleted) rmSync(path.join(ws.source, id));
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(0);
    expect(finished({ lines: run.lines })?.counts).toMatchObject({ gone: 5, deadLettered: 0, failed: 0 });
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 15, dead: 0 });
    const ledger = await openSqliteLedger(ws.db);
    try {
      for (const id of deleted) expect(await ledger.get(id), id).toBeNull();
    } finally {
      await ledger.close();
    }
    // A file that comes back is new again.
    writeFileSync(path.join(ws.source, deleted[0]!), 'back\n');
    const again = await runCli(['run', '-c', ws.configPath]);
    expect(finished(again)?.counts).toMatchObject({ succeeded: 1 });
  }, 120_000);
});

describe('a file deleted before its attempt, with a handler that shrugs at a missing input', () => {
  it('is forgotten before its handler runs: never an empty "done" output', async () => {
    const files = backlog(12);
    const ws = workspace({ concurrency: 1 }, files);
    const log = path.join(ws.dir, 'invocations.log');
    const h = path.join(ws.dir, 'shrug.sh');
    // Exits 0 whatever happens, as many real scripts do.
    writeFileSync(h, `#!/bin/sh\nprintf '%s\\n' "$CRONSAFE_ITEM_ID" >> ${JSON.stringify(log)}\nsleep 0.1\ncat "$1" > "$2" 2>/dev/null\nexit 0\n`, { mode: 0o755 });
    configure(ws, { handler: { command: [h, '{path}', '{output}'] } });
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    await run.waitFor((l) => l.msg === 'item done', 30_000);
    const deleted = Object.keys(files).slice(-4);
    for (const id of deleted) rmSync(path.join(ws.source, id));
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(0);
    expect(finished({ lines: run.lines })?.counts).toMatchObject({ gone: 4, succeeded: 8, deadLettered: 0, failed: 0 });
    const ran = readFileSync(log, 'utf8').trim().split('\n');
    for (const id of deleted) expect(ran, `handler of deleted ${id}`).not.toContain(id);
    for (const id of deleted) expect(existsSync(path.join(ws.out, `${id}.out`)), `output of ${id}`).toBe(false);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 8, dead: 0 });
  }, 120_000);
});

describe('files deleted between runs while their items wait', () => {
  it('are forgotten by the next complete scan: the backlog reaches 0, nothing charged or dead', async () => {
    const files = backlog(20);
    const ws = workspace({ concurrency: 1 }, files);
    configure(ws, { handler: { command: [slowCopyScript(ws.dir), '{path}', '{output}'] } });
    const first = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    let done = 0;
    await first.waitFor((l) => l.msg === 'item done' && ++done >= 3, 30_000);
    first.child.kill('SIGTERM');
    expect((await first.exited).code, first.stderr()).toBe(75);
    const ledger = await openSqliteLedger(ws.db);
    const waiting: string[] = [];
    try {
      for (const id of Object.keys(files)) if ((await ledger.get(id))?.state === 'pending' && waiting.length < 4) waiting.push(id);
    } finally {
      await ledger.close();
    }
    expect(waiting).toHaveLength(4);
    for (const id of waiting) rmSync(path.join(ws.source, id));
    const next = await runCli(['run', '-c', ws.configPath]);
    expect(next.code, next.stderr).toBe(0);
    expect(finished(next)?.outcome).toBe('completed');
    expect(next.lines.find((l) => l.msg.startsWith('forgot pending items whose files are gone'))).toMatchObject({ items: 4 });
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 16, dead: 0 });
    // A third run has nothing left to forget.
    const third = await runCli(['run', '-c', ws.configPath]);
    expect(third.lines.some((l) => l.msg.startsWith('forgot pending items'))).toBe(false);
  }, 120_000);
});

describe('output path problems are found before the handler runs', () => {
  it('a symlink on the way to the output: the item is dead-lettered at once, its handler never run', async () => {
    const ws = workspace({}, { 'sub/x.txt': 'x', 'ok.txt': 'ok' });
    const log = path.join(ws.dir, 'invocations.log');
    configure(ws, {
      handler: { command: ['/bin/sh', path.join(FIXTURES, 'process/logged-copy.sh'), '{path}', '{output}'], env: { INVOCATIONS: log, DELAY: '0' } },
    });
    mkdirSync(ws.out, { recursive: true });
    mkdirSync(path.join(ws.dir, 'elsewhere'));
    symlinkSync(path.join(ws.dir, 'elsewhere'), path.join(ws.out, 'sub'));
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    const dead = await runCli(['dead-letter', 'list', '-c', ws.configPath, '--json']);
    const list = JSON.parse(dead.stdout) as Array<{ id: string; lastError: string }>;
    expect(list.map((d) => d.id)).toEqual(['sub/x.txt']);
    expect(list[0]!.lastError).toMatch(/symbolic link.*handler was not run/);
    expect(readFileSync(log, 'utf8').trim().split('\n').map((l) => l.split(' ')[0])).toEqual(['ok.txt']);
    expect(readdirSync(path.join(ws.dir, 'elsewhere'))).toEqual([]);
  });
});

/** Mount a small tmpfs at `dir` (root only); false when this machine does not let us. */
function mountTmpfs(dir: string, size: string, inodes?: number): boolean {
  if (process.getuid?.() !== 0) return false;
  mkdirSync(dir, { recursive: true });
  const options = inodes === undefined ? `size=${size}` : `size=${size},nr_inodes=${inodes}`;
  return spawnSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir]).status === 0;
}

describe('a full output file system', () => {
  it('stops the pass with exit 1 and charges nothing (the items are not at fault)', async (ctx) => {
    const files = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`big-${i}.txt`, `${i}\n`]));
    const ws = workspace({ concurrency: 2 }, files);
    if (!mountTmpfs(ws.out, '1m')) ctx.skip();
    try {
      const h = path.join(ws.dir, 'big.sh');
      // Each output is 100 KiB: the 1 MiB file system is full after about ten.
      writeFileSync(h, '#!/bin/sh\nhead -c 102400 /dev/zero > "$2"\n', { mode: 0o755 });
      configure(ws, { handler: { command: [h, '{path}', '{output}'] } });
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.lines.some((l) => String((l.err as { message?: string } | undefined)?.message).includes('is full'))).toBe(true);
      await expectOnlyDoneCharged(ws, Object.keys(files));
    } finally {
      spawnSync('umount', ['-l', ws.out]);
    }
  }, 120_000);

  // A handler that does not check its writes (`cat "$1" > "$2"; echo converted`: a shell
  // script's status is its last command's) exits 0 with a cut-short output when the file
  // system fills. Those outputs were renamed into place and their items recorded done, the
  // run exiting 0: empty and half-written files under their final names, never redone.
  it('a handler that exits 0 anyway: no cut-short output is committed or recorded done; freed, the next run finishes every item whole', async (ctx) => {
    const payload = (i: number) => `${String(i).padStart(4, '0')}\n`.repeat(20_480);
    const files = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`big-${String(i).padStart(2, '0')}.txt`, payload(i)]));
    const ws = workspace({ concurrency: 2 }, files);
    if (!mountTmpfs(ws.out, '1m')) ctx.skip();
    try {
      const h = path.join(ws.dir, 'unchecked.sh');
      writeFileSync(h, '#!/bin/sh\ncat "$1" > "$2"\necho converted\n', { mode: 0o755 });
      configure(ws, { handler: { command: [h, '{path}', '{output}'] } });
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(`the file system of output.directory ${ws.out} is full`);
      const done = (await statusJson(ws.configPath)).items.done;
      const whole = Object.keys(files).filter((id) => existsSync(path.join(ws.out, `${id}.out`)));
      expect(whole.length).toBe(done);
      for (const id of whole) expect(readFileSync(path.join(ws.out, `${id}.out`), 'utf8') === files[id], `${id}.out is whole`).toBe(true);
      await expectOnlyDoneCharged(ws, Object.keys(files));

      spawnSync('mount', ['-o', 'remount,size=4m', ws.out]);
      const next = await runCli(['run', '-c', ws.configPath]);
      expect(next.code, next.stderr).toBe(0);
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 20, dead: 0 });
      for (const id of Object.keys(files)) expect(readFileSync(path.join(ws.out, `${id}.out`), 'utf8') === files[id], `${id}.out is whole`).toBe(true);
      await expectOnlyDoneCharged(ws, Object.keys(files));
    } finally {
      spawnSync('umount', ['-l', ws.out]);
    }
  }, 120_000);

  // Out of inodes, such a handler cannot even create its output (`cannot create ...: No
  // space left on device`) and exits 0 all the same: its item was recorded done with no
  // output (a handler that wrote nothing), never redone.
  it('a handler that exits 0 anyway without an inode for its output: not recorded done; freed, the next run finishes every item whole', async (ctx) => {
    const files = backlog(5);
    const ws = workspace({ concurrency: 1 });
    if (!mountTmpfs(ws.out, '16m', 64)) ctx.skip();
    try {
      configure(ws, { handler: { command: ['/bin/sh', '-c', 'cat "$1" > "$2"; echo converted', 'sh', '{path}', '{output}'] } });
      // A first run makes cronsafe's temp directory; then other files take every inode left.
      expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
      let fillers = 0;
      while (spawnSync('touch', [path.join(ws.out, `filler-${fillers}`)]).status === 0) fillers++;
      expect(spawnSync('stat', ['-f', '-c', '%d', ws.out]).stdout.toString().trim(), 'no inode left').toBe('0');
      for (const [id, content] of Object.entries(files)) writeFileSync(path.join(ws.source, id), content);
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(`the file system of output.directory ${ws.out} is full`);
      expect((await statusJson(ws.configPath)).items).toMatchObject({ done: 0, claimed: 0, dead: 0 });
      expect(await charged(ws.db, Object.keys(files))).toBe(0);

      for (let i = 0; i < fillers; i++) unlinkSync(path.join(ws.out, `filler-${i}`));
      const next = await runCli(['run', '-c', ws.configPath]);
      expect(next.code, next.stderr).toBe(0);
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 5, dead: 0 });
      for (const [id, content] of Object.entries(files)) expect(readFileSync(path.join(ws.out, `${id}.out`), 'utf8')).toBe(content);
    } finally {
      spawnSync('umount', ['-l', ws.out]);
    }
  }, 60_000);

  // ...but not for root on ext4 with only the blocks reserved for root left: root's writes
  // go there, so its handlers' outputs are whole and committed.
  it('run as root on ext4 with only its reserved blocks free: outputs are committed, exit 0', async (ctx) => {
    const files = backlog(3);
    const ws = workspace({ concurrency: 1 }, files);
    const image = path.join(ws.dir, 'out.img');
    mkdirSync(ws.out);
    if (!isRoot || spawnSync('truncate', ['-s', '8M', image]).status !== 0 || spawnSync('mkfs.ext4', ['-q', '-F', image]).status !== 0) ctx.skip();
    if (spawnSync('mount', ['-o', 'loop', image, ws.out]).status !== 0) ctx.skip();
    try {
      chmodSync(ws.dir, 0o755);
      chmodSync(ws.out, 0o777);
      // Another user fills what is not reserved for root.
      spawnSync('sh', ['-c', `head -c 20M /dev/zero > ${JSON.stringify(path.join(ws.out, 'filler'))}`], { uid: NOBODY, gid: NOBODY });
      expect(spawnSync('stat', ['-f', '-c', '%a', ws.out]).stdout.toString().trim(), 'blocks left to other users than root').toMatch(/^[0-9]$/);
      configure(ws, { handler: { command: ['/bin/sh', '-c', 'cat "$1" > "$2"', 'sh', '{path}', '{output}'] } });
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(0);
      for (const [id, content] of Object.entries(files)) expect(readFileSync(path.join(ws.out, `${id}.out`), 'utf8')).toBe(content);
    } finally {
      spawnSync('umount', ['-l', ws.out]);
    }
  }, 60_000);

  // ...but root of a user namespace (a rootless container, a pod with hostUsers: false) is
  // another user to ext4: refused the reserved blocks (ENOSPC), its volume is full. Those
  // blocks were counted free for any uid 0, so each copy that failed for lack of space was
  // charged (dead-lettered after retry.maxAttempts runs), and the run exited 0.
  it('run as root of a user namespace on ext4 with only the blocks reserved for root free: the pass stops with exit 1 and charges nothing', async (ctx) => {
    const files = backlog(3);
    const ws = workspace({ concurrency: 1, handler: { command: ['/bin/cp', '{path}', '{output}'] } });
    const image = path.join(ws.dir, 'out.img');
    mkdirSync(ws.out);
    if (!isRoot || spawnSync('truncate', ['-s', '8M', image]).status !== 0 || spawnSync('mkfs.ext4', ['-q', '-F', image]).status !== 0) ctx.skip();
    if (spawnSync('unshare', ['-r', 'true'], { uid: NOBODY, gid: NOBODY }).status !== 0) ctx.skip();
    if (spawnSync('mount', ['-o', 'loop', image, ws.out]).status !== 0) ctx.skip();
    try {
      chownTree(ws.dir, NOBODY);
      chmodSync(ws.dir, 0o755);
      // cronsafe as uid 0 of its own user namespace, which is nobody outside it.
      const run = async () => {
        const r = spawnCliRaw('unshare', ['-r', process.execPath, CLI, 'run', '-c', ws.configPath], { uid: NOBODY, gid: NOBODY, cwd: ws.dir });
        const { code } = await r.exited;
        return { code, stderr: r.stderr() };
      };
      // A first run makes its temp directory while there is room.
      expect((await run()).code).toBe(0);
      for (const [id, content] of Object.entries(files)) writeFileSync(path.join(ws.source, id), content, { mode: 0o644 });
      // Then small files for the few blocks the big one's allocation leaves free (how many
      // depends on the directories in the file system: 0, 3 or 2 for 2, 3 or 4 of them).
      const filler = JSON.stringify(path.join(ws.out, 'filler'));
      spawnSync('sh', ['-c', `head -c 20M /dev/zero > ${filler}; i=0; while [ $i -lt 64 ] && head -c 1024 /dev/zero > ${filler}-$i; do i=$((i+1)); done`], { uid: NOBODY, gid: NOBODY });
      expect(spawnSync('stat', ['-f', '-c', '%a', ws.out]).stdout.toString().trim(), 'no block left to other users than root').toBe('0');
      const r = await run();
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(`the file system of output.directory ${ws.out} is full`);
      expect(await charged(ws.db, Object.keys(files))).toBe(0);
      expect((await statusJson(ws.configPath)).items).toMatchObject({ done: 0, dead: 0 });
    } finally {
      spawnSync('umount', ['-l', ws.out]);
    }
  }, 60_000);

  // Out of inodes ("No space left on device" while df shows free blocks: many small
  // outputs on ext4): full as surely as out of blocks. Only the block count was asked, so
  // every attempt that could not create its {output} was charged, and the run exited 0.
  it('out of inodes: the pass stops with exit 1 and charges nothing', async (ctx) => {
    const files = backlog(40);
    const ws = workspace({ concurrency: 2 }, files);
    // 64 MiB of blocks, but room for about twenty files.
    if (!mountTmpfs(ws.out, '64m', 24)) ctx.skip();
    try {
      configure(ws, { handler: { command: ['/bin/cp', '{path}', '{output}'] } });
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(`the file system of output.directory ${ws.out} is full`);
      await expectOnlyDoneCharged(ws, Object.keys(files));
      expect((await statusJson(ws.configPath)).items.done).toBeGreaterThan(0);
    } finally {
      spawnSync('umount', ['-l', ws.out]);
    }
  }, 120_000);

  // The second handler exits 0 whatever its writes did (a script whose last command is not
  // the one that wrote): after the remount it creates no output, and its item was recorded
  // done with none, for good. Every done item must have its output.
  it.for<[string, string]>([
    ['(ext4 errors=remount-ro)', ''],
    ['under a handler that exits 0 anyway', 'echo converted\n'],
  ])('remounted read-only mid-run %s: the pass stops with exit 1, charges nothing, records no item done without its output', { timeout: 120_000 }, async ([, after], ctx) => {
    const files = backlog(30);
    const ws = workspace({ concurrency: 2 }, files);
    if (!mountTmpfs(ws.out, '4m')) ctx.skip();
    try {
      const script = path.join(ws.dir, 'copy.sh');
      writeFileSync(script, `#!/bin/sh\nsleep 0.1\ncat "$1" > "$2"\n${after}`, { mode: 0o755 });
      configure(ws, { handler: { command: [script, '{path}', '{output}'] } });
      const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
      let done = 0;
      await run.waitFor((l) => l.msg === 'item done' && ++done >= 3, 30_000);
      // The kernel refuses the remount (EBUSY) while a file on it is open for writing (a
      // handler's `cat > {output}`, cronsafe's fsync of an output): tried again until it
      // lands between two writes, as errors=remount-ro would not wait for.
      expect(await remountReadOnly(ws.out)).toBe(true);
      const { code } = await run.exited;
      expect(code, run.stderr()).toBe(1);
      expect(run.stderr()).toContain(`the file system of output.directory ${ws.out} is read-only`);
      const outputs = readdirSync(ws.out).filter((f) => f.endsWith('.out'));
      expect((await statusJson(ws.configPath)).items.done).toBe(outputs.length);
      await expectOnlyDoneCharged(ws, Object.keys(files));
      // Writable again: the next run does the rest, every item with its output.
      expect(spawnSync('mount', ['-o', 'remount,rw', ws.out]).status).toBe(0);
      const next = await runCli(['run', '-c', ws.configPath]);
      expect(next.code, next.stderr).toBe(0);
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 30, dead: 0 });
      expect(readdirSync(ws.out).filter((f) => f.endsWith('.out'))).toHaveLength(30);
    } finally {
      spawnSync('umount', ['-l', ws.out]);
    }
  });

  // The real errors=remount-ro, not a remount: since Linux 6.x an ext4 error marks the file
  // system `emergency_ro` (writes fail EROFS) while access(2), statfs and the mount's flags
  // still say read-write. Judged by access(2) alone, each attempt that could not create its
  // {output} (or whose output cronsafe could not fsync, EIO) was charged and the run exited 0.
  it('ext4 with errors=remount-ro meeting an error mid-run: the pass stops with exit 1, charges nothing; repaired, the next run finishes every item', async (ctx) => {
    const files = backlog(30);
    const ws = workspace({ concurrency: 2 }, files);
    const image = path.join(ws.dir, 'out.img');
    mkdirSync(ws.out);
    const mount = () => spawnSync('mount', ['-o', 'loop,errors=remount-ro', image, ws.out]).status === 0;
    if (!isRoot || spawnSync('truncate', ['-s', '16M', image]).status !== 0 || spawnSync('mkfs.ext4', ['-q', '-F', image]).status !== 0 || !mount()) ctx.skip();
    try {
      const device = path.basename(spawnSync('findmnt', ['-n', '-o', 'SOURCE', ws.out]).stdout.toString().trim());
      const trigger = `/sys/fs/ext4/${device}/trigger_fs_error`;
      if (!existsSync(trigger)) ctx.skip();
      const script = path.join(ws.dir, 'copy.sh');
      writeFileSync(script, '#!/bin/sh\nsleep 0.1\ncat "$1" > "$2"\n', { mode: 0o755 });
      configure(ws, { handler: { command: [script, '{path}', '{output}'] } });
      const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
      let done = 0;
      await run.waitFor((l) => l.msg === 'item done' && ++done >= 3, 30_000);
      writeFileSync(trigger, '1');
      const { code } = await run.exited;
      expect(code, run.stderr()).toBe(1);
      expect(run.stderr()).toContain(`the file system of output.directory ${ws.out} is read-only`);
      await expectOnlyDoneCharged(ws, Object.keys(files));
      // Repaired and mounted again: the next run does the rest, every item with its output.
      expect(spawnSync('umount', [ws.out]).status).toBe(0);
      spawnSync('e2fsck', ['-fy', image]);
      expect(mount()).toBe(true);
      const next = await runCli(['run', '-c', ws.configPath]);
      expect(next.code, next.stderr).toBe(0);
      expect(await notChargedOnce(ws.db, Object.keys(files))).toEqual({});
      // Seen once in CI (stop 55, not reproduced in 27 runs since): an item done with no output
      // after the repair. Its lines from both runs go with the failure, to tell a commit the file
      // system lost from one cronsafe recorded done without making it.
      const linesOf = (id: string): string =>
        [run.stdout(), run.stderr(), next.stdout, next.stderr].map((t) => t.split('\n').filter((l) => l.includes(id)).join('\n')).join('\n--\n');
      for (const [id, content] of Object.entries(files)) {
        const out = path.join(ws.out, `${id}.out`);
        expect(existsSync(out), `output of ${id}; its log lines:\n${linesOf(id)}`).toBe(true);
        expect(readFileSync(out, 'utf8'), id).toBe(content);
      }
    } finally {
      spawnSync('umount', ['-l', ws.out]);
    }
  }, 120_000);

  // The same emergency read-only state found at the start, with a killed run's file left in
  // cronsafe's temp directory: access(2) says read-write, so the start's checks passed, and
  // the removal of that leftover (EROFS) ended the run with `cronsafe: fatal:` and a stack
  // (seen in a CI pass under load, after the repair above). One line and exit 1 now.
  it('ext4 gone read-only after an error, with a leftover in the temp directory: the start says so in one line, exit 1, nothing claimed', async (ctx) => {
    const files = backlog(3);
    const ws = workspace({ concurrency: 1, handler: { command: ['/bin/cp', '{path}', '{output}'] } }, files);
    const image = path.join(ws.dir, 'out.img');
    mkdirSync(ws.out);
    if (!isRoot || spawnSync('truncate', ['-s', '16M', image]).status !== 0 || spawnSync('mkfs.ext4', ['-q', '-F', image]).status !== 0) ctx.skip();
    if (spawnSync('mount', ['-o', 'loop,errors=remount-ro', image, ws.out]).status !== 0) ctx.skip();
    try {
      const device = path.basename(spawnSync('findmnt', ['-n', '-o', 'SOURCE', ws.out]).stdout.toString().trim());
      const trigger = `/sys/fs/ext4/${device}/trigger_fs_error`;
      if (!existsSync(trigger)) ctx.skip();
      // A first run makes the temp directory; a killed one would leave a file in it.
      expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
      const jobDir = path.join(ws.out, '.cronsafe-tmp', 'job-test-job');
      expect(existsSync(jobDir)).toBe(true);
      writeFileSync(path.join(jobDir, 'left-by-a-killed-run.tmp'), 'x');
      writeFileSync(path.join(ws.source, 'late.txt'), 'late');
      writeFileSync(trigger, '1');
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).not.toContain('fatal');
      expect(r.stderr).toMatch(new RegExp(`^cronsafe: (run failed: )?cannot .*: EROFS: the file system of output.directory ${ws.out} is read-only\\n$`));
      expect((await statusJson(ws.configPath)).items).toMatchObject({ claimed: 0, dead: 0 });
      expect(await charged(ws.db, ['late.txt'])).toBe(0);
    } finally {
      spawnSync('umount', ['-l', ws.out]);
    }
  }, 120_000);

  // A volume mounted read-only (readOnly: true in the pod spec, a snapshot restored
  // read-only): as with a directory the run's user may not write, one line naming it and
  // exit 1, before anything is claimed; it was a 'fatal' stack trace, as for a bug.
  it('on a read-only file system at start-up: exit 1 with one line naming it, nothing claimed', async (ctx) => {
    const files = backlog(3);
    const ws = workspace({ concurrency: 1, handler: { command: ['/bin/cp', '{path}', '{output}'] } }, files);
    if (!mountTmpfs(ws.out, '4m')) ctx.skip();
    try {
      const startRefused = async (what: string) => {
        const r = await runCli(['run', '-c', ws.configPath]);
        expect(r.code, r.stderr).toBe(1);
        expect(r.stderr).toMatch(new RegExp(`^cronsafe: cannot ${what} .*${ws.out}.*: EROFS: .*read-only.*\\n$`));
        expect(r.stderr).not.toContain('fatal');
        expect((await statusJson(ws.configPath)).items).toMatchObject({ claimed: 0, done: 0, dead: 0 });
        expect(await charged(ws.db, Object.keys(files))).toBe(0);
      };
      // Never used: cronsafe cannot make its temp directory there.
      expect(spawnSync('mount', ['-o', 'remount,ro', ws.out]).status).toBe(0);
      await startRefused('create or write in');
      // Used before (its temp directory is there), then mounted read-only.
      expect(spawnSync('mount', ['-o', 'remount,rw', ws.out]).status).toBe(0);
      mkdirSync(path.join(ws.out, '.cronsafe-tmp', 'job-test-job'), { recursive: true });
      expect(spawnSync('mount', ['-o', 'remount,ro', ws.out]).status).toBe(0);
      await startRefused('create or write in');
    } finally {
      spawnSync('umount', ['-l', ws.out]);
    }
  }, 120_000);

  it('full at start-up (no inode left for its temp directory): exit 1 with one line naming it, nothing claimed', async (ctx) => {
    const files = backlog(3);
    const ws = workspace({ concurrency: 1, handler: { command: ['/bin/cp', '{path}', '{output}'] } }, files);
    // Two inodes: the root and one file.
    if (!mountTmpfs(ws.out, '4m', 2)) ctx.skip();
    try {
      writeFileSync(path.join(ws.out, 'filler'), '');
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(new RegExp(`^cronsafe: cannot create or write in .*: ENOSPC: the file system of output.directory ${ws.out} is full.*\\n$`));
      expect((await statusJson(ws.configPath)).items).toMatchObject({ claimed: 0, done: 0, dead: 0 });
      expect(await charged(ws.db, Object.keys(files))).toBe(0);
    } finally {
      spawnSync('umount', ['-l', ws.out]);
    }
  }, 120_000);

  // A volume whose owner changed (a new runAsUser, a restored backup, an NFS export squashed
  // to another uid): cronsafe's own rename of a finished output into output.directory is
  // refused. No item is to blame; charging them dead-lettered the whole backlog in 5 runs.
  // The directory was writable: the file at the output's place was immutable (chattr +i).
  // The error said the directory was not writable by this user, naming no file to look at.
  it.skipIf(!isRoot)('an immutable file at an output\'s place: exit 1, nothing charged, the error names that file', async (ctx) => {
    const files = { 'a.txt': 'a\n', 'b.txt': 'b\n' };
    const ws = workspace({ concurrency: 1, handler: { command: ['/bin/cp', '{path}', '{output}'] } }, files);
    const pinned = path.join(ws.out, 'b.txt.out');
    mkdirSync(ws.out, { recursive: true });
    writeFileSync(pinned, 'kept\n');
    if (spawnSync('chattr', ['+i', pinned]).status !== 0) ctx.skip();
    try {
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(`${pinned} is there and cannot be replaced, though its directory is writable by this user (uid 0): an immutable or append-only file`);
      expect(await charged(ws.db, ['b.txt'])).toBe(0);
      expect(readFileSync(pinned, 'utf8')).toBe('kept\n');
    } finally {
      spawnSync('chattr', ['-i', pinned]);
    }
  }, 60_000);

  it.skipIf(!isRoot)("output.directory or a directory in it not writable by the run's user: the pass stops with exit 1 and charges nothing", async () => {
    const files = { 'a/x.txt': 'x\n', 'a/y.txt': 'y\n', 'z.txt': 'z\n' };
    const ws = workspace({ concurrency: 1, handler: { command: ['/bin/cp', '{path}', '{output}'] } }, files);
    const asNobody = { uid: NOBODY, gid: NOBODY };
    const blockedRun = async (blocked: string) => {
      const r = await runCli(['run', '-c', ws.configPath], asNobody);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(new RegExp(`^cronsafe: .*${blocked}.* is not writable by this user \\(uid ${NOBODY}\\).*\\n$`));
      expect(r.stderr).not.toContain('fatal');
      await expectOnlyDoneCharged(ws, [...Object.keys(files), 'w.txt']);
    };
    chownTree(ws.dir, NOBODY);
    // Before any run: cronsafe cannot make its temp directory there.
    mkdirSync(ws.out);
    chownSync(ws.out, 0, 0); // root's, 0755: nobody may not create entries in it
    await blockedRun(ws.out);
    chownSync(ws.out, NOBODY, NOBODY);
    // Its temp directory made by an earlier run: the handlers write their outputs, and
    // cronsafe's rename of them into a directory of output.directory is refused.
    mkdirSync(path.join(ws.out, 'a'));
    chownSync(path.join(ws.out, 'a'), 0, 0);
    await blockedRun(path.join(ws.out, 'a'));
    // ... or into output.directory itself.
    writeFileSync(path.join(ws.source, 'w.txt'), 'w\n');
    chownSync(path.join(ws.source, 'w.txt'), NOBODY, NOBODY);
    chownSync(ws.out, 0, 0);
    await blockedRun(ws.out);
    chownSync(ws.out, NOBODY, NOBODY);
    chownSync(path.join(ws.out, 'a'), NOBODY, NOBODY);
    const r = await runCli(['run', '-c', ws.configPath], asNobody);
    expect(r.code, r.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ done: 4, pending: 0, dead: 0 });
    await expectOnlyDoneCharged(ws, [...Object.keys(files), 'w.txt']);
    expect(readFileSync(path.join(ws.out, 'a/x.txt.out'), 'utf8')).toBe('x\n');

    // Another runAsUser now: output.directory's owner is trusted, so its temp directory passes
    // as cronsafe's own, but this user cannot write the handlers' outputs into it.
    const OTHER = 1000;
    writeFileSync(path.join(ws.source, 'v.txt'), 'v\n');
    chownTree(ws.source, OTHER);
    chownTree(ws.state, OTHER);
    chmodSync(ws.dir, 0o755);
    const r2 = await runCli(['run', '-c', ws.configPath], { uid: OTHER, gid: OTHER });
    expect(r2.code, r2.stderr).toBe(1);
    expect(r2.stderr).toMatch(new RegExp(`^cronsafe: cannot create or write in ${ws.out}/\\.cronsafe-tmp/\\S+: EACCES: .* not writable by this user \\(uid ${OTHER}\\)\\n$`));
    await expectOnlyDoneCharged(ws, [...Object.keys(files), 'w.txt', 'v.txt']);
    // Eight runs and their status reads, one after the other: 49 s alone at a load of 30.
  }, 180_000);
});
