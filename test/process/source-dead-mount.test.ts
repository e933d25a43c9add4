/**
 * A file system mounted in a subdirectory of the source that dies: its FUSE daemon killed
 * (OOM, a crash; an NFS export removed is the same to cronsafe, ESTALE). Here: a real
 * fuse-overlayfs mount at `<source>/sub`, its daemon SIGKILLed (root only).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it, type TestContext } from 'vitest';
import { configure, FIXTURES, finished, runCli, spawnCli, statusJson, workspace, type Workspace } from '../helpers/cli.js';
import { attempts, charged } from '../helpers/ledger-sums.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { filesIn, until } from '../helpers/wait.js';

const SUB = ['sub/b1.txt', 'sub/b2.txt', 'sub/b3.txt'];

/** fuse-overlayfs at `<source>/sub` holding SUB, its daemon ours (foreground); skips the test where that cannot be done. */
async function mountSub(ws: Workspace, ctx: TestContext): Promise<{ daemon: ChildProcess; unmount: () => void }> {
  if (process.getuid?.() !== 0 || spawnSync('fuse-overlayfs', ['--version']).status !== 0) ctx.skip();
  const lower = path.join(ws.dir, 'lower');
  for (const d of ['lower', 'upper', 'work']) mkdirSync(path.join(ws.dir, d));
  for (const id of SUB) writeFileSync(path.join(lower, path.basename(id)), id);
  const sub = path.join(ws.source, 'sub');
  mkdirSync(sub);
  const options = `lowerdir=${lower},upperdir=${path.join(ws.dir, 'upper')},workdir=${path.join(ws.dir, 'work')}`;
  const daemon = spawn('fuse-overlayfs', ['-f', '-o', options, sub], { stdio: 'ignore' });
  const unmount = () => {
    daemon.kill('SIGKILL');
    spawnSync('umount', ['-l', sub]);
  };
  try {
    await until(() => filesIn(sub).length === SUB.length, 'the FUSE mount to show its files', 10_000);
  } catch {
    unmount();
    ctx.skip();
  }
  return { daemon, unmount };
}

/** SIGKILL the FUSE daemon: its mount stays, every call into it fails with ENOTCONN. */
async function kill(daemon: ChildProcess): Promise<void> {
  const gone = new Promise((resolve) => daemon.once('exit', resolve));
  daemon.kill('SIGKILL');
  await gone;
}

describe('a dead FUSE mount in a subdirectory of the source', () => {
  // Dead before the run: the scan's look at the directory failed (ENOTCONN), and with it
  // the whole scan: exit 1 at every run, no item anywhere in the source processed, with
  // `ENOTCONN: socket is not connected, stat '<source>/sub/.'`.
  it('is skipped as an unreadable directory is, and the rest processed, run after run', async (ctx) => {
    const ws = workspace({ handler: { command: [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'] } }, { 'a.txt': 'a' });
    const { daemon, unmount } = await mountSub(ws, ctx);
    try {
      await kill(daemon);
      for (let run = 1; run <= 2; run++) {
        const r = await runCli(['run', '-c', ws.configPath]);
        expect(r.code, r.stderr).toBe(0);
        expect(finished(r)).toMatchObject({ outcome: 'completed', scan: 'partial', counts: { skippedDirectories: 1 } });
        const warned = r.lines.filter((l) => l.msg.startsWith('scan: skipped a directory'));
        expect(warned.map((l) => [l.path, l.code])).toEqual([[path.join(ws.source, 'sub'), 'ENOTCONN']]);
      }
      expect(filesIn(ws.out).filter((f) => f.endsWith('.out'))).toEqual(['a.txt.out']);
    } finally {
      unmount();
    }
  });

  // Dead mid-run, after the scan found its items: the kernel still answered lstat from its
  // cache of the names the scan looked up, so each attempt there ran, failed to open its
  // file (`Transport endpoint is not connected`) and was charged, one after another, until
  // all were dead-lettered, the run exiting 0.
  it('dying mid-run: the attempt that meets it is handed back uncharged and the pass stops (exit 1); nothing is charged', async (ctx) => {
    const ws = workspace({ concurrency: 1 }, { 'a.txt': 'a' });
    const { daemon, unmount } = await mountSub(ws, ctx);
    const invocations = path.join(ws.dir, 'invocations');
    configure(ws, {
      handler: {
        command: ['/bin/sh', path.join(FIXTURES, 'process/held-copy.sh'), '{path}', '{output}'],
        env: { INVOCATIONS: invocations, HOLD_ID: 'sub/b1.txt', HOLD_DIR: ws.dir },
      },
    });
    try {
      const run = spawnCli(['run', '-c', ws.configPath]);
      await until(() => existsSync(path.join(ws.dir, 'held')), 'the attempt of sub/b1.txt to start');
      await kill(daemon);
      writeFileSync(path.join(ws.dir, 'release'), '');
      const { code } = await run.exited;
      expect(code, run.stderr()).toBe(1);
      expect(run.stderr()).toMatch(/sub\/b1\.txt cannot be reached now \(ENOTCONN\)/);
      expect(await charged(ws.db, ['a.txt', ...SUB])).toBe(0);
      // Attempts are the handler's starts.
      const starts = readFileSync(invocations, 'utf8').trim().split('\n').length;
      expect(await attempts(ws.db, ['a.txt', ...SUB])).toBe(starts);
      expect((await statusJson(ws.configPath)).items).toMatchObject({ claimed: 0, dead: 0 });
      // The next run skips the dead directory and does the rest; its items wait.
      const next = await runCli(['run', '-c', ws.configPath]);
      expect(next.code, next.stderr).toBe(0);
      expect(finished(next)).toMatchObject({ scan: 'partial' });
      expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 3, claimed: 0, done: 1, dead: 0 });
    } finally {
      unmount();
    }
  });
});

describe('a link in the source to a file on a dead FUSE mount', () => {
  // Its stat failed (ENOTCONN) and the link was skipped without a word, the scan called
  // complete: its item waiting from an earlier run was forgotten as deleted ("forgot pending
  // items whose files are gone"), its charged attempts with it.
  it('is told as a link whose target cannot be reached (the scan is partial); its waiting item is kept', async (ctx) => {
    const ws = workspace({ handler: { command: [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'] } }, { 'a.txt': 'a' });
    const { daemon, unmount } = await mountSub(ws, ctx);
    try {
      // The mount is outside the globs' reach: only the link is scanned.
      configure(ws, { source: { directory: ws.source, exclude: ['sub'] } });
      symlinkSync(path.join(ws.source, 'sub', 'b1.txt'), path.join(ws.source, 'link.txt'));
      mkdirSync(path.dirname(ws.db), { recursive: true });
      const seed = await openSqliteLedger(ws.db);
      await seed.discover([{ id: 'link.txt' }], { runId: 'an-earlier-run', now: Date.now() });
      await seed.close();
      await kill(daemon);
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(0);
      expect(finished(r)).toMatchObject({ outcome: 'completed', scan: 'partial' });
      const warned = r.lines.filter((l) => l.msg.startsWith('scan: skipped a link'));
      expect(warned.map((l) => [l.path, l.code])).toEqual([[path.join(ws.source, 'link.txt'), 'ENOTCONN']]);
      expect(r.lines.some((l) => l.msg.startsWith('forgot pending items'))).toBe(false);
      expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 1, done: 1, dead: 0 });
    } finally {
      unmount();
    }
  });
});
