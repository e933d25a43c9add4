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
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
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
  it('a good item whose attempt another process filled the volume beside (a file of someone else\'s, gone after the run): never charged, however many runs', async (ctx) => {
    const ws = workspace({ concurrency: 1, retry: { maxAttempts: 2, backoffSeconds: 0 } }, { 'good.txt': 'good\n' });
    if (!mountTmpfs(ws.out, '4m')) ctx.skip();
    try {
      const ready = path.join(ws.dir, 'ready');
      const filled = path.join(ws.dir, 'filled');
      const h = path.join(ws.dir, 'h.sh');
      // 1.1 MB of output on a 4 MB volume: it fits, alone, with room to spare.
      writeFileSync(h, `#!/bin/sh\nhead -c 1000000 /dev/zero > "$2" || exit 1\ntouch '${ready}'\nwhile [ ! -e '${filled}' ]; do sleep 0.02; done\nhead -c 100000 /dev/zero >> "$2" || exit 1\n`, { mode: 0o755 });
      configure(ws, { handler: { command: [h, '{path}', '{output}'] } });
      const other = path.join(ws.out, 'someone-elses.bin');
      for (let i = 0; i < 5; i++) {
        rmSync(ready, { force: true });
        rmSync(filled, { force: true });
        let ended = false;
        const run = runCli(['run', '-c', ws.configPath]).finally(() => (ended = true));
        // Someone else's writer fills the volume while the item's attempt is under way.
        while (!existsSync(ready) && !ended) await delay(20);
        if (existsSync(ready)) fill(other);
        writeFileSync(filled, '');
        await run;
        rmSync(other, { force: true });
      }
      // Before: "its output alone filled the file system", charged from the third run, dead at the fourth.
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 1, claimed: 0, done: 0, dead: 0 });
      expect(await charged(ws.db, ['good.txt'])).toBe(0);
    } finally {
      spawnSync('umount', ['-l', ws.out]);
    }
  }, 120_000);

  it('a good item that started beside a bomb already writing, failed when the bomb filled the volume and was cleaned up first: never charged', async (ctx) => {
    const ws = workspace({ concurrency: 2, retry: { maxAttempts: 2, backoffSeconds: 0 } }, { 'a-bomb.txt': 'bomb\n', 'b-good.txt': 'good\n' });
    if (!mountTmpfs(ws.out, '4m')) ctx.skip();
    try {
      const bombLive = path.join(ws.dir, 'bomb-live');
      const goodLive = path.join(ws.dir, 'good-live');
      const bombAt = path.join(ws.dir, 'bomb-at');
      const goodAt = path.join(ws.dir, 'good-at');
      const goodTemp = path.join(ws.dir, 'good-temp');
      const filled = path.join(ws.dir, 'filled');
      const h = path.join(ws.dir, 'h.sh');
      const wait = (f: string) => `while [ ! -e '${f}' ]; do sleep 0.02; done`;
      // The bomb writes 3 MB, then (once the good item has written its first 600 KB) all it
      // can, and exits once the good item's attempt was cleaned up. The good item (700 KB
      // alone on a 4 MB volume) starts once the bomb is under way and writes its last 100 KB
      // once the volume is full.
      writeFileSync(
        h,
        [
          '#!/bin/sh',
          'case "$1" in',
          `*bomb*) head -c 3000000 /dev/zero > "$2"; touch '${bombAt}'; if [ -e '${goodLive}' ]; then ${wait(goodAt)}; fi; cat /dev/zero >> "$2"; touch '${filled}'; while [ -e "$(cat '${goodTemp}')" ]; do sleep 0.02; done; exit 1 ;;`,
          `*) if [ -e '${bombLive}' ]; then ${wait(bombAt)}; fi; echo "$2" > '${goodTemp}'; head -c 600000 /dev/zero > "$2" || exit 1; touch '${goodAt}'; if [ -e '${bombLive}' ]; then ${wait(filled)}; fi; head -c 100000 /dev/zero >> "$2" || exit 1 ;;`,
          'esac',
          '',
        ].join('\n'),
        { mode: 0o755 },
      );
      configure(ws, { handler: { command: [h, '{path}', '{output}'] } });
      for (let i = 0; i < 4; i++) {
        for (const f of [bombLive, goodLive, bombAt, goodAt, goodTemp, filled]) rmSync(f, { force: true });
        const dead = i === 0 ? [] : (JSON.parse((await runCli(['dead-letter', 'list', '--json', '-c', ws.configPath])).stdout) as { id: string }[]).map((d) => d.id);
        if (!dead.includes('a-bomb.txt')) writeFileSync(bombLive, '');
        if (!dead.includes('b-good.txt')) writeFileSync(goodLive, '');
        await runCli(['run', '-c', ws.configPath]);
      }
      // Before: the good item, cleaned up first, was judged to have filled the volume alone,
      // charged from the third run and dead at the fourth. (The bomb, judged after the good
      // item's clean-up left room, is handed back with the drain: not charged here.)
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 2, claimed: 0, done: 0, dead: 0 });
      expect(await charged(ws.db, ['b-good.txt'])).toBe(0);
    } finally {
      spawnSync('umount', ['-l', ws.out]);
    }
  }, 120_000);
});
