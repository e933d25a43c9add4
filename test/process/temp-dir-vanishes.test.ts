import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, finished, runCli, spawnCli, statusJson, workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

/**
 * A module handler that plays an empty-directory cleaner once: on item `b.txt` it removes
 * cronsafe's (empty) temp directory before writing its output, as a cron'd `find -empty
 * -delete` would between two attempts.
 */
const CLEANER = `import { rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
export default async function (item, ctx) {
  if (item.id === 'b.txt' && item.attempt === 1) rmdirSync(path.dirname(ctx.outputPath));
  writeFileSync(ctx.outputPath, 'ok ' + item.id);
}
`;

describe("cronsafe's temp directory removed mid-run", () => {
  it('is recreated: the items after it are processed, none is dead-lettered', async () => {
    const files = Object.fromEntries(['a', 'b', 'c', 'd', 'e', 'f'].map((n) => [`${n}.txt`, n]));
    const ws = workspace({ handler: { module: 'cleaner.mjs' }, concurrency: 1 }, files);
    writeFileSync(path.join(ws.dir, 'cleaner.mjs'), CLEANER);
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(path.join(ws.out, '.cronsafe-tmp'))).toBe(true);
    const done = readdirSync(ws.out).filter((f) => f.endsWith('.out'));
    // Before: every item after b.txt failed too (ENOENT: the directory never came back).
    for (const n of ['c', 'd', 'e', 'f']) expect(done).toContain(`${n}.txt.out`);
    const items = (await statusJson(ws.configPath)).items;
    expect(items.dead).toBe(0);
    expect(items.done).toBeGreaterThanOrEqual(5);
    expect(finished(r)?.outcome).toBe('completed');
  });
});

/** A shell handler: copies {path} to {output} after SLEEP seconds (a window for a cleaner). */
function slowCopy(dir: string, sleep: string): string {
  const file = path.join(dir, 'slow-copy.sh');
  writeFileSync(file, `#!/bin/sh\nsleep ${sleep}\ncat "$1" > "$2"\n`, { mode: 0o755 });
  return file;
}

async function chargedAttempts(db: string, ids: string[]): Promise<number[]> {
  const ledger = await openSqliteLedger(db);
  try {
    const out: number[] = [];
    for (const id of ids) {
      const r = await ledger.get(id);
      out.push(r ? r.attempts - r.released : 0);
    }
    return out;
  } finally {
    await ledger.close();
  }
}

describe('an empty-directory cleaner running all the time, and output.directory removed', () => {
  it('the temp directory removed every 50 ms for 3 s: every attempt it broke is handed back, none charged; the pass completes', async () => {
    const files = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`f${i}.txt`, `item ${i}\n`]));
    const ws = workspace({ concurrency: 4 }, files);
    configure(ws, { handler: { command: [slowCopy(ws.dir, '0.2'), '{path}', '{output}'] } });
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    let running = true;
    void run.exited.then(() => (running = false));
    await run.waitFor((l) => l.msg === 'run started', 30_000);
    // A cleaner that runs while the first attempts do (not forever: then nothing could finish).
    for (let i = 0; i < 60 && running; i++) {
      try {
        rmSync(path.join(ws.out, '.cronsafe-tmp'), { recursive: true, force: true });
      } catch (err) {
        // A handler wrote into it while it was being emptied: a cleaner just tries again.
        if ((err as NodeJS.ErrnoException).code !== 'ENOTEMPTY') throw err;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(0);
    expect(run.lines.filter((l) => l.msg === 'item failed; will retry').map((l) => `${String(l.itemId)}: ${String(l.error)}`)).toEqual([]);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 30, dead: 0 });
    // Each item charged once: the attempt that succeeded.
    expect(new Set(await chargedAttempts(ws.db, Object.keys(files)))).toEqual(new Set([1]));
    for (const [id, content] of Object.entries(files)) expect(readFileSync(path.join(ws.out, `${id}.out`), 'utf8')).toBe(content);
  }, 150_000);

  // A `find -empty -delete` on output.directory removes the directory an output is about to
  // be renamed into, between cronsafe's mkdir and its rename (ENOENT): the item was charged.
  // A race, so many items in their own directories: before the fix, ~7 of 1,500 failed.
  it('removing empty directories under output.directory all the time: no output is lost, no item charged for it', async () => {
    const files = Object.fromEntries(Array.from({ length: 1500 }, (_, i) => [`d${i}/f.txt`, `item ${i}\n`]));
    const ws = workspace({ handler: { command: ['/bin/cp', '{path}', '{output}'] } }, files);
    const stop = path.join(ws.dir, 'stop-cleaner');
    const cleaner = spawn('sh', ['-c', `while [ ! -e "$1" ]; do find "$2" -mindepth 1 -type d -empty -not -path '*/.cronsafe-tmp*' -delete 2>/dev/null; done`, 'cleaner', stop, ws.out], { stdio: 'ignore' });
    const cleanerExited = new Promise((resolve) => cleaner.on('exit', resolve));
    try {
      const r = await runCli(['run', '-c', ws.configPath], { timeoutMs: 140_000 });
      expect(r.code, r.stderr).toBe(0);
      expect(r.lines.filter((l) => l.msg === 'item failed; will retry').map((l) => `${String(l.itemId)}: ${String(l.error)}`)).toEqual([]);
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1500, dead: 0 });
    } finally {
      writeFileSync(stop, '');
      await cleanerExited;
    }
  }, 150_000);

  it('output.directory removed mid-run: the pass stops with exit 1 and charges nothing', async () => {
    const files = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`f${i}.txt`, `item ${i}\n`]));
    const ws = workspace({ concurrency: 2 }, files);
    configure(ws, { handler: { command: [slowCopy(ws.dir, '0.2'), '{path}', '{output}'] } });
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    await run.waitFor((l) => l.msg === 'item done', 30_000);
    // The run writes into it meanwhile, so one removal can meet a directory that filled again
    // (ENOTEMPTY on a loaded machine): removed until it is gone.
    await until(() => {
      try {
        rmSync(ws.out, { recursive: true, force: true, maxRetries: 20, retryDelay: 5 });
        return true;
      } catch {
        return false;
      }
    }, 'output.directory to be removed');
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(1);
    expect(run.lines.some((l) => String((l.err as { message?: string } | undefined)?.message).includes('output.directory'))).toBe(true);
    const items = (await statusJson(ws.configPath)).items;
    expect(items).toMatchObject({ claimed: 0, dead: 0 });
    // Only the attempts that succeeded were charged.
    const charged = await chargedAttempts(ws.db, Object.keys(files));
    expect(charged.reduce((a, b) => a + b, 0)).toBe(items.done);
  }, 150_000);
});

describe('two jobs sharing one output.directory', () => {
  it("the second's start-up never deletes the first's attempts: every output whole", async () => {
    const a = workspace({ name: 'alpha', concurrency: 2 }, Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`a${i}.txt`, `alpha ${i}\n`])));
    const b = workspace({ name: 'beta', concurrency: 2, output: { directory: a.out } }, Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`b${i}.txt`, `beta ${i}\n`])));
    // The handler writes its output in two steps, so a deleted temp file shows as a torn or missing output.
    const h = path.join(a.dir, 'two-step.sh');
    writeFileSync(h, '#!/bin/sh\nexec 3>"$2"\necho begin >&3\nsleep 0.4\ncat "$1" >&3\n', { mode: 0o755 });
    configure(a, { handler: { command: [h, '{path}', '{output}'] } });
    configure(b, { handler: { command: [h, '{path}', '{output}'] } });
    const first = spawnCli(['run', '-c', a.configPath], { timeoutMs: 120_000 });
    await first.waitFor((l) => l.msg === 'run started', 30_000);
    const second = await runCli(['run', '-c', b.configPath], { timeoutMs: 120_000 });
    expect(second.code, second.stderr).toBe(0);
    expect((await first.exited).code, first.stderr()).toBe(0);
    expect(finished({ lines: first.lines })?.counts).toMatchObject({ succeeded: 8, noOutput: 0 });
    for (let i = 0; i < 8; i++) {
      expect(readFileSync(path.join(a.out, `a${i}.txt.out`), 'utf8')).toBe(`begin\nalpha ${i}\n`);
      expect(readFileSync(path.join(a.out, `b${i}.txt.out`), 'utf8')).toBe(`begin\nbeta ${i}\n`);
    }
  }, 150_000);
});

describe('two jobs with the same item ids on one output.directory', () => {
  it("an output the other job committed is not taken for the proof that a killed run's attempt finished: the item runs again", async () => {
    const ids = ['f0.txt', 'f1.txt'];
    const a = workspace({ name: 'alpha', concurrency: 2 }, Object.fromEntries(ids.map((id) => [id, `alpha ${id}\n`])));
    const b = workspace({ name: 'beta', concurrency: 2, output: { directory: a.out } }, Object.fromEntries(ids.map((id) => [id, `beta ${id}\n`])));
    const gate = path.join(a.dir, 'gate');
    const started = path.join(a.dir, 'started');
    mkdirSync(started);
    // alpha's attempts wait for the gate (they are in flight when alpha is killed); each says so with its pid.
    const h = path.join(a.dir, 'gated-copy.sh');
    writeFileSync(h, `#!/bin/sh\necho $$ > "${started}/$(basename "$1")"\nwhile [ ! -e "${gate}" ]; do sleep 0.05; done\ncp "$1" "$2"\n`, { mode: 0o755 });
    configure(a, { handler: { command: [h, '{path}', '{output}'] } });
    configure(b, { handler: { command: ['/bin/cp', '{path}', '{output}'] } });
    const first = spawnCli(['run', '-c', a.configPath], { timeoutMs: 120_000 });
    await first.waitFor((l) => l.msg === 'run started', 30_000);
    for (let i = 0; i < 600 && readdirSync(started).length < ids.length; i++) await new Promise((r) => setTimeout(r, 50));
    expect(readdirSync(started).sort()).toEqual(ids);
    first.child.kill('SIGKILL');
    await first.exited;
    // Its handlers outlive it (their own process groups): end them, as the pod's end would.
    for (const f of readdirSync(started)) {
      try {
        process.kill(Number(readFileSync(path.join(started, f), 'utf8')), 'SIGKILL');
      } catch {
        // already gone
      }
    }
    const second = await runCli(['run', '-c', b.configPath]);
    expect(second.code, second.stderr).toBe(0);
    for (const id of ids) expect(readFileSync(path.join(a.out, `${id}.out`), 'utf8')).toBe(`beta ${id}\n`);
    writeFileSync(gate, '');
    const again = await runCli(['run', '-c', a.configPath]);
    expect(again.code, again.stderr).toBe(0);
    const lines = again.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.find((l) => String(l.msg).startsWith('output.directory is shared with other jobs'))?.jobs).toEqual(['beta']);
    // Before: both were recorded done by beta's outputs, and kept beta's content.
    for (const id of ids) expect(readFileSync(path.join(a.out, `${id}.out`), 'utf8')).toBe(`alpha ${id}\n`);
    expect((await statusJson(a.configPath)).items).toMatchObject({ done: 2, dead: 0 });
  }, 150_000);
});
