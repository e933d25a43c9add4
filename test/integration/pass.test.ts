import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/types.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import type { DiscoveredItem, Ledger } from '../../src/ledger/types.js';
import { discoverAndClaim } from '../contract/ledger-fixtures.js';
import { OutputStore } from '../../src/runner/output.js';
import { runPass, type PassDeps } from '../../src/runner/pass.js';
import { PendingHandlerTimes } from '../../src/metrics/handler-times.js';
import { createMetrics } from '../../src/metrics/registry.js';
import type { Handler } from '../../src/runner/types.js';
import { workspace } from '../helpers/cli.js';
import { memoryLogger } from '../helpers/log.js';
import { until } from '../helpers/wait.js';
import { DISCOVER_BATCH, DISCOVER_BATCH_MAX } from '../../src/runner/produce.js';

const open: Ledger[] = [];
afterEach(async () => {
  for (const l of open.splice(0)) await l.close();
});

async function setup(overrides: Record<string, unknown> = {}) {
  const ws = workspace({ handler: { command: ['true'] }, ...overrides });
  const config: Config = loadConfig(ws.configPath);
  const ledger = await openSqliteLedger(ws.db);
  open.push(ledger);
  const { log, lines } = memoryLogger();
  const never = new AbortController().signal;
  const deps = (handler: Handler, extra: Partial<PassDeps> = {}): PassDeps => ({
    config,
    ledger,
    handler,
    log,
    runId: 'run-1',
    owner: 'owner-1',
    stop: never,
    force: never,
    ...extra,
  });
  return { ws, config, ledger, lines, deps };
}

async function* ids(n: number, onYield?: (i: number) => void): AsyncGenerator<DiscoveredItem> {
  for (let i = 0; i < n; i++) {
    onYield?.(i);
    yield { id: `item-${i}` };
  }
}

describe('runPass (in-process, real SQLite ledger)', () => {
  it('processes every item once and reports counts', async () => {
    const { ledger, deps } = await setup();
    const seen: string[] = [];
    const r = await runPass(deps({ run: async (item) => void seen.push(item.id) }, { source: ids(1000) }));
    expect(r.outcome).toBe('completed');
    expect(r.counts).toMatchObject({ scanned: 1000, claimed: 1000, succeeded: 1000, failed: 0 });
    expect(new Set(seen).size).toBe(1000);
    expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 1000, dead: 0 });
  });

  it('reads ahead of the workers by a bounded amount only (flat memory)', async () => {
    const { config, deps } = await setup({ concurrency: 4, queueSize: 8 });
    let yielded = 0;
    let started = 0;
    let maxAhead = 0;
    const handler: Handler = {
      run: async () => {
        started++;
        maxAhead = Math.max(maxAhead, yielded - started);
        await new Promise((r) => setImmediate(r));
      },
    };
    await runPass(deps(handler, { source: ids(5000, () => yielded++) }));
    expect(started).toBe(5000);
    // The discover batch being sent and the next one read ahead (each at most
    // DISCOVER_BATCH_MAX) + the channel + the workers, never the whole backlog.
    expect(maxAhead).toBeLessThanOrEqual(2 * DISCOVER_BATCH_MAX + config.queueSize + config.concurrency);
    expect(2 * DISCOVER_BATCH_MAX + config.queueSize + config.concurrency).toBeLessThan(5000 / 2);
  });

  it('reads the next discovery batch from the source while the workers run this one', async () => {
    // One slot, held by the first item until the source is asked past the first batch.
    // Without the read-ahead the scan was asked for more only once the batch's ids were all
    // in the channel, which the held slot and the full channel never let happen: the
    // workers stood idle at every batch's end while the directory was read.
    const { ledger, deps } = await setup({ concurrency: 1, queueSize: 4 });
    let yielded = 0;
    const handler: Handler = {
      run: async (item) => {
        if (item.id === 'item-0') await until(() => yielded > DISCOVER_BATCH, 'the source asked for the second batch while the first item ran');
      },
    };
    const r = await runPass(deps(handler, { source: ids(3 * DISCOVER_BATCH, () => yielded++) }));
    expect(r.counts).toMatchObject({ scanned: 3 * DISCOVER_BATCH, succeeded: 3 * DISCOVER_BATCH, failed: 0 });
    expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 3 * DISCOVER_BATCH, dead: 0 });
  });

  it('retries failures within the pass when their backoff is over, then dead-letters', async () => {
    const { ledger, deps, lines } = await setup({ retry: { maxAttempts: 3, backoffSeconds: 0, backoffMaxSeconds: 0 } });
    const attempts = new Map<string, number>();
    const handler: Handler = {
      run: async (item) => {
        attempts.set(item.id, item.attempt);
        if (item.id === 'item-3') throw new Error('always broken');
        if (item.id === 'item-5' && item.attempt === 1) throw new Error('flaky once');
      },
    };
    const r = await runPass(deps(handler, { source: ids(10) }));
    expect(r.outcome).toBe('completed');
    expect(attempts.get('item-3')).toBe(3);
    expect(attempts.get('item-5')).toBe(2);
    expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 9, dead: 1 });
    expect(lines.find((l) => l.msg === 'item dead-lettered')).toMatchObject({ itemId: 'item-3', error: 'always broken' });
  });

  it('rejects and logs a completion whose claim was taken over meanwhile (fencing)', async () => {
    const { ws, ledger, deps, lines } = await setup();
    const thief = await openSqliteLedger(ws.db);
    open.push(thief);
    const handler: Handler = {
      run: async (item) => {
        if (item.id !== 'item-1') return;
        // Another owner takes the item over (as after a lease expiry): our completion must not land.
        await thief.reclaimOrphans('someone-else', { now: Date.now(), retry: { maxAttempts: 99, backoffMs: 0, backoffMaxMs: 0 } });
        await discoverAndClaim(thief, [{ id: 'item-1' }], { owner: 'thief', runId: 'run-2', now: Date.now(), leaseMs: 60_000 });
      },
    };
    const r = await runPass(deps(handler, { source: ids(3) }));
    expect(r.counts.fenced).toBeGreaterThanOrEqual(1);
    expect(await ledger.get('item-1')).toMatchObject({ state: 'claimed', owner: 'thief', attempts: 2 });
    expect(lines.some((l) => String(l.msg).startsWith('stale claim') && l.itemId === 'item-1')).toBe(true);
  });

  it('dead-letters an id that would escape the output directory, naming why', async () => {
    const { ws, ledger, deps } = await setup();
    const outputs = new OutputStore(path.join(ws.dir, 'out'));
    await outputs.prepare();
    async function* evil(): AsyncGenerator<DiscoveredItem> {
      yield { id: '../../etc/passwd' };
      yield { id: 'fine.scc' };
    }
    let ran = 0;
    const r = await runPass(deps({ run: async () => void ran++ }, { source: evil(), outputs }));
    expect(ran).toBe(1);
    expect(r.counts.deadLettered).toBe(1);
    const [dead] = await ledger.listDead();
    expect(dead).toMatchObject({ id: '../../etc/passwd' });
    expect(dead!.lastError).toMatch(/unsafe item id/);
  });

  it('logs periodic progress with done/total and rate', async () => {
    const { deps, lines } = await setup({ concurrency: 2 });
    const progress = () => lines.filter((l) => l.msg === 'progress');
    // The last item holds the pass open until a progress line has seen the other 59 done.
    const handler: Handler = {
      run: async (item) => {
        if (item.id === 'item-59') await until(() => progress().some((l) => (l.done as number) >= 59), 'a progress line with 59 done');
      },
    };
    await runPass(deps(handler, { source: ids(60), progressIntervalMs: 20 }));
    const line = progress().find((l) => (l.done as number) >= 59)!;
    expect(line).toMatchObject({ total: 60, inFlight: 1, scanComplete: true });
    expect(typeof line.ratePerSec).toBe('number');
  });

  it('progress counts the items waiting for a slot in total (they are claimed only when they start)', async () => {
    const { deps, lines } = await setup({ concurrency: 1, queueSize: 100 });
    const progress = () => lines.filter((l) => l.msg === 'progress');
    // item-0 holds the only slot until a progress line has seen the whole scan: 59 ids wait in the channel.
    const handler: Handler = {
      run: async (item) => {
        if (item.id === 'item-0') await until(() => progress().some((l) => l.scanComplete === true), 'a progress line after the scan');
      },
    };
    await runPass(deps(handler, { source: ids(60), progressIntervalMs: 20 }));
    // Whatever the claim had reached by then, the items not started yet are in total.
    const line = progress().find((l) => l.scanComplete === true)!;
    expect(line.queued).toBeGreaterThan(0);
    expect(line.total).toBe(60);
  });

  it('a stop before the scan ends drains: claimed-but-unstarted items are handed back uncharged', async () => {
    const { ledger, deps } = await setup({ concurrency: 1, queueSize: 4 });
    const stop = new AbortController();
    const handler: Handler = {
      run: async (item) => {
        if (item.id === 'item-2') stop.abort('SIGTERM');
      },
    };
    const r = await runPass(deps(handler, { source: ids(100), stop: stop.signal }));
    expect(r.outcome).toBe('drained');
    const c = await ledger.counts();
    expect(c.claimed).toBe(0);
    expect(c.done).toBe(r.counts.succeeded);
    expect(c.pending).toBeGreaterThan(0);
    for (let i = 0; i < 100; i++) {
      const rec = await ledger.get(`item-${i}`);
      if (rec?.state === 'pending') expect(rec.attempts - rec.released).toBe(0);
    }
  });

  it('tells an observer about every attempt with its outcome and handler time, and exposes live gauges', async () => {
    const { deps } = await setup({ retry: { maxAttempts: 2, backoffSeconds: 0, backoffMaxSeconds: 0 } });
    const seen: Array<[string, number]> = [];
    let read: (() => { inFlight: number }) | undefined;
    const observer = { attempt: (o: string, ms: number) => void seen.push([o, ms]), live: (r: () => { inFlight: number }) => (read = r) };
    const handler: Handler = {
      run: async (item) => {
        await new Promise((r) => setTimeout(r, 10));
        if (item.id === 'item-0') throw new Error('bad');
      },
    };
    await runPass(deps(handler, { source: ids(3), observer }));
    const outcomes = seen.map(([o]) => o).sort();
    expect(outcomes).toEqual(['dead', 'failed', 'succeeded', 'succeeded']);
    for (const [, ms] of seen) expect(ms).toBeGreaterThanOrEqual(9);
    expect(read?.().inFlight).toBe(0);
  });
});

describe('runPass: the lease guard on outputs (a pod cut off from the ledger for longer than a lease)', () => {
  it('does not commit an output once the claim\'s lease may have run out: the claim is handed back uncharged, nothing lands', async () => {
    const { ws, ledger, deps, lines } = await setup({ lease: { seconds: 90, renewSeconds: 30 } });
    const outputs = new OutputStore(ws.out);
    await outputs.prepare();
    let skew = 0;
    const handler: Handler = {
      run: async (item, ctx) => {
        writeFileSync(ctx.outputPath!, `attempt ${ctx.attempt}`);
        // The first attempt outlives the lease while no renewal reaches the ledger.
        if (ctx.attempt === 1) skew += 91_000;
        else expect(existsSync(path.join(ws.out, 'item-0.out')), 'the first attempt left nothing').toBe(false);
      },
    };
    const r = await runPass(deps(handler, { source: ids(1), outputs, now: () => Date.now() + skew, leaseGuardsOutputs: true }));
    // Handed back uncharged, then claimed again by the same pass (a new claim, a new lease).
    expect(r.counts).toMatchObject({ succeeded: 1, released: 1, failed: 0 });
    expect(readFileSync(path.join(ws.out, 'item-0.out'), 'utf8')).toBe('attempt 2');
    // What the run's end does (holding-lock.ts): the attempt directories no attempt holds go.
    outputs.close();
    expect(readdirSync(outputs.tempDir)).toEqual([]);
    expect(await ledger.get('item-0')).toMatchObject({ state: 'done', attempts: 2, released: 1 });
    expect(lines.some((l) => /lease may have run out/.test(String(l.reason)))).toBe(true);
  });

  it('commits when a renewal reached the ledger after the claim, and without the guard (SQLite, under its run lock)', async () => {
    const { ws, ledger, deps } = await setup({ lease: { seconds: 2, renewSeconds: 1 } });
    const outputs = new OutputStore(ws.out);
    await outputs.prepare();
    let skew = 0;
    let renewed!: () => void;
    const renewal = new Promise<void>((r) => (renewed = r));
    const renew = ledger.renew.bind(ledger);
    ledger.renew = async (owner, idsHeld, until) => {
      const lost = await renew(owner, idsHeld, until);
      renewed();
      return lost;
    };
    const handler: Handler = {
      run: async (item, ctx) => {
        writeFileSync(ctx.outputPath!, `out of ${item.id}`);
        if (item.id !== 'item-0') return;
        skew += 1_500; // 1.5 s of the 2 s lease gone by the claim's clock ...
        await renewal; // ... and then a renewal (every 1 s of real time) reaches the ledger
        skew += 1_000; // 2.5 s after the claim: past its own lease, within the renewal's
      },
    };
    const r = await runPass(deps(handler, { source: ids(1), outputs, now: () => Date.now() + skew, leaseGuardsOutputs: true }));
    expect(r.counts).toMatchObject({ succeeded: 1, released: 0 });
    expect(readFileSync(path.join(ws.out, 'item-0.out'), 'utf8')).toBe('out of item-0');

    // The default on SQLite: no guard (nobody else can take a claim over under the run lock).
    const late: Handler = { run: async (item, ctx) => void (writeFileSync(ctx.outputPath!, 'late'), (skew += 10_000)) };
    const r2 = await runPass(deps(late, { runId: 'run-2', owner: 'owner-2', source: (async function* () { yield { id: 'other' }; })(), outputs, now: () => Date.now() + skew }));
    expect(r2.counts).toMatchObject({ succeeded: 1 });
    expect(readFileSync(path.join(ws.out, 'other.out'), 'utf8')).toBe('late');
  });
});

describe('runPass: handler time under a step of the wall clock', () => {
  it('a step back of the wall clock during an attempt does not make its handler time negative (cronsafe_item_duration_seconds_sum never goes down)', async () => {
    const { deps } = await setup();
    const handlerTimes = new PendingHandlerTimes();
    const metrics = createMetrics({ job: 'j', read: async () => undefined, handlerTimes }, 'run');
    const observed: Array<[string, number]> = [];
    let skew = 0;
    const handler: Handler = {
      run: async (item) => {
        await new Promise((r) => setTimeout(r, 20));
        if (item.id === 'item-0') skew -= 3_600_000; // NTP or a resumed VM sets the clock back an hour
      },
    };
    const r = await runPass(
      deps(handler, {
        source: ids(2),
        now: () => Date.now() + skew,
        observer: {
          attempt: (outcome, ms) => {
            observed.push([outcome, ms]);
            metrics.observeAttempt(outcome, ms / 1000);
          },
        },
      }),
    );
    expect(r.counts).toMatchObject({ succeeded: 2 });
    expect(observed).toHaveLength(2);
    for (const [outcome, ms] of observed) {
      expect(outcome).toBe('succeeded');
      expect(ms).toBeGreaterThanOrEqual(15);
      expect(ms).toBeLessThan(60_000);
    }
    // What goes to the ledger's histogram (cronsafe_item_duration_seconds_sum, in microseconds).
    const sum = (handlerTimes.peek()['succeeded.us'] ?? 0) / 1e6;
    expect(sum).toBeGreaterThan(0);
    expect(sum).toBeLessThan(60);
  });
});
