/**
 * The output store's own probes (the quota's 4 KiB file, the read-only check's directory) are
 * not made where they could take the last inodes an attempt beside them needs: on a tmpfs a
 * few inodes from full, a probe took the last one as a handler's `cp` created its output; the
 * `cp` failed (ENOSPC) and, judged once the probe was gone, its item was charged (seen in CI:
 * environment-faults "out of inodes", one item charged and not done). Root only (mount).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, watch, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { OutputStore } from '../../src/runner/output.js';

const isRoot = process.getuid?.() === 0;
let dir: string | undefined;

afterEach(() => {
  if (dir === undefined) return;
  spawnSync('umount', ['-l', dir]);
  rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** The probe files and directories made in the store's temp directory while `check` runs. */
async function probesMadeBy(inodes: number, check: (store: OutputStore) => Promise<unknown>): Promise<string[]> {
  dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-probe-room-'));
  expect(spawnSync('mount', ['-t', 'tmpfs', '-o', `size=64m,nr_inodes=${inodes}`, 'tmpfs', dir]).status).toBe(0);
  const store = new OutputStore(dir);
  await store.prepare();
  // A few outputs, as a pass has committed by then.
  for (let i = 0; i < 3; i++) writeFileSync(path.join(dir, `done-${i}.out`), 'x');
  const seen: string[] = [];
  const watcher = watch(store.tempDir, (_event, name) => {
    if (name?.endsWith('.probe')) seen.push(name);
  });
  try {
    await check(store);
    // inotify's events reach the loop on a later turn.
    await new Promise((r) => setTimeout(r, 50));
  } finally {
    watcher.close();
  }
  return seen;
}

describe.skipIf(!isRoot)("the output store's probes near the end of a file system's inodes", () => {
  it('with room: the quota and read-only probes are made (this watch sees them)', async () => {
    const seen = await probesMadeBy(100_000, async (store) => {
      expect(await store.full()).toBe(false);
      expect(await store.readOnly()).toBe(false);
    });
    expect(seen.length).toBeGreaterThanOrEqual(2);
  });

  it('with a few inodes left: neither probe is made, and the file system is not taken for full or read-only', async () => {
    const seen = await probesMadeBy(24, async (store) => {
      expect(await store.full()).toBe(false);
      expect(await store.readOnly()).toBe(false);
    });
    expect(seen).toEqual([]);
  });
});
