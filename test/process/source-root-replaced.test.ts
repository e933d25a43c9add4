/**
 * source.directory moved away after the run's start checked it and before its scan opened it
 * (an operator's `mv queue queue.old` at that instant): the run ended with the scan's bare
 * `ENOENT: no such file or directory, opendir '<dir>'`, naming no key (or `ENOTDIR: not a
 * directory` for a directory merely gone between the open and its check), and a link to
 * itself put in its place with the raw `ELOOP: too many symbolic links encountered, opendir`.
 * The replaced root
 * of a running pass: environment-faults.test.ts.
 */
import { existsSync, mkdirSync, renameSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, FIXTURES, spawnCliRaw, statusJson, workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

/** A run whose scan's opendir of source.directory is held (once it is, gate/waiting exists) until gate/open exists. */
async function heldAtScan(): Promise<{ ws: ReturnType<typeof workspace>; gate: string; run: ReturnType<typeof spawnCliRaw> }> {
  const ws = workspace({ concurrency: 1, handler: { command: ['cp', '{path}', '{output}'] } }, { 'a.txt': 'payload\n' });
  const gate = path.join(ws.dir, 'gate');
  mkdirSync(gate);
  const run = spawnCliRaw(process.execPath, ['--import', path.join(FIXTURES, 'process/gate-opendir-register.mjs'), CLI, 'run', '-c', ws.configPath], {
    env: { GATE_DIR: gate, GATE_MATCH: ws.source },
    timeoutMs: 60_000,
  });
  await until(() => existsSync(path.join(gate, 'waiting')), 'the scan to open source.directory', 30_000);
  return { ws, gate, run };
}

describe('source.directory moved away after the start checked it, before the scan opened it', () => {
  it('exit 1 naming source.directory as gone, not a bare ENOENT of opendir; nothing charged', async () => {
    const { ws, gate, run } = await heldAtScan();
    renameSync(ws.source, `${ws.source}.away`);
    writeFileSync(path.join(gate, 'open'), '');
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(1);
    expect(run.stderr()).toContain(`cronsafe: run failed: source.directory ${ws.source} is gone or is no longer the same directory`);
    renameSync(`${ws.source}.away`, ws.source);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 0, dead: 0 });
  }, 120_000);

  it('replaced by a link to itself: exit 1 naming source.directory and its path, not a bare ELOOP of opendir', async () => {
    const { ws, gate, run } = await heldAtScan();
    renameSync(ws.source, `${ws.source}.away`);
    symlinkSync(ws.source, ws.source);
    writeFileSync(path.join(gate, 'open'), '');
    const { code } = await run.exited;
    const lines = run.stderr().trim().split('\n');
    expect(code, run.stderr()).toBe(1);
    expect(lines.at(-1)).toBe(`cronsafe: run failed: source.directory ${ws.source} is gone or is no longer the same directory (moved, unmounted or replaced); stopping, nothing charged`);
    expect(run.stderr()).not.toContain('ELOOP');
    unlinkSync(ws.source);
    renameSync(`${ws.source}.away`, ws.source);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 0, dead: 0 });
  }, 120_000);
});
