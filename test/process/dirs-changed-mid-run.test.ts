/**
 * The state and output directories changed under a running pass, as a hostile environment
 * does: the volume under either going read-only (ext4's errors=remount-ro after an I/O
 * error: EROFS on every write, open files and all), output.directory swapped for a
 * symbolic link to somewhere else, the state directory renamed away. Each stops the pass
 * with its cause named (exit 1; 75 where the ledger itself is gone, as a removed one), puts
 * nothing outside the configured directories, and, the environment put right, the next run
 * finishes every item, none dead-lettered, every output whole.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it, type TestContext } from 'vitest';
import { configure, FIXTURES, finished, runCli, spawnCli, statusJson, workspace, type Running, type Workspace } from '../helpers/cli.js';
import { notChargedOnce } from '../helpers/ledger-sums.js';
import { invocations } from '../helpers/proc.js';
import { until } from '../helpers/wait.js';

const isRoot = process.getuid?.() === 0;
const LOGGED_COPY = path.join(FIXTURES, 'process/logged-copy.sh');

interface Pass {
  ws: Workspace;
  ids: string[];
  files: Record<string, string>;
  run: Running;
}

/** 30 items, two at a time, 0.2 s each; `before` runs before the pass starts. */
async function passUnderWay(before: (ws: Workspace) => void = () => undefined): Promise<Pass> {
  const files = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`item-${String(i).padStart(2, '0')}`, `payload ${i}\n`]));
  const ws = workspace({ concurrency: 2 }, files);
  const log = path.join(ws.dir, 'invocations.log');
  configure(ws, { handler: { command: ['/bin/sh', LOGGED_COPY, '{path}', '{output}'], env: { INVOCATIONS: log, DELAY: '0.2' } } });
  before(ws);
  const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 90_000 });
  // Readiness: a few attempts have finished and two more are running.
  await until(() => [...invocations(log).values()].reduce((a, b) => a + b, 0) >= 6, 'six handler starts', 60_000);
  return { ws, ids: Object.keys(files), files, run };
}

/** The next run finishes every item: none dead, each output whole, none charged for the fault. */
async function nextRunFinishes({ ws, ids, files }: Pass, opts: { chargedOnce: boolean }): Promise<void> {
  const next = await runCli(['run', '-c', ws.configPath], { timeoutMs: 90_000 });
  expect(next.code, next.stderr).toBe(0);
  expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: ids.length, dead: 0 });
  for (const id of ids) expect(readFileSync(path.join(ws.out, `${id}.out`), 'utf8'), id).toBe(files[id]);
  expect(readdirSync(ws.out).filter((f) => f !== '.cronsafe-tmp' && f !== 'lost+found' && !f.endsWith('.out'))).toEqual([]);
  if (opts.chargedOnce) expect(await notChargedOnce(ws.db, ids)).toEqual({});
}

/** An ext4 image mounted at `dir` with errors=remount-ro, and its trigger_fs_error; skips where root cannot. */
function ext4At(ctx: TestContext, dir: string, image: string): string {
  mkdirSync(dir, { recursive: true });
  if (!isRoot || spawnSync('truncate', ['-s', '32M', image]).status !== 0 || spawnSync('mkfs.ext4', ['-q', '-F', image]).status !== 0) ctx.skip();
  if (spawnSync('mount', ['-o', 'loop,errors=remount-ro', image, dir]).status !== 0) ctx.skip();
  const trigger = `/sys/fs/ext4/${path.basename(spawnSync('findmnt', ['-n', '-o', 'SOURCE', dir]).stdout.toString().trim())}/trigger_fs_error`;
  if (!existsSync(trigger)) {
    spawnSync('umount', ['-l', dir]);
    ctx.skip();
  }
  return trigger;
}

/** The volume at `dir` checked and mounted read-write again, as an operator repairs it. */
function remount(dir: string, image: string): void {
  expect(spawnSync('umount', [dir]).status).toBe(0);
  spawnSync('e2fsck', ['-fy', image]);
  expect(spawnSync('mount', ['-o', 'loop', image, dir]).status).toBe(0);
}

/**
 * The volume at the workspace's `which` directory goes read-only once the pass is under way;
 * the first run's stderr is checked by `said`, then the volume is repaired and the next run
 * must finish every item.
 */
async function goneReadOnly(ctx: TestContext, which: 'state' | 'out', said: (stderr: string, dir: string) => void, chargedOnce: boolean): Promise<void> {
  let trigger = '';
  let image = '';
  let dir = '';
  const pass = await passUnderWay((ws) => {
    dir = ws[which];
    image = path.join(ws.dir, `${which}.img`);
    trigger = ext4At(ctx, dir, image);
  });
  try {
    writeFileSync(trigger, '1');
    const { code } = await pass.run.exited;
    expect(code, pass.run.stderr()).toBe(1);
    said(pass.run.stderr(), dir);
    remount(dir, image);
    await nextRunFinishes(pass, { chargedOnce });
  } finally {
    spawnSync('umount', ['-l', dir]);
  }
}

describe('a volume gone read-only under a running pass (ext4 errors=remount-ro)', () => {
  it('the state directory: exit 1 naming the ledger directory as read-only; remounted, the next run finishes every item', async (ctx) => {
    // Committed pages the volume had not written when it went read-only are lost with it:
    // an item may run again (chargedOnce false), but none is lost or dead.
    await goneReadOnly(ctx, 'state', (stderr, dir) => expect(stderr).toMatch(new RegExp(`^cronsafe: run failed: [^\\n]*${dir}/[^\\n]*read-only[^\\n]*\\n$`)), false);
  }, 180_000);

  it('output.directory: exit 1 naming it as read-only, nothing charged; remounted, the next run finishes every item', async (ctx) => {
    await goneReadOnly(ctx, 'out', (stderr, dir) => expect(stderr).toContain(`the file system of output.directory ${dir} is read-only; stopping, nothing charged`), true);
  }, 180_000);
});

describe('one volume holding both the ledger and output.directory gone read-only under a running pass', () => {
  // The attempts running then are handed back uncharged in memory only: the hand-backs (and
  // the start journal) cannot be written there, so the next run takes their claims for a dead
  // run's and charges them. The run said "nothing charged" of them.
  it('exit 1 saying the ledger could not record the hand-backs, so the next run charges them; remounted, the next run finishes every item', async (ctx) => {
    let trigger = '';
    let image = '';
    let vol = '';
    const pass = await passUnderWay((ws) => {
      vol = path.join(ws.dir, 'vol');
      image = path.join(ws.dir, 'vol.img');
      trigger = ext4At(ctx, vol, image);
      configure(ws, { output: { directory: path.join(vol, 'out') }, state: { sqlite: path.join(vol, 'state', 'cronsafe.db') }, lock: { path: path.join(vol, 'state', 'cronsafe.lock') } });
      ws.out = path.join(vol, 'out');
      ws.db = path.join(vol, 'state', 'cronsafe.db');
    });
    try {
      writeFileSync(trigger, '1');
      const { code } = await pass.run.exited;
      const stderr = pass.run.stderr();
      expect(code, stderr).toBe(1);
      // Before: "the file system of output.directory ... is read-only; stopping, nothing charged".
      expect(stderr).not.toContain('nothing charged');
      // Found first by an attempt (else by a ledger write, whose failure it is said to be).
      if (stderr.includes('output.directory')) expect(stderr).toMatch(/is read-only; stopping, the (\d+ )?attempts? running then handed back uncharged, but the ledger write failed \([^)]+\), so the next run charges (it|them)/);
      else expect(stderr).toMatch(/read-only|I\/O error/);
      remount(vol, image);
      await nextRunFinishes(pass, { chargedOnce: false });
    } finally {
      spawnSync('umount', ['-l', vol]);
    }
  }, 180_000);
});

describe('output.directory swapped for a symbolic link under a running pass', () => {
  it('to a directory laid out like it: exit 1, no output committed there; put back, the next run finishes every item', async () => {
    const pass = await passUnderWay();
    const { ws } = pass;
    const elsewhere = path.join(ws.dir, 'elsewhere');
    // The link's target even has cronsafe's temp directory, so the handlers' writes succeed there.
    mkdirSync(path.join(elsewhere, '.cronsafe-tmp', 'job-test-job'), { recursive: true });
    renameSync(ws.out, `${ws.out}.real`);
    symlinkSync(elsewhere, ws.out);
    const { code } = await pass.run.exited;
    expect(code, pass.run.stderr()).toBe(1);
    expect(pass.run.stderr()).toContain(`output.directory ${ws.out} vanished or was replaced during the run; stopping (nothing charged)`);
    // No output was committed through the link, nor was any temp file written there: the
    // handlers started after the swap had no directory there for their {output} (before, they
    // wrote theirs by path into the link's temp directory, and cronsafe left them there).
    expect(readdirSync(elsewhere)).toEqual(['.cronsafe-tmp']);
    expect(readdirSync(path.join(elsewhere, '.cronsafe-tmp', 'job-test-job'))).toEqual([]);
    rmSync(ws.out);
    renameSync(`${ws.out}.real`, ws.out);
    await nextRunFinishes(pass, { chargedOnce: true });
    expect(readdirSync(elsewhere)).toEqual(['.cronsafe-tmp']);
  }, 180_000);
});

describe('the state directory renamed away under a running pass', () => {
  it('drains (exit 75) saying the ledger was removed or replaced; renamed back, the next run finishes every item, none run twice', async () => {
    const pass = await passUnderWay();
    const { ws } = pass;
    renameSync(ws.state, `${ws.state}.moved`);
    const { code } = await pass.run.exited;
    expect(code, pass.run.stderr()).toBe(75);
    expect(finished({ lines: pass.run.lines })?.outcome).toBe('drained');
    expect(pass.run.lines.some((l) => String(l.reason).includes('was removed or replaced during the run'))).toBe(true);
    // Nothing was made at the old path meanwhile (no second ledger beside the moved one).
    expect(existsSync(ws.db)).toBe(false);
    rmSync(ws.state, { recursive: true, force: true });
    renameSync(`${ws.state}.moved`, ws.state);
    await nextRunFinishes(pass, { chargedOnce: true });
    const ran = invocations(path.join(ws.dir, 'invocations.log'));
    expect([...ran.entries()].filter(([, n]) => n !== 1)).toEqual([]);
  }, 180_000);
});
