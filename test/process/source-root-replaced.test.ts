/**
 * source.directory named by its real path (no link on its way), moved away mid-run and a
 * directory with files of the same names made in its place (`mv queue queue.old && mkdir
 * queue`, a volume lazily unmounted and another mounted there). Only a root whose path went
 * through a link was checked around each attempt, on the grounds that a real path cannot be
 * repointed; it can be renamed and replaced. The attempt running across the swap read the new
 * directory's file and its output was committed as the old item's, the next attempts ran the
 * new directory's files under the old scan's ids, and the run exited 0: the old items were
 * recorded done without ever being run (docs/operations.md says the root is checked before
 * and after every attempt, the attempt across the swap not committed).
 */
import { existsSync, mkdirSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, configure, FIXTURES, spawnCli, spawnCliRaw, statusJson, workspace } from '../helpers/cli.js';
import { charged } from '../helpers/ledger-sums.js';
import { until } from '../helpers/wait.js';

describe('source.directory, a real directory, moved away and replaced mid-run', () => {
  it('by one with files of the same names: exit 1, nothing of the other directory committed or charged', async () => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 10; i++) files[`item-${String(i).padStart(3, '0')}.txt`] = `payload ${i}\n`;
    const ws = workspace({ concurrency: 1 }, files);
    // The first attempt waits at a gate before it reads its input, so the root is replaced
    // while it runs.
    const script = path.join(ws.dir, 'gated-copy.sh');
    writeFileSync(script, `#!/bin/sh\nif [ ! -e '${ws.dir}/go' ]; then touch '${ws.dir}/started'; while [ ! -e '${ws.dir}/go' ]; do sleep 0.01; done; fi\ncat "$1" > "$2"\n`, { mode: 0o755 });
    configure(ws, { handler: { command: [script, '{path}', '{output}'] } });
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    await until(() => existsSync(path.join(ws.dir, 'started')), 'the first attempt to start', 30_000);
    renameSync(ws.source, `${ws.source}.old`);
    mkdirSync(ws.source);
    for (const id of Object.keys(files)) writeFileSync(path.join(ws.source, id), 'from the new directory\n');
    writeFileSync(path.join(ws.dir, 'go'), '');
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(1);
    expect(run.stderr()).toContain(`cronsafe: run failed: source.directory ${ws.source} is gone or is no longer the same directory`);
    const outputs = existsSync(ws.out) ? readdirSync(ws.out).filter((n) => n.endsWith('.out')) : [];
    expect(outputs).toEqual([]);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 10, claimed: 0, done: 0, dead: 0 });
    expect(await charged(ws.db, Object.keys(files))).toBe(0);
  }, 120_000);
});

describe('source.directory moved away after the start checked it, before the scan opened it', () => {
  it('exit 1 naming source.directory as gone, not a bare ENOENT of opendir; nothing charged', async () => {
    const ws = workspace({ concurrency: 1, handler: { command: ['cp', '{path}', '{output}'] } }, { 'a.txt': 'payload\n' });
    const gate = path.join(ws.dir, 'gate');
    mkdirSync(gate);
    // Holds the scan's opendir of source.directory until gate/open exists.
    const run = spawnCliRaw(process.execPath, ['--import', path.join(FIXTURES, 'process/gate-opendir-register.mjs'), CLI, 'run', '-c', ws.configPath], {
      env: { GATE_DIR: gate, GATE_MATCH: ws.source },
      timeoutMs: 60_000,
    });
    await until(() => existsSync(path.join(gate, 'waiting')), 'the scan to open source.directory', 30_000);
    renameSync(ws.source, `${ws.source}.away`);
    writeFileSync(path.join(gate, 'open'), '');
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(1);
    expect(run.stderr()).toContain(`cronsafe: run failed: source.directory ${ws.source} is gone or is no longer the same directory`);
    renameSync(`${ws.source}.away`, ws.source);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 0, dead: 0 });
  }, 120_000);
});
