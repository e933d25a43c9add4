import { mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { migrate } from '../../src/ledger/sqlite/migrate.js';
import type { Ledger, RunOutcome } from '../../src/ledger/types.js';
import { runPass, type PassDeps } from '../../src/runner/pass.js';
import { PRUNE_BATCH, pruneLedger } from '../../src/runner/prune.js';
import { workspace, type Workspace } from '../helpers/cli.js';
import { memoryLogger } from '../helpers/log.js';
import { metricTotals, seedDone } from '../helpers/retention.js';

const DAY = 24 * 3600 * 1000;
/** The final pass's clock. */
const T = Date.UTC(2026, 10, 30, 12);
const never = new AbortController().signal;

const open: Ledger[] = [];
afterEach(async () => {
  for (const l of open.splice(0)) await l.close();
});

/** Opened as `cronsafe run` opens it (write-behind through the start journal). */
async function ledgerOf(ws: Workspace): Promise<Ledger> {
  const l = await openSqliteLedger(ws.db, { writeBehind: true });
  open.push(l);
  return l;
}
async function closeAll(): Promise<void> {
  for (const l of open.splice(0)) await l.close();
}

function passDeps(ws: Workspace, ledger: Ledger, runId: string, at: number) {
  const config = loadConfig(ws.configPath);
  const { log, lines } = memoryLogger();
  const deps: PassDeps = { config, ledger, handler: { run: async () => undefined }, log, runId, owner: `o-${runId}`, stop: never, force: never, now: () => at };
  return { deps, lines, config };
}

const size = (file: string): number => statSync(file).size;

describe('retention with the defaults (real SQLite file, real passes over a directory)', () => {
  it('a pass prunes 10,000 runs and 100,000 done items whose files are gone: rows and file shrink, metric totals do not move', async () => {
    const present = Array.from({ length: 20 }, (_, i) => `keep-${i}.txt`);
    const ws = workspace({ handler: { command: ['true'] } }, Object.fromEntries(present.map((f) => [f, 'x'])));
    let ledger = await ledgerOf(ws);
    // 100,000 items done 40 days ago whose files are gone, and the 20 that are still there.
    const gone = Array.from({ length: 100_000 }, (_, i) => `gone/${String(i).padStart(6, '0')}.scc`);
    await seedDone(ledger, [...present, ...gone], T - 40 * DAY);

    // A run 31 days ago scanned the whole directory: those files were missing then. It
    // also processed 5 new files (their successes written behind, through the journal).
    for (let i = 0; i < 5; i++) writeFileSync(path.join(ws.source, `new-${i}.txt`), 'x');
    const a = passDeps(ws, ledger, 'pass-a', T - 31 * DAY);
    expect(a.config.retention).toEqual({ runs: 1000, days: 30, forgetMissingAfterDays: 30 });
    const ra = await runPass(a.deps);
    expect(ra.scan).toBe('complete');
    expect(ra.counts).toMatchObject({ succeeded: 5 });
    expect(ra.pruned).toMatchObject({ markedMissing: 100_000, forgotten: 0 });
    expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 100_025, dead: 0 });

    // 10,000 runs over the last 60 days (a job every ~9 minutes), and old events.
    const outcomes: RunOutcome[] = ['completed', 'completed', 'completed', 'failed', 'drained', 'died'];
    for (let i = 0; i < 10_000; i++) {
      const at = T - 60 * DAY + Math.floor((i * 59 * DAY) / 10_000);
      await ledger.startRun({ runId: `run-${i}`, owner: 'o', startedAt: at, scheduledFor: at });
      await ledger.finishRun(`run-${i}`, at + 1000, outcomes[i % outcomes.length]!, { scanned: 100_020, claimed: 0 });
    }
    for (let i = 0; i < 3000; i++) await ledger.recordEvent(i % 2 ? 'overrun' : 'lock-skip', T - 50 * DAY + i * 1000, {}, T - 50 * DAY + i * 1000);
    const totals = await metricTotals(ledger, T);
    expect(totals.join('\n')).toMatch(/cronsafe_runs_total\{job="test-job",outcome="completed"\} 5001/);
    expect(totals.join('\n')).toMatch(/cronsafe_items_processed_total\{job="test-job",result="succeeded"\} 100025/);
    const last = await ledger.lastOccurrenceRecorded();
    await closeAll(); // checkpoints the WAL into the file
    const before = size(ws.db);

    ledger = await ledgerOf(ws);
    const b = passDeps(ws, ledger, 'pass-b', T);
    const rb = await runPass(b.deps);
    expect(rb.outcome).toBe('completed');
    expect(rb.pruned).toMatchObject({ runs: 9000, events: 3000, forgotten: 100_000, stopped: false });
    expect(rb.pruned!.pagesFreed).toBeGreaterThan(0);
    expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 25, dead: 0 });
    expect(await ledger.recentRuns(20_000)).toHaveLength(1000);
    expect(await ledger.countEvents('overrun')).toBe(0);
    expect(await metricTotals(ledger, T)).toEqual(totals);
    expect(await ledger.lastOccurrenceRecorded()).toBe(last);
    await closeAll();
    const after = size(ws.db);
    // ~100,000 item rows and 9,000 runs were most of the file.
    expect(after).toBeLessThan(before / 4);

    // A forgotten file that comes back is a new item, processed again.
    const c = await ledgerOf(ws);
    expect(await c.get(gone[0]!)).toBeNull();
  }, 180_000);

  it('a ledger file from before retention keeps working; pruning frees pages for reuse and says how to shrink it', async () => {
    const ws = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'x' });
    // As an older cronsafe made it: auto_vacuum NONE (the default), schema migrated.
    mkdirSync(ws.state, { recursive: true });
    const raw = new Database(ws.db);
    raw.pragma('journal_mode = WAL');
    migrate(raw);
    raw.close();
    const ledger = await ledgerOf(ws);
    for (let i = 0; i < 3000; i++) {
      await ledger.startRun({ runId: `run-${i}`, owner: 'o', startedAt: T - 40 * DAY + i, scheduledFor: null });
      await ledger.finishRun(`run-${i}`, T - 40 * DAY + i + 1, 'completed', { scanned: 1 });
    }
    const p = passDeps(ws, ledger, 'pass', T);
    const r = await runPass(p.deps);
    // All 40 days old: all but the newest 20 go.
    expect(r.pruned).toMatchObject({ runs: 2980, pagesFreed: 0 });
    expect(p.lines.some((l) => l.level === 40 && /one-time VACUUM/.test(String(l.msg)))).toBe(true);
    expect((await ledger.runStats()).byOutcome.completed).toBe(3000);
  }, 60_000);

  it('marks nothing missing after a scan that is not a whole scan of the directory (here: another source)', async () => {
    const ws = workspace({ handler: { command: ['true'] } });
    const ledger = await ledgerOf(ws);
    await seedDone(ledger, ['x', 'y'], T - 40 * DAY);
    async function* other() {
      yield { id: 'z' };
    }
    const p = passDeps(ws, ledger, 'pass', T);
    const r = await runPass({ ...p.deps, source: other() });
    expect(r.pruned).toMatchObject({ markedMissing: 0, forgotten: 0 });
    const again = await runPass({ ...passDeps(ws, ledger, 'pass-2', T + 40 * DAY).deps, source: other() });
    expect(again.pruned).toMatchObject({ markedMissing: 0, forgotten: 0 });
    expect(await ledger.counts()).toMatchObject({ done: 3 });
    // The directory itself (empty): a whole scan, so x, y and z are marked (z more than a
    // day after it was last seen: a done row's seen mark may be a day old).
    const whole = await runPass(passDeps(ws, ledger, 'pass-3', T + 42 * DAY).deps);
    expect(whole.scan).toBe('complete');
    expect(whole.pruned).toMatchObject({ markedMissing: 3, forgotten: 0 });
  }, 60_000);

  it('over 40 days of passes 8 hours apart: never marks or forgets a file that is there; forgets a deleted one 30 to 32 days after', async () => {
    // Discovery rewrites a done row's seen mark at most once a day (src/ledger/sqlite/discover.ts):
    // the passes in between write nothing for it, and the missing-file walk must still tell
    // them from files that are gone.
    const present = Array.from({ length: 30 }, (_, i) => `keep-${String(i).padStart(2, '0')}.txt`);
    const ws = workspace({ handler: { command: ['true'] } }, Object.fromEntries([...present, 'gone.txt'].map((f) => [f, 'x'])));
    const ledger = await ledgerOf(ws);
    const start = T - 40 * DAY;
    const deletedAt = start + 2 * DAY + 1;
    let marked = 0;
    let forgottenAt: number | undefined;
    for (let at = start; at <= T; at += DAY / 3) {
      if (at > deletedAt && at - DAY / 3 <= deletedAt) rmSync(path.join(ws.source, 'gone.txt'));
      const r = await runPass(passDeps(ws, ledger, `pass-${at}`, at).deps);
      expect(r.scan).toBe('complete');
      marked += r.pruned!.markedMissing;
      if (r.pruned!.forgotten > 0) forgottenAt ??= at;
      expect(r.pruned!.forgotten, `pass at day ${(at - start) / DAY}`).toBe(forgottenAt === at ? 1 : 0);
      for (const f of present) expect(await ledger.get(f), f).toMatchObject({ state: 'done', attempts: 1 });
    }
    expect(marked).toBe(1);
    expect(forgottenAt).toBeGreaterThanOrEqual(deletedAt + 30 * DAY);
    expect(forgottenAt).toBeLessThanOrEqual(deletedAt + 32 * DAY);
    expect(await ledger.get('gone.txt')).toBeNull();
    expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 30, dead: 0 });
  }, 120_000);

  it('a clock stepped back an hour during the scan (NTP) marks no file that is there', async () => {
    // Discovery leaves a done row alone when its seen mark is under a day older than the
    // batch's clock; the missing-file walk counted it found when the mark was under a day
    // older than the scan's start. A batch read behind that start (the clock went back)
    // left rows alone that the walk then marked: files the scan had just found.
    const files = Array.from({ length: 600 }, (_, i) => `f-${String(i).padStart(3, '0')}.txt`);
    const ws = workspace({ handler: { command: ['true'] } }, Object.fromEntries(files.map((f) => [f, 'x'])));
    const ledger = await ledgerOf(ws);
    const first = await runPass(passDeps(ws, ledger, 'pass-1', T - DAY - DAY / 2).deps);
    expect(first.counts).toMatchObject({ succeeded: 600 });

    // 25 hours later (so seen marks are 25 h old at the scan's start); after the first
    // discovery batch (256 of 600 items) the clock is stepped back by an hour.
    const start = T - DAY / 2 + 3600_000;
    let back = false;
    const stepping = new Proxy(ledger, {
      get(target, key) {
        if (key === 'discover') return async (...a: Parameters<Ledger['discover']>) => target.discover(...a).finally(() => (back = true));
        const v = Reflect.get(target, key, target) as unknown;
        return typeof v === 'function' ? (v as (...x: unknown[]) => unknown).bind(target) : v;
      },
    });
    const deps = { ...passDeps(ws, stepping, 'pass-2', start).deps, now: () => (back ? start - 3600_000 : start) };
    const r = await runPass(deps);
    expect(r.scan).toBe('complete');
    expect(r.pruned).toMatchObject({ markedMissing: 0, forgotten: 0 });
    const db = new Database(ws.db, { readonly: true });
    try {
      expect(db.prepare('SELECT count(*) FROM items WHERE missing_since IS NOT NULL').pluck().get()).toBe(0);
    } finally {
      db.close();
    }
    expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 600, dead: 0 });
  });

  it('a monthly job keeps its newest 20 runs past retention.days: status still shows the months before', async () => {
    const ws = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'x' });
    const ledger = await ledgerOf(ws);
    // Four monthly runs, the newest 31 days ago; two of them failed.
    const outcomes: RunOutcome[] = ['completed', 'failed', 'failed', 'completed'];
    for (let i = 4; i >= 1; i--) {
      const at = T - i * 31 * DAY;
      await ledger.startRun({ runId: `month-${i}`, owner: 'o', startedAt: at, scheduledFor: at });
      await ledger.finishRun(`month-${i}`, at + 1000, outcomes[4 - i]!, {});
    }
    const p = passDeps(ws, ledger, 'pass', T);
    expect(p.config.retention).toEqual({ runs: 1000, days: 30, forgetMissingAfterDays: 30 });
    const r = await runPass(p.deps);
    expect(r.outcome).toBe('completed');
    // Before: every run but the newest was older than 30 days and deleted, so `cronsafe
    // status` of a monthly (or any less than every-ten-days) job showed one run, and none of
    // the failed months, though retention.runs is at least 20 so that it shows the newest 10.
    expect(r.pruned).toMatchObject({ runs: 0 });
    expect((await ledger.recentRuns(10)).map((x) => `${x.runId} ${x.outcome}`)).toEqual([
      'month-1 completed',
      'month-2 failed',
      'month-3 failed',
      'month-4 completed',
    ]);
    // Past the newest 20, retention.days deletes as before.
    for (let i = 0; i < 25; i++) {
      const at = T - 40 * DAY + i * DAY;
      await ledger.startRun({ runId: `daily-${i}`, owner: 'o', startedAt: at, scheduledFor: at });
      await ledger.finishRun(`daily-${i}`, at + 1000, 'completed', {});
    }
    const again = await runPass(passDeps(ws, ledger, 'pass-2', T).deps);
    expect(again.pruned).toMatchObject({ runs: 9 });
    expect(await ledger.recentRuns(100)).toHaveLength(20);
    expect((await ledger.runStats()).byOutcome).toMatchObject({ completed: 27, failed: 2 });
  }, 60_000);

  it('a stop ends pruning between two bounded steps (a drain never waits for the rest)', async () => {
    const ws = workspace({ handler: { command: ['true'] } });
    const ledger = await ledgerOf(ws);
    for (let i = 0; i < 3 * PRUNE_BATCH + 100; i++) {
      await ledger.startRun({ runId: `run-${i}`, owner: 'o', startedAt: T - 40 * DAY + i });
      await ledger.finishRun(`run-${i}`, T - 40 * DAY + i + 1, 'completed', {});
    }
    const stop = new AbortController();
    const steps: number[] = [];
    // The real ledger; the stop arrives (a SIGTERM) while the first step runs.
    const watched = new Proxy(ledger, {
      get(target, prop, receiver) {
        if (prop === 'pruneRuns') {
          return async (o: Parameters<Ledger['pruneRuns']>[0]) => {
            const n = await target.pruneRuns(o);
            steps.push(n);
            stop.abort(new Error('SIGTERM'));
            return n;
          };
        }
        return Reflect.get(target, prop, receiver) as unknown;
      },
    });
    const { log } = memoryLogger();
    const config = loadConfig(ws.configPath);
    const r = await pruneLedger({ ledger: watched, retention: config.retention, log, now: () => T, stop: stop.signal, wholeScan: { passId: 'p', startedAt: T } });
    expect(steps).toEqual([PRUNE_BATCH]);
    expect(r).toMatchObject({ runs: PRUNE_BATCH, events: 0, markedMissing: 0, forgotten: 0, pagesFreed: 0, stopped: true });
    expect(await ledger.recentRuns(10_000)).toHaveLength(2 * PRUNE_BATCH + 100);
    expect((await ledger.runStats()).byOutcome.completed).toBe(3 * PRUNE_BATCH + 100);
  }, 60_000);
});
