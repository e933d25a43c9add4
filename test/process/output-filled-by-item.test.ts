/**
 * An item whose own output is larger than the output file system's free space (a
 * decompression bomb, or one big file on a small volume): its attempt fills the file system,
 * fails (ENOSPC), and its clean-up frees the space again. Judged "the output file system is
 * full", it was handed back uncharged and the pass stopped, at every run, for ever: never
 * charged, never dead-lettered, every run exiting 1 at it while `df` showed the volume
 * nearly empty. Now, like the other stops an item itself may cause, it is charged once it
 * has been handed back retry.maxAttempts times for that; a file system that stays full
 * after the attempt's clean-up (someone else's files) is still never charged.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, runCli, statusJson, workspace } from '../helpers/cli.js';
import { fill } from '../helpers/fill.js';
import { charged } from '../helpers/ledger-sums.js';

function mountTmpfs(dir: string, size: string): boolean {
  if (process.getuid?.() !== 0) return false;
  mkdirSync(dir, { recursive: true });
  return spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir]).status === 0;
}

const SMALL = ['b.txt', 'c.txt', 'd.txt'];

describe('an item whose output alone fills the output file system', () => {
  it('is charged after retry.maxAttempts uncharged hand-backs and dead-lettered; the other items are done, never charged more than once', async (ctx) => {
    const files = Object.fromEntries([['a-bomb.txt', 'bomb\n'], ...SMALL.map((f) => [f, `${f}\n`])]);
    const ws = workspace({ concurrency: 1, retry: { maxAttempts: 2, backoffSeconds: 0 } }, files);
    if (!mountTmpfs(ws.out, '1m')) ctx.skip();
    try {
      const h = path.join(ws.dir, 'h.sh');
      writeFileSync(h, '#!/bin/sh\ncase "$1" in *bomb*) head -c 3000000 /dev/zero > "$2" || exit 1 ;; *) cat "$1" > "$2" ;; esac\n', { mode: 0o755 });
      configure(ws, { handler: { command: [h, '{path}', '{output}'] } });
      const codes: (number | null)[] = [];
      for (let i = 0; i < 6; i++) {
        const r = await runCli(['run', '-c', ws.configPath]);
        codes.push(r.code);
        if (r.code === 0) break;
      }
      // Before: exit 1 at every run, a-bomb.txt pending for ever (never charged).
      expect(codes[codes.length - 1], `exit codes ${codes.join(',')}`).toBe(0);
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 3, dead: 1 });
      expect(await charged(ws.db, SMALL)).toBe(3);
    } finally {
      spawnSync('umount', ['-l', ws.out]);
    }
  }, 120_000);

  it('a file system that stays full after the clean-up (filled by someone else): never charged, however many runs', async (ctx) => {
    const ws = workspace({ concurrency: 1, retry: { maxAttempts: 2, backoffSeconds: 0 } }, Object.fromEntries(SMALL.map((f) => [f, `${f}\n`])));
    if (!mountTmpfs(ws.out, '1m')) ctx.skip();
    try {
      const h = path.join(ws.dir, 'h.sh');
      writeFileSync(h, '#!/bin/sh\nhead -c 200000 /dev/zero > "$2" || exit 1\n', { mode: 0o755 });
      configure(ws, { handler: { command: [h, '{path}', '{output}'] } });
      fill(path.join(ws.out, 'someone-elses.bin'));
      for (let i = 0; i < 4; i++) {
        const r = await runCli(['run', '-c', ws.configPath]);
        expect(r.code, r.stderr).toBe(1);
      }
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 3, claimed: 0, done: 0, dead: 0 });
      expect(await charged(ws.db, SMALL)).toBe(0);
    } finally {
      spawnSync('umount', ['-l', ws.out]);
    }
  }, 120_000);
});
