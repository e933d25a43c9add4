import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, finished, runCli, statusJson, workspace } from '../helpers/cli.js';

// A module handler shares cronsafe's process: it must not be able to end the run with
// "pass completed" (exit 0) while claims are still held, nor crash it with claims left.
const items = (n: number, extra: Record<string, string>) => ({
  ...Object.fromEntries(Array.from({ length: n }, (_, i) => [`item-${String(i).padStart(3, '0')}.scc`, `${i}`])),
  ...extra,
});

describe('module handler: process.exit and unhandled rejections', () => {
  it('process.exit(0) inside an attempt fails that item only; the run completes', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'handlers/module-exit.mjs') } }, items(20, { 'exit-now.scc': 'x' }));
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)).toMatchObject({ outcome: 'completed', counts: { succeeded: 20, failed: 1 } });
    const failed = r.lines.find((l) => l.msg === 'item failed; will retry');
    expect(failed).toMatchObject({ itemId: 'exit-now.scc' });
    expect(String(failed?.error)).toMatch(/handler code called process\.exit\(0\)/);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 1, claimed: 0, done: 20, dead: 0 });
  });

  it('process.exit inside an attempt, caught and thrown again as the cause of its own error, fails that item only; the run completes', async () => {
    // Taken for a swallowed call (the rejection was not the call's own throw), it also
    // stopped the run with exit 1, on every run until the item was dead-lettered.
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'handlers/module-exit.mjs') }, concurrency: 2 }, items(20, { 'item-005-wrapped.scc': 'w' }));
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.lines.find((l) => l.msg === 'handler code broke the process; stopping the run')).toBeUndefined();
    expect(finished(r)).toMatchObject({ outcome: 'completed', counts: { succeeded: 20, failed: 1 } });
    expect(r.lines.find((l) => l.msg === 'item failed; will retry')).toMatchObject({ itemId: 'item-005-wrapped.scc', error: 'conversion failed for item-005-wrapped.scc' });
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 1, claimed: 0, done: 20, dead: 0 });
  });

  it('process.exit swallowed, then an AggregateError found among its own errors thrown: the run stops at once, claims handed back, exit 1', async () => {
    // Looking for the call in the rejection went down every error of every error, 16^8
    // times per call: the process froze for minutes (no lease renewed, no signal heard).
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'handlers/module-exit.mjs') }, concurrency: 2 }, items(20, { 'item-000-selfagg.scc': 's' }));
    const r = await runCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain('cronsafe: run failed: handler code called process.exit(4) and no attempt failed with it');
    expect((await statusJson(ws.configPath)).items.claimed).toBe(0);
  }, 90_000);

  it("process.exit swallowed, then an error thrown whose cause getter calls process.exit beside a running attempt: the run stops, claims handed back, exit 1", async () => {
    // Each call the getter made was added to the calls being looked into, looked into in
    // turn, and made another: the process spun there for good, its memory growing.
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'handlers/module-exit.mjs') }, concurrency: 2 }, { 'item-000-hold.scc': 'h', 'item-001-lazycause.scc': 'l' });
    const r = await runCli(['run', '-c', ws.configPath], { timeoutMs: 30_000 });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/cronsafe: run failed: handler code called process\.exit\([56]\) and no attempt failed with it/);
    expect((await statusJson(ws.configPath)).items.claimed).toBe(0);
  });

  it('process.exit(0) from a timer stops the run: claims handed back, outcome failed, exit 1', async () => {
    const ws = workspace(
      { handler: { module: path.join(FIXTURES, 'handlers/module-exit.mjs') }, concurrency: 2 },
      items(200, { 'item-000-timer.scc': 't' }),
    );
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(1);
    const broke = r.lines.find((l) => l.msg === 'handler code broke the process; stopping the run');
    expect(JSON.stringify(broke?.err)).toMatch(/process\.exit\(0\)/);
    expect(finished(r)).toMatchObject({ outcome: 'failed' });
    const s = await statusJson(ws.configPath);
    expect(s.items.claimed).toBe(0);
    expect(s.items.pending).toBeGreaterThan(0); // stopped early; the rest waits for the next run
  });

  it('an unhandled rejection from handler code stops the run with its claims handed back, exit 1', async () => {
    const ws = workspace(
      { handler: { module: path.join(FIXTURES, 'process/unhandled-module.mjs') }, concurrency: 2 },
      items(200, { 'item-000-reject.scc': 'r' }),
    );
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(1);
    const broke = r.lines.find((l) => l.msg === 'handler code broke the process; stopping the run');
    expect(JSON.stringify(broke?.err)).toMatch(/promise rejection unhandled: lost promise for item-000-reject\.scc/);
    expect(finished(r)).toMatchObject({ outcome: 'failed' });
    const s = await statusJson(ws.configPath);
    expect(s.items.claimed).toBe(0);
    expect(s.items.pending).toBeGreaterThan(0);
  });
});

describe('module handler: a value thrown from a timer that cannot be described', () => {
  // Described in the uncaughtException listener, the getter's throw (or instanceof's, on a
  // revoked Proxy) ended the process there: Node's exit 7 and raw stack, the claims of every
  // attempt in flight left behind (charged by the next run as after a crash).
  for (const [kind, said] of [
    ['getter', /uncaught exception: threw a value that cannot be described \(reading it threw: message getter failed\)/],
    ['revoked', /uncaught exception: threw a value that cannot be described \(reading it threw: [^)]*revoked\)/],
    // process.exit's own throw, its message made a getter that throws: read as is, it threw there too.
    ['exitmsg', /handler code called process\.exit\(0\) outside an attempt \(from a timer or callback\)/],
  ] as const) {
    it(`(${kind}) stops the run with its claims handed back, exit 1, saying what was thrown`, async () => {
      const ws = workspace(
        { handler: { module: path.join(FIXTURES, 'handlers/module-undescribable.mjs') }, concurrency: 2 },
        items(5, { [`item-000-${kind}.scc`]: 'x' }),
      );
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(1);
      const broke = r.lines.find((l) => l.msg === 'handler code broke the process; stopping the run');
      expect(JSON.stringify(broke?.err)).toMatch(said);
      expect(finished(r)).toMatchObject({ outcome: 'failed' });
      expect(r.stderr).not.toMatch(/Node\.js v/);
      const s = await statusJson(ws.configPath);
      expect(s.items).toMatchObject({ claimed: 0, dead: 0 });
      expect(s.items.pending).toBeGreaterThan(0);
    });
  }
});

describe('module handler: a returned value whose then getter throws', () => {
  it('fails that item only, with what was thrown: the run completes and leaves no claim', async () => {
    // Read outside the attempt's catch, what the getter threw (String() cannot convert it)
    // rejected the runner's attempt unheard: exit 1, the item's claim never handed back.
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'handlers/module-hostile-return.mjs') }, concurrency: 2 }, items(5, { 'item-000-then-getter.scc': 'x' }));
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)).toMatchObject({ outcome: 'completed', counts: { succeeded: 5, failed: 1 } });
    const failed = r.lines.find((l) => l.msg === 'item failed; will retry');
    expect(failed).toMatchObject({ itemId: 'item-000-then-getter.scc', error: 'threw {"reason":"then getter failed"}' });
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 1, claimed: 0, done: 5, dead: 0 });
  });
});

describe('module handler: an Error whose message is not a string', () => {
  it('fails its item with that message, not with a TypeError of cronsafe\'s own', async () => {
    // Read as a string, `message: 404` failed the item with "err.message.includes is not a function".
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'handlers/module-throws-value.mjs') } }, { 'error-number-message': 'x' });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.lines.find((l) => l.msg === 'item failed; will retry')).toMatchObject({ itemId: 'error-number-message', error: '404 (E_HTTP)' });
  });
});

describe('module handler: an item object changed by handler code', () => {
  it('a failure after it set item.path to another file is charged, not forgotten as gone', async () => {
    // Its failure was judged by the path it set (a file that does not exist): "item gone",
    // dropped from the ledger uncharged, found again by the next scan: never dead-lettered.
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'handlers/module-mutates-item.mjs') } }, items(3, { 'item-fail.scc': 'f' }));
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.lines.find((l) => l.msg.startsWith('item gone'))).toBeUndefined();
    expect(finished(r)).toMatchObject({ outcome: 'completed', counts: { succeeded: 3, failed: 1, gone: 0 } });
    expect(r.lines.find((l) => l.msg === 'item failed; will retry')).toMatchObject({ itemId: 'item-fail.scc', error: 'cannot convert item-fail.scc' });
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 1, claimed: 0, done: 3, dead: 0 });
  });
});

describe('module handler: a CommonJS module compiled from an ES module', () => {
  it('tsc / Babel output (exports.__esModule, exports.default = fn): validate says OK and the run calls the function', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'handlers/module-tsc-cjs.cjs') } }, items(3, {}));
    const v = await runCli(['validate', '-c', ws.configPath]);
    expect(v.code, v.stderr).toBe(0);
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(finished(r), r.stderr).toMatchObject({ outcome: 'completed', counts: { succeeded: 3 } });
    expect(readFileSync(path.join(ws.out, 'item-001.scc.out'), 'utf8')).toBe('item-001.scc 1');
  });

  it('one whose default is not a function is still exit 78 naming handler.module', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'handlers/module-cjs-no-function.cjs') } }, items(1, {}));
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', ws.configPath]);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toMatch(/handler\.module: .*default export must be a function .*found an object \(Object\)/);
    }
  });

  it('one that sets exports.default without exports.__esModule: exit 78 saying its default is the function and what to set', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'handlers/module-cjs-default-only.cjs') } }, items(1, {}));
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', ws.configPath]);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toMatch(/found an object \(Object\): its `default` is a function \(a CommonJS module with exports\.default but no exports\.__esModule = true: set that/);
    }
  });
});

describe('module handler: the context it prints', () => {
  it('JSON.stringify(ctx) and console.log(ctx) show the attempt and output path, never the claim (its owner token)', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'handlers/module-print-ctx.mjs') } }, items(1, {}));
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    const runId = String(r.lines.find((l) => l.msg === 'run started')?.runId);
    expect(runId.length).toBeGreaterThan(4);
    const [json = '', inspected = ''] = readFileSync(path.join(ws.out, 'item-000.scc.out'), 'utf8').split('\n', 2);
    expect(Object.keys(JSON.parse(json) as object).sort()).toEqual(['attempt', 'outputPath']);
    expect(JSON.parse(json)).toMatchObject({ attempt: 1 });
    // The owner token holds the run's id.
    for (const shown of [json, inspected]) {
      expect(shown).not.toContain(runId);
      expect(shown).not.toMatch(/owner|claim/);
    }
  });

  it('a context made from ctx (Object.create(ctx) with a field added, a Proxy of it) reads signal, log, attempt and outputPath', async () => {
    // With the state in #private fields, each getter threw "Cannot read private member" on
    // them: every attempt failed and was charged.
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'handlers/module-derived-ctx.mjs') } }, items(1, {}));
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.lines.find((l) => l.msg === 'run finished')?.counts).toMatchObject({ succeeded: 1, failed: 0 });
    const runId = String(r.lines.find((l) => l.msg === 'run started')?.runId);
    const [seen, spread] = readFileSync(path.join(ws.out, 'item-000.scc.out'), 'utf8').split('\n', 2);
    expect(JSON.parse(seen!)).toEqual({ aborted: false, attempt: 1, tag: 'mine', same: true, logs: 'function' });
    // {...ctx} copies nothing of the claim either.
    expect(spread).not.toContain(runId);
  });
});
