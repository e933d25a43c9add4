import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { configure, FIXTURES, finished, spawnCli, statusJson, workspace } from '../helpers/cli.js';
import { alive, filesIn, filesUnder, until } from '../helpers/wait.js';

const slow = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];
const items = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`slow-${i}.scc`, `item ${i}`]));

function markerPids(dir: string): number[] {
  return filesIn(dir)
    .filter((f) => f.endsWith('.started'))
    .map((f) => Number(f.split('.')[0]));
}

describe('graceful drain on SIGTERM', () => {
  it('exits 75 before the grace period when items outlast it; no partial output; interrupted items pending again, not charged', async () => {
    const ws = workspace({ handler: { command: slow, timeoutSeconds: 600 }, concurrency: 2, drain: { gracePeriodSeconds: 6, marginSeconds: 2 } }, items(6));
    const markers = path.join(ws.dir, 'markers');
    const run = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '120000' } });
    await until(() => markerPids(markers).length === 2, 'two handlers to start', 60_000);
    const t0 = Date.now();
    run.child.kill('SIGTERM');
    const { code, signal } = await run.exited;
    const elapsed = Date.now() - t0;
    expect(signal).toBeNull();
    expect(code, run.stderr()).toBe(75);
    expect(elapsed).toBeLessThan(6_000); // inside terminationGracePeriodSeconds
    expect(finished({ lines: run.lines })?.outcome).toBe('drained');
    // The handler children (own process group) are gone too.
    for (const pid of markerPids(markers)) expect(alive(pid), `handler ${pid} killed`).toBe(false);
    // No output, partial or otherwise: nothing finished.
    expect(filesIn(ws.out).filter((f) => f !== '.cronsafe-tmp')).toEqual([]);
    expect(filesUnder(path.join(ws.out, '.cronsafe-tmp'))).toEqual([]);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 6, claimed: 0, done: 0, dead: 0 });
    const ledger = await openSqliteLedger(ws.db);
    try {
      for (const pid of markerPids(markers)) {
        const id = path.basename(readFileSync(path.join(markers, `${pid}.started`), 'utf8'));
        const rec = await ledger.get(id);
        expect(rec).toMatchObject({ state: 'pending', attempts: 1, released: 1 });
        expect(rec!.lastError).toContain('interrupted');
      }
    } finally {
      await ledger.close();
    }
  });

  it('exits 0 when in-flight items finish within the grace period and nothing is left', async () => {
    const ws = workspace({ handler: { command: slow }, concurrency: 2, drain: { gracePeriodSeconds: 30, marginSeconds: 5 } }, items(2));
    const markers = path.join(ws.dir, 'markers');
    const run = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '1500' } });
    await until(() => markerPids(markers).length === 2, 'two handlers to start', 60_000);
    run.child.kill('SIGTERM');
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(0);
    expect(finished({ lines: run.lines })?.outcome).toBe('completed');
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
    expect(readFileSync(path.join(ws.out, 'slow-0.scc.out'), 'utf8')).toContain('done');
  });

  it('a second signal aborts at once', async () => {
    const ws = workspace({ handler: { command: slow }, concurrency: 2, drain: { gracePeriodSeconds: 120, marginSeconds: 10 } }, items(4));
    const markers = path.join(ws.dir, 'markers');
    const run = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '120000' } });
    await until(() => markerPids(markers).length === 2, 'two handlers to start', 60_000);
    run.child.kill('SIGTERM');
    await run.waitFor((l) => l.msg.startsWith('drain: stopped claiming'));
    const t0 = Date.now();
    run.child.kill('SIGTERM');
    const { code } = await run.exited;
    expect(code).toBe(75);
    expect(Date.now() - t0).toBeLessThan(10_000); // far less than the 110 s drain budget
    expect(run.lines.some((l) => String(l.reason ?? '').includes('second SIGTERM'))).toBe(true);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ claimed: 0, pending: 4 });
  });

  it('a second signal with the smallest drain.marginSeconds (1) still kills the handlers and hands their claims back', async () => {
    // The last resort (cli.ts) exits one margin after a second signal: with a margin of 0
    // (refused since) it fired at once, before the handlers' kill (at least 0.2 s) and the
    // hand-back, so the in-flight claims were left to be taken back, and charged, by the next run.
    const hang = [process.execPath, path.join(FIXTURES, 'process/hang-exec.mjs'), '{path}'];
    const ws = workspace({ handler: { command: hang }, concurrency: 2, drain: { gracePeriodSeconds: 120, marginSeconds: 1 } }, items(4));
    const markers = path.join(ws.dir, 'markers');
    const run = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers } });
    await until(() => filesIn(markers).length === 2, 'two handlers to start');
    run.child.kill('SIGTERM');
    await run.waitFor((l) => l.msg.startsWith('drain: stopped claiming'));
    run.child.kill('SIGTERM');
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(75);
    expect(run.stderr()).not.toContain('the drain did not end');
    expect(finished({ lines: run.lines })?.outcome).toBe('drained');
    expect((await statusJson(ws.configPath)).items).toMatchObject({ claimed: 0, pending: 4 });
  });

  it('SIGINT drains like SIGTERM (Ctrl-C at a terminal)', async () => {
    const ws = workspace({ handler: { command: slow }, concurrency: 1, drain: { gracePeriodSeconds: 4, marginSeconds: 1 } }, items(2));
    const markers = path.join(ws.dir, 'markers');
    const run = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '120000' } });
    await until(() => markerPids(markers).length === 1, 'a handler to start');
    run.child.kill('SIGINT');
    expect((await run.exited).code).toBe(75);
  });

  it('a handler that ignores SIGTERM is SIGKILLed within the drain margin, even with a long killAfterSeconds', async () => {
    const hang = [process.execPath, path.join(FIXTURES, 'process/hang-exec.mjs'), '{path}'];
    const ws = workspace(
      { handler: { command: hang, killAfterSeconds: 60 }, concurrency: 1, drain: { gracePeriodSeconds: 5, marginSeconds: 3 } },
      items(1),
    );
    const markers = path.join(ws.dir, 'markers');
    const run = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers } });
    await until(() => filesIn(markers).length === 1, 'the handler to start');
    const pid = Number(filesIn(markers)[0]!.split('.')[0]);
    const t0 = Date.now();
    run.child.kill('SIGTERM');
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(75);
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(alive(pid)).toBe(false);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 1, claimed: 0, done: 0, dead: 0 });
  });
});

describe('a drain whose handlers do not settle in time', () => {
  it('a handler that ignores SIGTERM and leaves a setsid process holding its pipes: exit 75 before the deadline, its claim handed back uncharged', async () => {
    // The slack after the hand-back is about half the margin: the handlers' SIGKILL comes a
    // third of it after the abort, the drain's last resort a sixth of it before the grace
    // period. With a margin of 3 (1 s) and of 5 (2 s), the hand-back of a loaded machine (load
    // 30-40 on 2 cores, the drain itself on time) came after the last resort; 9 leaves 4 s.
    const ws = workspace({ concurrency: 2, drain: { gracePeriodSeconds: 12, marginSeconds: 9 } }, items(4));
    const markers = path.join(ws.dir, 'markers');
    const h = path.join(ws.dir, 'stubborn.sh');
    writeFileSync(h, `#!/bin/sh\ntrap "" TERM\nsetsid sleep 20 &\ntouch "${markers}/$$.started"\nsleep 1000\n`, { mode: 0o755 });
    mkdirSync(markers);
    configure(ws, { handler: { command: [h, '{path}', '{output}'] } });
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 110_000 });
    await until(() => markerPids(markers).length === 2, 'two handlers to start', 60_000);
    const t0 = Date.now();
    run.child.kill('SIGTERM');
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(75);
    expect(Date.now() - t0, run.stderr()).toBeLessThan(12_000);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ claimed: 0, dead: 0 });
    const ledger = await openSqliteLedger(ws.db);
    try {
      for (const id of Object.keys(items(4))) {
        const r = await ledger.get(id);
        expect(r ? r.attempts - r.released : 0, `${id} not charged`).toBe(0);
      }
    } finally {
      await ledger.close();
    }
  }, 90_000);
});
