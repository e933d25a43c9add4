/**
 * The build's V8 code cache (src/code-cache.ts, scripts/bundle.mjs): V8 takes the cache
 * made for each way of starting (the bin's shebang flags, and plain `node dist/cli.js`
 * with the flags cli.ts sets), and the bin still works, through the ES module chunks,
 * where there is no cache (a build made by another Node, a copy without the caches).
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ROOT, workspace } from '../helpers/cli.js';

const CHUNKS = path.join(ROOT, 'dist', 'chunks');
/** The bin's node flags, from src/cli.ts's shebang. */
const BIN_FLAGS = /^#!\/usr\/bin\/env -S node(.*)$/.exec(readFileSync(path.join(ROOT, 'src', 'cli.ts'), 'utf8').split('\n', 1)[0]!)![1]!.trim().split(/\s+/);

/** Whether V8 rejects the `start` cache, in a node started with `flags`, after cli.ts's own flag setting. */
function rejected(start: 'bin' | 'plain', flags: string[]): string {
  const script = `
    if (!process.execArgv.includes('--heap-growing-percent=10')) {
      const { setFlagsFromString } = await import('node:v8');
      setFlagsFromString('--optimize-for-size');
      setFlagsFromString('--semi-space-growth-factor=1');
    }
    const { readFileSync } = await import('node:fs');
    const { codeCacheFiles, runScript } = await import(${JSON.stringify(pathToFileURL(path.join(ROOT, 'dist', 'code-cache.js')).href)});
    const files = codeCacheFiles(${JSON.stringify(CHUNKS)}, ${JSON.stringify(start)});
    process.stdout.write(String(runScript(files.script, readFileSync(files.cache)).script.cachedDataRejected));`;
  const r = spawnSync(process.execPath, [...flags, '--input-type=module', '-e', script], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout;
}

/** dist/, package.json and a link to node_modules in a temporary directory. */
function copyOfDist(): string {
  const copy = mkdtempSync(path.join(tmpdir(), 'cronsafe-nocache-'));
  cpSync(path.join(ROOT, 'dist'), path.join(copy, 'dist'), { recursive: true });
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(copy, 'node_modules'));
  cpSync(path.join(ROOT, 'package.json'), path.join(copy, 'package.json'));
  return copy;
}

describe('the code cache', () => {
  it('is taken by V8 both with the shebang flags and for plain node', () => {
    expect(rejected('bin', BIN_FLAGS)).toBe('false');
    expect(rejected('plain', [])).toBe('false');
  });

  it('reads a script that is ASCII only (src/code-cache.ts reads it as latin1)', () => {
    const text = readFileSync(path.join(CHUNKS, 'cronsafe.cjs'));
    expect(text.length).toBeGreaterThan(100_000);
    expect(text.findIndex((b) => b > 0x7f)).toBe(-1);
  });

  it('a damaged cache (cut short) is rejected by V8 and an unreadable one (a directory) passed over', () => {
    const copy = copyOfDist();
    try {
      const ws = workspace({ handler: { command: ['true'] }, schedule: { cron: '*/5 * * * *', timeZone: 'Europe/London' } });
      const cache = (start: string) => path.join(copy, 'dist', 'chunks', readdirSync(path.join(copy, 'dist', 'chunks')).find((f) => f.endsWith(`-${start}.cache`))!);
      writeFileSync(cache('bin'), readFileSync(cache('bin')).subarray(0, 50_000));
      const plain = cache('plain');
      rmSync(plain);
      mkdirSync(plain);
      for (const flags of [BIN_FLAGS, []]) {
        const r = spawnSync(process.execPath, [...flags, path.join(copy, 'dist', 'cli.js'), 'schedule', '--json', '-c', ws.configPath], { encoding: 'utf8' });
        expect(r.status, r.stderr).toBe(0);
        expect(r.stderr).toBe('');
        expect(JSON.parse(r.stdout)).toMatchObject({ cron: '*/5 * * * *', timeZone: 'Europe/London' });
      }
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it('the CLI works from a copy of dist/ without caches (the ES module chunks)', () => {
    const copy = copyOfDist();
    try {
      for (const f of readdirSync(path.join(copy, 'dist', 'chunks'))) if (f.endsWith('.cache')) rmSync(path.join(copy, 'dist', 'chunks', f));
      // Without the script too: neither is read, the chunks are.
      rmSync(path.join(copy, 'dist', 'chunks', 'cronsafe.cjs'));
      const ws = workspace({ handler: { command: ['true'] }, schedule: { cron: '*/5 * * * *', timeZone: 'Europe/London' } });
      const cli = path.join(copy, 'dist', 'cli.js');
      for (const flags of [BIN_FLAGS, []]) {
        const validate = spawnSync(process.execPath, [...flags, cli, 'validate', '-c', ws.configPath], { encoding: 'utf8' });
        expect(validate.status, validate.stderr).toBe(0);
        expect(validate.stdout).toContain(': OK');
        const schedule = spawnSync(process.execPath, [...flags, cli, 'schedule', '--json', '-c', ws.configPath], { encoding: 'utf8' });
        expect(schedule.status, schedule.stderr).toBe(0);
        expect(JSON.parse(schedule.stdout)).toMatchObject({ cron: '*/5 * * * *', timeZone: 'Europe/London' });
      }
      expect(existsSync(path.join(copy, 'dist', 'chunks', 'cronsafe.cjs'))).toBe(false);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });
});
