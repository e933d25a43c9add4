import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { tryLock } from '../../src/ledger/sqlite/flock.js';

// The SQLite ledger's directory replaced by a file (`rm -r state; cp backup state`) between
// the run's open of the ledger and its watch on it: the watch's stat threw ENOTDIR, which
// ended the run (and a daemon, found with a flipper on the state directory) with
// `cronsafe: fatal:` and a stack. It is the ledger gone, as the recheck finds it: `lost`.

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-watch-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe.each([
  ['a file', (p: string) => writeFileSync(p, 'a backup')],
  ['a link to itself', (p: string) => symlinkSync(p, p)],
])('the ledger directory replaced by %s before the watch', (_, replace) => {
  it('stops the run (lost), never throws', () => {
    const state = path.join(dir, 'state');
    mkdirSync(state);
    writeFileSync(path.join(state, 'job.db'), '');
    const lock = tryLock(path.join(dir, 'job.lock'), 'host:1:run', { recheckMs: 60_000 });
    expect(lock).not.toBeNull();
    try {
      rmSync(state, { recursive: true });
      replace(state);
      lock!.watch(path.join(state, 'job.db'));
      expect(lock!.lost.aborted).toBe(true);
      expect(String(lock!.lost.reason)).toContain(`${path.join(state, 'job.db')} was removed or replaced during the run`);
      // Its companions are no ledger: not watched, no throw either.
      lock!.watchCompanion(path.join(state, 'job.db-wal'), (f) => f);
    } finally {
      lock!.release();
    }
  });
});

describe('the ledger directory replaced by a link to itself while watched', () => {
  it('is the ledger gone at the next look (lost)', () => {
    const state = path.join(dir, 'state');
    mkdirSync(state);
    writeFileSync(path.join(state, 'job.db'), '');
    const lock = tryLock(path.join(dir, 'job.lock'), 'host:1:run', { recheckMs: 60_000 });
    try {
      lock!.watch(path.join(state, 'job.db'));
      expect(lock!.lost.aborted).toBe(false);
      rmSync(state, { recursive: true });
      symlinkSync(state, state);
      // Before: ELOOP was "cannot tell", looked at again for ever; the run went on.
      expect(lock!.checkWatched()).toBe(true);
      expect(lock!.lost.aborted).toBe(true);
    } finally {
      lock!.release();
    }
  });
});
