/**
 * An item's file replaced by a FIFO (or a directory) between the scan and its attempt. The
 * scan never takes such a path as an item, and neither may the attempt: a module handler's
 * readFile of a FIFO blocks in open(2) on one of libuv's threads, which nothing can cancel,
 * so after the timeout gave the attempt up the process could not exit (Node joins those
 * threads at exit): `run finished` was logged and the run hung with the lock held, every
 * later start skipped as "another run holds the lock".
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, FIXTURES, finished, spawnCli, statusJson, workspace } from '../helpers/cli.js';

describe('an item replaced by a FIFO or a directory after the scan', () => {
  it('is forgotten before its handler runs: the handler never opens it and the run exits 0', async () => {
    const files = Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`item-${i}`, `payload ${i}\n`]));
    const ws = workspace({ concurrency: 1 }, files);
    const gate = path.join(ws.dir, 'gate');
    configure(ws, { handler: { module: path.join(FIXTURES, 'process/gated-read-module.mjs'), timeoutSeconds: 2, killAfterSeconds: 1 } });
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 20_000, env: { ...process.env, GATE: gate } });
    // Scanned (six items fit one discovery batch); the first attempt waits for the gate.
    const first = String((await run.waitFor((l) => l.msg === 'handler started', 15_000)).itemId);
    const others = Object.keys(files).filter((id) => id !== first);
    const [dirItem, ...fifoItems] = others;
    rmSync(path.join(ws.source, dirItem!));
    mkdirSync(path.join(ws.source, dirItem!));
    for (const id of fifoItems) {
      rmSync(path.join(ws.source, id));
      expect(spawnSync('mkfifo', [path.join(ws.source, id)]).status).toBe(0);
    }
    writeFileSync(gate, '');
    const { code, signal } = await run.exited;
    expect({ code, signal }, run.stderr()).toEqual({ code: 0, signal: null });
    expect(finished({ lines: run.lines })?.counts).toMatchObject({ succeeded: 1, gone: others.length, failed: 0, deadLettered: 0 });
    const started = run.lines.filter((l) => l.msg === 'handler started').map((l) => l.itemId);
    expect(started, 'handlers run').toEqual([first]);
    expect(readFileSync(path.join(ws.out, `${first}.out`), 'utf8')).toBe(files[first]);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
  }, 40_000);
});
