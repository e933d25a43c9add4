/**
 * The ledger's file system fills up mid-run (SQLite: the state volume, often shared with the
 * outputs). The environment's fault: the pass stops with exit 1 and no item is charged for
 * it. The attempts running at that moment cannot be handed back (the hand-back is a ledger
 * write too), so the next run takes their claims as a dead run's: they must have been let
 * finish, not cut short, or each one costs its item an attempt it was never given a chance
 * to complete. (A hand-back the ledger cannot take is journalled instead: the last test.)
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it, type TestContext } from 'vitest';
import YAML from 'yaml';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { configure, FIXTURES, finished, runCli, spawnCli, statusJson, workspace, type Workspace } from '../helpers/cli.js';
import { invocations } from '../helpers/proc.js';
import { until } from '../helpers/wait.js';
import { charged, notChargedOnce } from '../helpers/ledger-sums.js';
import { fill } from '../helpers/fill.js';

const isRoot = process.getuid?.() === 0;
const LOGGED_COPY = path.join(FIXTURES, 'process/logged-copy.sh');

/**
 * A workspace of `files` with no output.directory, its ledger on a 4 MiB tmpfs (skipped
 * unless root can mount one); the caller unmounts `volume`.
 */
function withoutOutputOnTmpfs(ctx: TestContext, files: Record<string, string>): { ws: Workspace; volume: string; db: string; log: string } {
  const ws = workspace({ concurrency: 4 }, files);
  const volume = path.join(ws.dir, 'volume');
  mkdirSync(volume);
  if (!isRoot || spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', volume]).status !== 0) ctx.skip();
  const config = YAML.parse(readFileSync(ws.configPath, 'utf8')) as Record<string, unknown>;
  delete config.output;
  writeFileSync(ws.configPath, YAML.stringify(config));
  return { ws, volume, db: path.join(volume, 'cronsafe.db'), log: path.join(ws.dir, 'invocations.log') };
}

describe("the ledger's file system full mid-run (SQLite)", () => {
  it('stops the pass with exit 1; the attempts running then finish, and no item is charged for the fault', async (ctx) => {
    const files = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`item-${String(i).padStart(2, '0')}`, `payload ${i}\n`]));
    const ids = Object.keys(files);
    const ws = workspace({ concurrency: 4 }, files);
    const volume = path.join(ws.dir, 'volume');
    mkdirSync(volume);
    if (!isRoot || spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', volume]).status !== 0) ctx.skip();
    try {
      const db = path.join(volume, 'cronsafe.db');
      const log = path.join(ws.dir, 'invocations.log');
      // Each attempt takes 0.5 s: four are always running when the volume fills.
      configure(ws, { state: { sqlite: db }, handler: { command: ['/bin/sh', LOGGED_COPY, '{path}', '{output}'], env: { INVOCATIONS: log, DELAY: '0.5' } } });
      const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
      // Readiness: a few attempts have finished and four more are running.
      await until(() => [...invocations(log).values()].reduce((a, b) => a + b, 0) >= 8, 'eight handler starts', 30_000);
      const filler = path.join(volume, 'filler');
      fill(filler);
      const { code } = await run.exited;
      expect(code, run.stderr()).toBe(1);
      expect(finished({ lines: run.lines })).toMatchObject({ outcome: 'failed', exitCode: 1 });
      // Named as the ledger's failure, with its path, as at start-up: not SQLite's words alone.
      expect(run.stderr().startsWith(`cronsafe: run failed: state store unavailable (sqlite ${db}): the pass stopped: `), run.stderr()).toBe(true);
      expect(run.stderr().split('\n')).toHaveLength(2);
      const ran = invocations(log);
      rmSync(filler);

      const next = await runCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
      expect(next.code, next.stderr).toBe(0);
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: ids.length, dead: 0 });
      for (const id of ids) expect(readFileSync(path.join(ws.out, `${id}.out`), 'utf8'), id).toBe(files[id]);
      // Every item ran to its end once: none was charged a second attempt for the full volume.
      const ledger = await openSqliteLedger(db);
      try {
        for (const id of ids) {
          const rec = (await ledger.get(id))!;
          expect({ id, charged: rec.attempts - rec.released }, `started ${ran.get(id) ?? 0} time(s) in the run that found the volume full`).toEqual({ id, charged: 1 });
        }
      } finally {
        await ledger.close();
      }
      expect([...invocations(log).values()].every((n) => n === 1), 'no item ran twice').toBe(true);
    } finally {
      spawnSync('umount', ['-l', volume]);
    }
  }, 120_000);

  // Without output.directory no output proves that an attempt finished: the successes the
  // full volume kept out of both the ledger and the start journal (the attempts that were
  // running when the pass stopped) were left as started attempts, which the next run
  // charged as a dead run's claims. They are handed back in place (the journal's R record).
  it('without output.directory: the attempts whose ends could not be written are not charged; freed, the next run finishes every item', async (ctx) => {
    const files = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`item-${String(i).padStart(4, '0')}`, 'x']));
    const ids = Object.keys(files);
    const { ws, volume, db, log } = withoutOutputOnTmpfs(ctx, files);
    try {
      configure(ws, { state: { sqlite: db }, handler: { command: ['/bin/sh', '-c', 'echo "$1 $2" >> "$3"', 'sh', '{id}', '{attempt}', log] } });
      const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 90_000 });
      // Readiness: attempts are being started and finished steadily.
      await until(() => invocations(log).size >= 40, 'forty handler runs', 30_000);
      const filler = path.join(volume, 'filler');
      fill(filler);
      const { code } = await run.exited;
      expect(code, run.stderr()).toBe(1);
      rmSync(filler);

      const next = await runCli(['run', '-c', ws.configPath], { timeoutMs: 90_000 });
      expect(next.code, next.stderr).toBe(0);
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: ids.length, dead: 0 });
      expect(await notChargedOnce(db, ids)).toEqual({});
    } finally {
      spawnSync('umount', ['-l', volume]);
    }
  }, 200_000);

  // After a failure (settled the ledger's own way) every later claim and success went the
  // transactional way too, so when the volume filled nothing was left to flush at the end:
  // close() found no full file system, removed the journal with the start records of the
  // attempts running then, and the next run charged each one as a dead run's claim.
  it('without output.directory, a handler failure before the fill: the attempts whose ends could not be written are still not charged', async (ctx) => {
    const files = Object.fromEntries(Array.from({ length: 120 }, (_, i) => [`${i % 5 === 0 ? 'fail' : 'item'}-${String(i).padStart(3, '0')}`, 'x']));
    const ids = Object.keys(files);
    const { ws, volume, db, log } = withoutOutputOnTmpfs(ctx, files);
    try {
      const script = 'sleep 0.2; echo "$1 $2" >> "$3"; case "$1" in fail-*) exit 3;; esac';
      configure(ws, { state: { sqlite: db }, handler: { command: ['/bin/sh', '-c', script, 'sh', '{id}', '{attempt}', log] } });
      const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 90_000 });
      // Readiness: two failures recorded, and more attempts started since.
      await until(() => [...invocations(log).keys()].filter((id) => id.startsWith('fail-')).length >= 2 && invocations(log).size >= 16, 'two failures and sixteen handler runs', 30_000);
      const filler = path.join(volume, 'filler');
      fill(filler);
      const { code } = await run.exited;
      expect(code, run.stderr()).toBe(1);
      rmSync(filler);
      spawnSync('mount', ['-o', 'remount,size=16m', volume]);

      const next = await runCli(['run', '-c', ws.configPath], { timeoutMs: 90_000 });
      expect(next.code, next.stderr).toBe(0);
      expect((await statusJson(ws.configPath)).items).toMatchObject({ claimed: 0, dead: 0 });
      expect(await notChargedOnce(db, ids.filter((i) => i.startsWith('item-')))).toEqual({});
    } finally {
      spawnSync('umount', ['-l', volume]);
    }
  }, 200_000);

  // The chart's layout: the queue, output.directory and the ledger on one volume. When it
  // filled, the attempts running were judged the environment's fault and handed back, but
  // the hand-back is a ledger write too, and failed (SQLITE_FULL): the next run charged each
  // of those claims an attempt as a dead run's ("abandoned"), so every full-disk episode cost
  // good items an attempt, and retry.maxAttempts of them dead-lettered them.
  it('source, outputs and ledger on one volume that fills: the attempts handed back are not charged; freed, the next run finishes every item', async (ctx) => {
    const files = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`item-${String(i).padStart(3, '0')}`, `${String(i).padStart(4, '0')}\n`.repeat(1024)]));
    const ids = Object.keys(files);
    const ws = workspace({});
    const volume = path.join(ws.dir, 'volume');
    mkdirSync(volume);
    if (!isRoot || spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', volume]).status !== 0) ctx.skip();
    try {
      const source = path.join(volume, 'queue');
      const out = path.join(volume, 'out');
      const db = path.join(volume, 'state', 'cronsafe.db');
      mkdirSync(source);
      for (const [id, content] of Object.entries(files)) writeFileSync(path.join(source, id), content);
      configure(ws, {
        source: { directory: source },
        output: { directory: out },
        state: { sqlite: db },
        handler: { command: ['/bin/sh', '-c', 'cat "$1" > "$2"', 'sh', '{path}', '{output}'] },
      });
      const r = await runCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain('is full; stopping, nothing charged');
      const first = (await statusJson(ws.configPath)).items;
      expect(first.done, 'the volume filled mid-run').toBeLessThan(ids.length);
      // As status reads it (through the journal the run could not write into the ledger):
      // the attempts running were handed back, none is left claimed, only successes charged.
      expect(first).toMatchObject({ claimed: 0, dead: 0 });

      spawnSync('mount', ['-o', 'remount,size=16m', volume]);
      expect(await charged(db, ids), 'charged before the next run').toBe(first.done);
      const next = await runCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
      expect(next.code, next.stderr).toBe(0);
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: ids.length, dead: 0 });
      for (const id of ids) expect(readFileSync(path.join(out, `${id}.out`), 'utf8') === files[id], `${id}.out is whole`).toBe(true);
      // Charged only for the attempt that succeeded: none for the full volume.
      expect(await notChargedOnce(db, ids)).toEqual({});
    } finally {
      spawnSync('umount', ['-l', volume]);
    }
  }, 120_000);
});
