/**
 * Issue 9: a killed pod costs only the attempts it started. Real CLI processes, SIGKILLed
 * as a whole tree (eviction, node loss) at random moments, with the retry settings a user
 * would pick (maxAttempts 3), never a huge maxAttempts that would hide wrong charges.
 * Every handler invocation is logged by the handler itself, and the ledger's charges are
 * checked against that log.
 */
import { chmodSync, existsSync, linkSync, mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import type { ItemRecord } from '../../src/ledger/types.js';
import { configure, FIXTURES, finished, runCli, spawnCli, workspace, type Workspace } from '../helpers/cli.js';
import { invocations, killTree } from '../helpers/proc.js';
import { until } from '../helpers/wait.js';

const MAX_ATTEMPTS = 3;
const LOGGED_COPY = path.join(FIXTURES, 'process/logged-copy.sh');
const SLOW_IMPORT = path.join(FIXTURES, 'process/slow-import-module.mjs');

const randomInt = (lo: number, hi: number) => lo + Math.floor(Math.random() * (hi - lo + 1));

function backlog(n: number, prefix = 'item'): Record<string, string> {
  const files: Record<string, string> = {};
  for (let i = 0; i < n; i++) files[`${prefix}-${String(i).padStart(4, '0')}`] = `payload ${i} ${'x'.repeat(i % 97)}\n`;
  return files;
}

async function records(ws: Workspace, ids: string[]): Promise<Map<string, ItemRecord>> {
  const ledger = await openSqliteLedger(ws.db);
  try {
    const out = new Map<string, ItemRecord>();
    for (const id of ids) {
      const rec = await ledger.get(id);
      if (rec) out.set(id, rec);
    }
    return out;
  } finally {
    await ledger.close();
  }
}

async function claimedNow(ws: Workspace): Promise<number> {
  const ledger = await openSqliteLedger(ws.db);
  try {
    return (await ledger.counts()).claimed;
  } finally {
    await ledger.close();
  }
}

/** Outputs of done items are whole copies of their input; nothing else is in out/. */
function expectOutputs(ws: Workspace, files: Record<string, string>, done: string[]): void {
  for (const id of done) expect(readFileSync(path.join(ws.out, `${id}.out`), 'utf8'), `output of ${id}`).toBe(files[id]);
  const present = readdirSync(ws.out, { withFileTypes: true }).filter((d) => d.isFile()).map((d) => d.name);
  expect(present.sort()).toEqual(done.map((id) => `${id}.out`).sort());
}

describe('SIGKILL of the whole process tree (SQLite, maxAttempts 3)', () => {
  it('charges only started attempts: 800 items, 15 kills at random points, then one clean run finishes the queue', async () => {
    const CONCURRENCY = 4;
    const files = backlog(800);
    const ids = Object.keys(files);
    const ws = workspace({ concurrency: CONCURRENCY, retry: { maxAttempts: MAX_ATTEMPTS } }, files);
    const log = path.join(ws.dir, 'invocations.log');
    configure(ws, { handler: { command: ['/bin/sh', LOGGED_COPY, '{path}', '{output}'], env: { INVOCATIONS: log, DELAY: '0.05' } } });
    let kills = 0;
    for (let round = 0; round < 15; round++) {
      const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
      const mode = round % 3;
      if (mode === 0) {
        // During start-up: a random moment before (or just after) the first claim.
        await new Promise((r) => setTimeout(r, randomInt(0, 400)));
      } else if (mode === 1) {
        await run.waitFor((l) => l.msg === 'run started', 60_000).catch(() => undefined);
      } else {
        // Mid-pass, the channel full of candidates: after the Nth finished item.
        const n = randomInt(1, 40);
        let seen = 0;
        await run.waitFor((l) => l.msg === 'item done' && ++seen >= n, 60_000).catch(() => undefined);
      }
      killTree(run.child.pid!);
      const { signal } = await run.exited;
      if (signal === 'SIGKILL') kills++;
      // Only the attempts that were running can be claimed: never the channel's contents.
      expect(await claimedNow(ws), `claims left after kill ${round + 1}`).toBeLessThanOrEqual(CONCURRENCY);
    }
    expect(kills, 'most rounds must really be killed mid-run').toBeGreaterThanOrEqual(12);

    const clean = await runCli(['run', '-c', ws.configPath], { timeoutMs: 180_000 });
    expect(clean.code, clean.stderr).toBe(0);
    expect(finished(clean)?.outcome).toBe('completed');

    const recs = await records(ws, ids);
    const started = invocations(log);
    const done = ids.filter((id) => recs.get(id)?.state === 'done');
    const dead = ids.filter((id) => recs.get(id)?.state === 'dead');
    expect(done.length + dead.length, 'every item is done or dead').toBe(ids.length);
    expectOutputs(ws, files, done);

    // A claim is a start, so charges match the handler's own log. The only allowance: a
    // kill between the claim's commit and the handler's first line (the spawn), at most
    // one per running slot per kill.
    let overcharged = 0;
    for (const id of ids) {
      const rec = recs.get(id)!;
      const charged = rec.attempts - rec.released;
      const ran = started.get(id) ?? 0;
      expect(charged, `charged attempts of ${id} (started ${ran} times)`).toBeLessThanOrEqual(ran + 1);
      if (charged > ran) overcharged++;
    }
    expect(overcharged).toBeLessThanOrEqual(CONCURRENCY * kills);
    // Dead only by being in flight at maxAttempts kills: each kill charges <= CONCURRENCY.
    expect(dead.length).toBeLessThanOrEqual(Math.floor((CONCURRENCY * kills) / MAX_ATTEMPTS));
    for (const id of dead) {
      expect(recs.get(id)!.attempts - recs.get(id)!.released, `charges of dead ${id}`).toBe(MAX_ATTEMPTS);
      expect(started.get(id) ?? 0, `starts of dead ${id}`).toBeGreaterThanOrEqual(MAX_ATTEMPTS - 1);
    }
  }, 400_000);

  it('kills while one slow item runs charge only that item: the queue behind it stays uncharged, and the item that dies every time ends dead', async () => {
    const files = { ...backlog(8, 'queued'), 'slow-item': 'slow\n' };
    const ws = workspace({ concurrency: 1, retry: { maxAttempts: MAX_ATTEMPTS } }, files);
    const log = path.join(ws.dir, 'invocations.log');
    // SLOW_ID sleeps 60 s after logging its start: it is what every kill lands on.
    configure(ws, { handler: { command: ['/bin/sh', LOGGED_COPY, '{path}', '{output}'], env: { INVOCATIONS: log, DELAY: '0.05', SLOW_ID: 'slow-item' } } });
    for (let k = 1; k <= MAX_ATTEMPTS; k++) {
      const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
      await until(() => (invocations(log).get('slow-item') ?? 0) >= k, `slow-item started (${k})`, 60_000);
      killTree(run.child.pid!);
      await run.exited;
      const recs = await records(ws, Object.keys(files));
      const started = invocations(log);
      expect(recs.get('slow-item')).toMatchObject({ attempts: k });
      for (const id of Object.keys(files).filter((i) => i !== 'slow-item')) {
        const rec = recs.get(id);
        // Items before it in scan order may have finished; the ones behind it never started.
        expect(rec?.attempts ?? 0, `${id}: charged only if started`).toBe(started.get(id) ?? 0);
      }
    }
    // Its last run died with it: the next start finds it charged maxAttempts times and dead-letters it.
    expect((await records(ws, ['slow-item'])).get('slow-item')).toMatchObject({ state: 'claimed', attempts: MAX_ATTEMPTS });
    const clean = await runCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    expect(clean.code, clean.stderr).toBe(0);
    const recs = await records(ws, Object.keys(files));
    for (const id of Object.keys(files).filter((i) => i !== 'slow-item')) expect(recs.get(id), id).toMatchObject({ state: 'done', attempts: 1 });
    expect(recs.get('slow-item')).toMatchObject({ state: 'dead', attempts: MAX_ATTEMPTS });
    expect(invocations(log).get('slow-item')).toBe(MAX_ATTEMPTS);
  }, 300_000);

  it('an attempt killed after its output was committed (before the ledger heard) is done on the next start, even at its last attempt; an older output is not taken for it', async () => {
    const files = { ...backlog(3, 'queued'), 'slow-item': 'the real payload\n' };
    const ws = workspace({ concurrency: 1, retry: { maxAttempts: MAX_ATTEMPTS } }, files);
    const log = path.join(ws.dir, 'invocations.log');
    configure(ws, { handler: { command: ['/bin/sh', LOGGED_COPY, '{path}', '{output}'], env: { INVOCATIONS: log, DELAY: '0.05', SLOW_ID: 'slow-item' } } });
    // An output from before any claim (an earlier version, another tool): never proof.
    const final = path.join(ws.out, 'slow-item.out');
    mkdirSync(ws.out, { recursive: true });
    writeFileSync(final, 'stale\n');
    for (let k = 1; k <= MAX_ATTEMPTS; k++) {
      const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
      await until(() => (invocations(log).get('slow-item') ?? 0) >= k, `slow-item started (${k})`, 60_000);
      killTree(run.child.pid!);
      await run.exited;
      // Someone touches the old output after the claim (a backup's hard link, a chmod):
      // it is still not this attempt's.
      chmodSync(final, 0o600 + k);
      linkSync(final, path.join(ws.dir, `backup-${k}`));
      // The stale output did not make the killed attempts count as done.
      expect((await records(ws, ['slow-item'])).get('slow-item')).toMatchObject({ state: 'claimed', attempts: k });
    }
    // The last attempt got as far as the runner's commit (a whole file renamed into place),
    // and the kill came before its ledger write.
    writeFileSync(`${final}.partial`, files['slow-item']);
    renameSync(`${final}.partial`, final);
    const clean = await runCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    expect(clean.code, clean.stderr).toBe(0);
    expect(clean.stdout + clean.stderr).toMatch(/"doneByOutput":1/);
    const recs = await records(ws, Object.keys(files));
    expect(recs.get('slow-item')).toMatchObject({ state: 'done', attempts: MAX_ATTEMPTS });
    expect(invocations(log).get('slow-item'), 'not run again').toBe(MAX_ATTEMPTS);
    expect(readFileSync(final, 'utf8')).toBe(files['slow-item']);
    for (const id of Object.keys(files).filter((i) => i !== 'slow-item')) expect(recs.get(id), id).toMatchObject({ state: 'done', attempts: 1 });
  }, 300_000);

  it('kills during start-up (before or after the lock, no handler running) charge nothing: no item is ever dead', async () => {
    const files = backlog(60);
    const ws = workspace({ handler: { module: SLOW_IMPORT }, concurrency: 4, retry: { maxAttempts: MAX_ATTEMPTS } }, files);
    const log = path.join(ws.dir, 'invocations.log');
    const marker = path.join(ws.dir, 'importing');
    const env = { INVOCATIONS: log, IMPORTING_MARKER: marker, IMPORT_DELAY_MS: '1500' };
    for (let round = 0; round < 10; round++) {
      const run = spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 60_000 });
      // Readiness: the handler module is being imported (start-up, lock held).
      await until(() => existsSync(marker) && readFileSync(marker, 'utf8') === String(run.child.pid), 'the module import', 60_000);
      await new Promise((r) => setTimeout(r, randomInt(0, 1000)));
      killTree(run.child.pid!);
      await run.exited;
    }
    expect(invocations(log).size, 'no handler ran during the start-up kills').toBe(0);
    const clean = await runCli(['run', '-c', ws.configPath], { env: { ...env, IMPORT_DELAY_MS: '0' }, timeoutMs: 120_000 });
    expect(clean.code, clean.stderr).toBe(0);
    const recs = await records(ws, Object.keys(files));
    for (const id of Object.keys(files)) expect(recs.get(id), id).toMatchObject({ state: 'done', attempts: 1, released: 0 });
  }, 300_000);
});

describe('a pod killed again and again soon after it starts (an eviction loop), with the defaults users get', () => {
  it('does not charge the same items each time: every charged item resumes after the fresh ones, so no item is dead-lettered for 10 kills', async () => {
    const files = backlog(8);
    const ws = workspace({ concurrency: 2 }, files); // retry.maxAttempts: the default (5)
    const log = path.join(ws.dir, 'invocations.log');
    configure(ws, { handler: { command: ['/bin/sh', LOGGED_COPY, '{path}', '{output}'], env: { INVOCATIONS: log, DELAY: '5' } } });
    const KILLS = 10;
    for (let k = 1; k <= KILLS; k++) {
      const before = [...invocations(log).values()].reduce((a, b) => a + b, 0);
      const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
      // Killed as soon as its first attempt has begun.
      await until(() => [...invocations(log).values()].reduce((a, b) => a + b, 0) > before, `an attempt started (round ${k})`, 60_000);
      killTree(run.child.pid!);
      await run.exited;
    }
    const recs = await records(ws, Object.keys(files));
    // Before: the item the scan finds first was started first by every run and charged each
    // time, dead at the fifth kill although the kills were not its doing. Then, with only
    // the last dead run's items held back, two groups took the charges in turn: dead at the
    // ninth. Every charged item behind the fresh ones spreads them over the whole backlog.
    for (const [id, rec] of recs) expect(rec.attempts - rec.released, `charges of ${id}`).toBeLessThan(5);
    configure(ws, { handler: { command: ['/bin/sh', LOGGED_COPY, '{path}', '{output}'], env: { INVOCATIONS: log, DELAY: '0.01' } } });
    const clean = await runCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    expect(clean.code, clean.stderr).toBe(0);
    const after = await records(ws, Object.keys(files));
    for (const id of Object.keys(files)) expect(after.get(id), id).toMatchObject({ state: 'done' });
    expectOutputs(ws, files, Object.keys(files));
  }, 300_000);
});
