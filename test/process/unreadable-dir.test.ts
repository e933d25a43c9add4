import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, FIXTURES, finished, ROOT, runCli, spawnCliRaw, statusJson, workspace } from '../helpers/cli.js';
import { chownTree, NOBODY } from '../helpers/users.js';
import { PUSHGATEWAY, scrape, startPushgateway, value } from '../helpers/prom.js';

const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];
const asRoot = process.getuid?.() === 0;

/** Root reads anything: as root, the workspace is handed to "nobody" and the run made as it, so that EACCES is real. */
function asNobody(ws: { dir: string }): { uid?: number; gid?: number } {
  if (!asRoot) return {};
  chownTree(ws.dir, NOBODY);
  return { uid: NOBODY, gid: NOBODY };
}

/** An earlier run found `id` and left it pending. */
async function seedPending(ws: { db: string }, id: string): Promise<void> {
  mkdirSync(path.dirname(ws.db), { recursive: true });
  const seed = await openSqliteLedger(ws.db);
  await seed.discover([{ id }], { runId: 'an-earlier-run', now: Date.now() });
  await seed.close();
}

describe('an unreadable subdirectory of the source', () => {
  it('is skipped and the rest processed (before: the scan failed, exit 1, on every run)', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a', 'locked/x.txt': 'x', 'z/b.txt': 'b' });
    // An earlier run found locked/x.txt and left it waiting: a partial scan must not take
    // it for deleted (only a complete scan forgets what it did not see).
    await seedPending(ws, 'locked/x.txt');
    const as = asNobody(ws);
    chmodSync(path.join(ws.source, 'locked'), 0o000);
    try {
      const r = await runCli(['run', '-c', ws.configPath], as);
      expect(r.code, r.stderr).toBe(0);
      expect(finished(r)?.counts).toMatchObject({ scanned: 2, succeeded: 2, skippedDirectories: 1 });
      // The outcome says the scan was partial, and a warning names the directory once.
      expect(finished(r)).toMatchObject({ outcome: 'completed', scan: 'partial' });
      const warned = r.lines.filter((l) => l.msg.startsWith('scan: skipped a directory'));
      expect(warned.map((l) => l.path)).toEqual([path.join(ws.source, 'locked')]);
      expect(readdirSync(ws.out).filter((f) => f.endsWith('.out'))).toEqual(['a.txt.out']);
      expect(readdirSync(path.join(ws.out, 'z'))).toEqual(['b.txt.out']);
      expect(r.lines.some((l) => l.msg.startsWith('forgot pending items'))).toBe(false);
      const after = await openSqliteLedger(ws.db);
      try {
        expect(await after.get('locked/x.txt')).toMatchObject({ state: 'pending', attempts: 0 });
      } finally {
        await after.close();
      }
    } finally {
      chmodSync(path.join(ws.source, 'locked'), 0o755);
    }
  });
});

describe('an unreadable subdirectory that no source.include glob can reach', () => {
  // include ["*.txt"] matches files directly in the source only, yet the scan opened every
  // subdirectory: one it could not read (lost+found, another user's) made every scan partial,
  // warning that its items waited (it could hold none), and a partial scan never forgets the
  // pending items whose files were deleted: the backlog never reached 0.
  it('is not entered: the scan is complete, nothing warned, and a deleted pending item is forgotten', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a', 'locked/x.txt': 'x' });
    configure(ws, { source: { directory: ws.source, include: ['*.txt'] } });
    await seedPending(ws, 'deleted.txt');
    const as = asNobody(ws);
    chmodSync(path.join(ws.source, 'locked'), 0o000);
    try {
      const r = await runCli(['run', '-c', ws.configPath], as);
      expect(r.code, r.stderr).toBe(0);
      expect(finished(r)).toMatchObject({ outcome: 'completed', scan: 'complete' });
      expect(finished(r)?.counts).toMatchObject({ scanned: 1, succeeded: 1, skippedDirectories: 0 });
      expect(r.lines.filter((l) => l.msg.startsWith('scan: skipped'))).toEqual([]);
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
    } finally {
      chmodSync(path.join(ws.source, 'locked'), 0o755);
    }
  });
});

describe('an unreadable top-level directory that source.include ["in/*.txt"] does not name', () => {
  // A source at a volume's root (with its lost+found) and include naming one directory of it.
  it('is not entered: the scan is complete and nothing is warned', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'in/a.txt': 'a', 'locked/x.txt': 'x' });
    configure(ws, { source: { directory: ws.source, include: ['in/*.txt'] } });
    const as = asNobody(ws);
    chmodSync(path.join(ws.source, 'locked'), 0o000);
    try {
      const r = await runCli(['run', '-c', ws.configPath], as);
      expect(r.code, r.stderr).toBe(0);
      expect(finished(r)).toMatchObject({ outcome: 'completed', scan: 'complete' });
      expect(finished(r)?.counts).toMatchObject({ scanned: 1, succeeded: 1, skippedDirectories: 0 });
      expect(r.lines.filter((l) => l.msg.startsWith('scan: skipped'))).toEqual([]);
    } finally {
      chmodSync(path.join(ws.source, 'locked'), 0o755);
    }
  });
});

describe('an unreadable directory with a leading dot in the source, with the default include', () => {
  // A chain of jobs: this job's source is another job's output.directory, whose temp
  // directory (.cronsafe-tmp/job-<name>, that job's user's) this user cannot read. `**` never
  // matches into a dot directory, yet the scan opened it: every scan was partial, warning
  // that its items waited, and deleted pending items were never forgotten.
  it('is not entered: the scan is complete, nothing warned, and a deleted pending item is forgotten', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a', '.cronsafe-tmp/job-upstream/1.tmp': 'half', '.snapshot/hourly.0/a.txt': 'old' });
    await seedPending(ws, 'deleted.txt');
    const as = asNobody(ws);
    const upstream = path.join(ws.source, '.cronsafe-tmp/job-upstream');
    chmodSync(upstream, 0o700);
    if (asRoot) chownSync(upstream, 0, 0);
    else chmodSync(upstream, 0o000);
    try {
      const r = await runCli(['run', '-c', ws.configPath], as);
      expect(r.code, r.stderr).toBe(0);
      expect(finished(r)).toMatchObject({ outcome: 'completed', scan: 'complete' });
      expect(finished(r)?.counts).toMatchObject({ scanned: 1, succeeded: 1, skippedDirectories: 0 });
      expect(r.lines.filter((l) => l.msg.startsWith('scan: skipped'))).toEqual([]);
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
    } finally {
      chmodSync(upstream, 0o755);
    }
  });
});

describe('a subdirectory of the source that can be listed but not searched (mode r--, no x)', () => {
  // Its names can be read, so the scan found its files; none can be opened. Every attempt
  // then stopped the pass (exit 1, "became unreadable after the scan") on every run, and the
  // items after it in the scan's order waited behind it forever.
  it('is skipped as an unreadable one is, and the rest processed, run after run', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a', 'listed/x.txt': 'x', 'listed/y.txt': 'y', 'z/b.txt': 'b' });
    const as = asNobody(ws);
    chmodSync(path.join(ws.source, 'listed'), 0o644);
    try {
      for (let run = 1; run <= 2; run++) {
        const r = await runCli(['run', '-c', ws.configPath], as);
        expect(r.code, r.stderr).toBe(0);
        expect(finished(r)).toMatchObject({ outcome: 'completed', scan: 'partial', counts: { skippedDirectories: 1 } });
        const warned = r.lines.filter((l) => l.msg.startsWith('scan: skipped a directory'));
        expect(warned.map((l) => [l.path, l.code])).toEqual([[path.join(ws.source, 'listed'), 'EACCES']]);
      }
      expect(readdirSync(ws.out).filter((f) => f.endsWith('.out'))).toEqual(['a.txt.out']);
      expect(readdirSync(path.join(ws.out, 'z'))).toEqual(['b.txt.out']);
      expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 0, claimed: 0, done: 2, dead: 0 });
    } finally {
      chmodSync(path.join(ws.source, 'listed'), 0o755);
    }
  });
});

describe('a subdirectory that only a capability lets the run read (a non-root uid with CAP_DAC_READ_SEARCH)', () => {
  // access(2) answers for the real uid without the capability (EACCES), while lstat and the
  // handler's open pass: its item was forgotten as "gone" before its handler ran.
  const setpriv = spawnSync('setpriv', ['--version']).status === 0;
  it.skipIf(process.getuid?.() !== 0 || !setpriv)('is scanned and its items run, none forgotten', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a', 'private/x.txt': 'x' });
    chownTree(ws.dir, NOBODY);
    // Root's own directory, closed to others: nobody reads it through the capability only.
    chownSync(path.join(ws.source, 'private'), 0, 0);
    chmodSync(path.join(ws.source, 'private'), 0o700);
    const caps = ['--reuid=65534', '--regid=65534', '--clear-groups', '--inh-caps=+dac_read_search', '--ambient-caps=+dac_read_search'];
    const r = spawnCliRaw('setpriv', [...caps, process.execPath, path.join(ROOT, 'dist/cli.js'), 'run', '-c', ws.configPath]);
    const { code } = await r.exited;
    expect(code, r.stderr()).toBe(0);
    expect(finished(r)).toMatchObject({ outcome: 'completed', scan: 'complete', counts: { succeeded: 2, gone: 0, skippedDirectories: 0 } });
    expect(readdirSync(path.join(ws.out, 'private'))).toEqual(['x.txt.out']);
  });
});

describe('a subdirectory of the source that becomes unreadable after the scan found its items', () => {
  // The docs promise its files wait until it is readable again, and the environment's
  // faults are never charged: its queued items were run anyway, failed (EACCES) and charged.
  it('stops the pass (exit 1) naming the item, charges nothing; readable again, the next run finishes', async () => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 6; i++) files[`locked/x${i}.txt`] = `x${i}\n`;
    const ws = workspace({ concurrency: 1 }, files);
    // The first attempt copies its item, then makes its directory unreadable (as a producer
    // that locks a directory it rewrites would): the others were scanned and queued already.
    const h = path.join(ws.dir, 'copy-then-lock.sh');
    writeFileSync(h, '#!/bin/sh\nset -e\ncat "$1" > "$2"\nchmod 000 "$(dirname "$1")"\n', { mode: 0o755 });
    configure(ws, { handler: { command: [h, '{path}', '{output}'] } });
    const as = asNobody(ws);
    try {
      const r = await runCli(['run', '-c', ws.configPath], as);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/cannot be reached now \(EACCES\)/);
      expect(r.stderr).toContain(path.join(ws.source, 'locked'));
      const ledger = await openSqliteLedger(ws.db);
      try {
        let done = 0;
        for (const id of Object.keys(files)) {
          const row = await ledger.get(id);
          expect(row?.state).toMatch(/^(pending|done)$/);
          if (row?.state === 'done') done++;
          expect(row!.attempts - row!.released, id).toBe(row?.state === 'done' ? 1 : 0);
        }
        expect(done).toBe(1);
      } finally {
        await ledger.close();
      }
      chmodSync(path.join(ws.source, 'locked'), 0o755);
      writeFileSync(h, '#!/bin/sh\nset -e\ncat "$1" > "$2"\n', { mode: 0o755 });
      const again = await runCli(['run', '-c', ws.configPath], as);
      expect(again.code, again.stderr).toBe(0);
      expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 0, claimed: 0, done: 6, dead: 0 });
    } finally {
      chmodSync(path.join(ws.source, 'locked'), 0o755);
    }
  });
});

describe('a subdirectory whose path is longer than Linux allows (PATH_MAX)', () => {
  it('is skipped as an unreadable one is, and the rest processed (before: ENAMETOOLONG failed the scan, exit 1, on every run)', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a' });
    // 20 levels of 250-byte names, made one relative step at a time (a shell's cd keeps the
    // whole path, and fails): past 4,096 bytes opendir(2) of the whole path says ENAMETOOLONG.
    const script = "const fs = require('node:fs'); const n = 'd'.repeat(250); for (let i = 0; i < 20; i++) { fs.mkdirSync(n); process.chdir(n); } fs.writeFileSync('deep.txt', 'deep');";
    const made = spawnSync(process.execPath, ['-e', script], { cwd: ws.source });
    expect(made.status, String(made.stderr)).toBe(0);
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)).toMatchObject({ outcome: 'completed', scan: 'partial', counts: { succeeded: 1, skippedDirectories: 1 } });
    expect(r.lines.filter((l) => l.msg.startsWith('scan: skipped a directory')).map((l) => l.code)).toEqual(['ENAMETOOLONG']);
    expect(readdirSync(ws.out).filter((f) => f.endsWith('.out'))).toEqual(['a.txt.out']);
  });
});

describe.skipIf(!PUSHGATEWAY)('an unreadable subdirectory, seen by Prometheus', () => {
  it("the run's final push carries cronsafe_scan_skipped_directories (the pass has ended by then)", async () => {
    const gw = await startPushgateway();
    const job = 'skipped-dirs';
    const ws = workspace({ name: job, handler: { command: COPY }, metrics: { pushgateway: gw.url, pushIntervalSeconds: 3600 } }, { 'a.txt': 'a', 'locked/x.txt': 'x' });
    const as = asNobody(ws);
    chmodSync(path.join(ws.source, 'locked'), 0o000);
    try {
      const r = await runCli(['run', '-c', ws.configPath], as);
      expect(r.code, r.stderr).toBe(0);
      expect(finished(r)).toMatchObject({ scan: 'partial', counts: { skippedDirectories: 1 } });
      const g = (await scrape(gw.url)).filter((x) => x.labels.job === job);
      expect(value(g, 'cronsafe_scan_skipped_directories')).toBe(1);
      expect(value(g, 'cronsafe_in_flight_items')).toBe(0);
    } finally {
      chmodSync(path.join(ws.source, 'locked'), 0o755);
      await gw.stop();
    }
  });
});
