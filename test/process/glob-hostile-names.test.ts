import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, FIXTURES, finished, runCli, spawnCli, statusJson, workspace } from '../helpers/cli.js';
import { filesIn, until } from '../helpers/wait.js';

const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];
const slow = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];

// picomatch turns each `*` of a glob into a lazy `[^/]*?`, and its regular expression tried
// every way of placing them: against a name of 250 underscores `*_*_*_*_*.scc` ran for
// minutes, synchronously, so the run neither ended nor drained on SIGTERM (Node never ran its
// signal handler; the kubelet's SIGKILL ended it). Anyone who can name a file in the source
// could stop the job. Matching is now linear in the name's length.
const HOSTILE = '_'.repeat(250);
const INCLUDE = ['*_*_*_*_*.scc'];

describe('a file name built against the include glob (250 underscores for *_*_*_*_*.scc)', () => {
  it('the run ends, with the items that match done and the hostile name left out', async () => {
    const ws = workspace({ handler: { command: COPY } }, { [HOSTILE]: 'x', [`${HOSTILE}.sc`]: 'x', 'a_b_c_d_e.scc': 'item' });
    configure(ws, { source: { directory: ws.source, include: INCLUDE } });
    const r = await runCli(['run', '-c', ws.configPath], { timeoutMs: 30_000 });
    expect(r.signal, r.stderr).toBeNull();
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)?.counts).toMatchObject({ scanned: 1, succeeded: 1 });
  });

  it('SIGTERM drains the run (exit 75), the item in flight handed back', async () => {
    const ws = workspace({ handler: { command: slow }, concurrency: 1, drain: { gracePeriodSeconds: 4, marginSeconds: 1 } }, { [HOSTILE]: 'x', 's_1_2_3_4.scc': 'one', 's_5_6_7_8.scc': 'two' });
    configure(ws, { source: { directory: ws.source, include: INCLUDE } });
    const markers = path.join(ws.dir, 'markers');
    const run = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '120000' }, timeoutMs: 40_000 });
    try {
      await until(() => filesIn(markers).length === 1, 'a handler to start');
      run.child.kill('SIGTERM');
      const { code, signal } = await run.exited;
      expect(signal, run.stderr()).toBeNull();
      expect(code, run.stderr()).toBe(75);
      expect(finished({ lines: run.lines })?.outcome).toBe('drained');
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 2, claimed: 0, done: 0, dead: 0 });
    } finally {
      run.child.kill('SIGKILL');
    }
  });

  it('requeue --glob with 17 stars ends, selecting only what matches', async () => {
    const match = `${'x_'.repeat(16)}y.scc`;
    const ws = workspace({ handler: { command: COPY } }, { [HOSTILE]: 'x', [match]: 'item' });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    const dry = await runCli(['requeue', '-c', ws.configPath, '--glob', `${'*_'.repeat(16)}*.scc`, '--dry-run', '--json'], { timeoutMs: 30_000 });
    expect(dry.signal, dry.stderr).toBeNull();
    expect(dry.code, dry.stderr).toBe(0);
    expect((JSON.parse(dry.stdout) as { first: string[] }).first).toEqual([match]);
  });

  // Two narrower cases were left by the first fix, each a hang against a name anyone can make:
  // a bracket expression between stars (picomatch's `(?:\[_\]|[_])` also matches its own text)
  // against a name with a `[`, 27 s for four of them and 250 underscores, each more about 25
  // times longer; several `**` against a deep path, 26 s for three and 2,000 levels.
  it('a bracket expression between stars, against a name with a "[": the run ends', async () => {
    const hostile = `[${HOSTILE}`;
    const ws = workspace({ handler: { command: COPY } }, { [hostile]: 'x', 'a_b_c_d_e_f.x': 'item' });
    configure(ws, { source: { directory: ws.source, include: ['*[_]*[_]*[_]*[_]*[_]*.x'] } });
    const r = await runCli(['run', '-c', ws.configPath], { timeoutMs: 30_000 });
    expect(r.signal, r.stderr).toBeNull();
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)?.counts).toMatchObject({ scanned: 1, succeeded: 1 });
  });

  it('several ** against a path 1,000 directories deep: the run ends', async () => {
    const ws = workspace({ handler: { command: COPY } }, { [`${'a/'.repeat(1000)}c`]: 'x', 'a/a/a/b': 'item' });
    configure(ws, { source: { directory: ws.source, include: ['**/a/**/a/**/a/**/b'] } });
    const r = await runCli(['run', '-c', ws.configPath], { timeoutMs: 30_000 });
    expect(r.signal, r.stderr).toBeNull();
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)?.counts).toMatchObject({ scanned: 1, succeeded: 1 });
  });

  // A repeating extglob whose pattern repeats too (`*(*)`) tried every way of cutting the name
  // into repetitions: 2.5 s for 25 characters, doubling with about each one more. It is refused.
  it('a repeating extglob that can match a name in more than one way is refused (78), naming the key and the glob', async () => {
    const ws = workspace({ handler: { command: COPY } }, { [`${'a'.repeat(60)}.csv`.slice(0, 40)]: 'x', 'a.csv': 'item' });
    configure(ws, { source: { directory: ws.source, include: ['*(*).csv'] } });
    const r = await runCli(['run', '-c', ws.configPath], { timeoutMs: 30_000 });
    expect(r.signal, r.stderr).toBeNull();
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toMatch(/source\.include\[0\]: expected no repeating extglob .*"\*\(\*\)\.csv"/);
    const requeue = await runCli(['requeue', '-c', ws.configPath, '--glob', '+(a|[a-z])', '--dry-run'], { timeoutMs: 30_000 });
    expect(requeue.code, requeue.stderr).toBe(2);
    expect(requeue.stderr).toMatch(/no repeating extglob.*\+\(a\|\[a-z\]\)/);
  });
});
