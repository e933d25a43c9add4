/**
 * The ledger's name lock (src/ledger/sqlite/name-lock.ts): a Linux abstract unix socket
 * named after the ledger's real path, the part of the SQLite run lock that removing the
 * state directory cannot free. Real sockets, a real child process killed with SIGKILL.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { lockName, takeNameLock } from '../../src/ledger/sqlite/name-lock.js';
import { takeSqliteRunLock } from '../../src/ledger/sqlite/run-lock.js';
import type { RunLock } from '../../src/ledger/run-lock.js';

const releases: (() => void | Promise<void>)[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const r of releases.splice(0)) await r();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tempDir = (): string => {
  const d = mkdtempSync(path.join(tmpdir(), 'cronsafe-name-lock-'));
  dirs.push(d);
  return d;
};
const take = async (file: string): Promise<(() => void) | null> => {
  const r = await takeNameLock(file);
  if (r) releases.push(r);
  return r;
};

describe.skipIf(process.platform !== 'linux')('the ledger name lock', () => {
  it('keeps a second taker of the same ledger out until released; other ledgers are not kept out', async () => {
    const dir = tempDir();
    const ledger = path.join(dir, 'job.db');
    const first = await take(ledger);
    expect(first).not.toBeNull();
    expect(await take(ledger)).toBeNull();
    expect(await take(path.join(dir, 'other.db'))).not.toBeNull();
    first!();
    first!(); // idempotent
    expect(await take(ledger)).not.toBeNull();
  });

  it('names the ledger by its real path: a link to its directory is the same ledger', async () => {
    const dir = tempDir();
    mkdirSync(path.join(dir, 'state'));
    symlinkSync(path.join(dir, 'state'), path.join(dir, 'via-link'));
    expect(lockName(path.join(dir, 'via-link', 'job.db'))).toBe(lockName(path.join(dir, 'state', 'job.db')));
    expect(await take(path.join(dir, 'state', 'job.db'))).not.toBeNull();
    expect(await take(path.join(dir, 'via-link', 'job.db'))).toBeNull();
    expect(lockName(path.join(dir, 'state', 'job.db'))).not.toBe(lockName(path.join(dir, 'state', 'job2.db')));
  });

  it('is freed by the kernel when its holder is killed with SIGKILL', async () => {
    const ledger = path.join(tempDir(), 'job.db');
    // The built module: what the CLI runs.
    const mod = pathToFileURL(path.resolve('dist/ledger/sqlite/name-lock.js')).href;
    const child = spawn(process.execPath, ['--input-type=module', '-e', `const { takeNameLock } = await import(${JSON.stringify(mod)}); const r = await takeNameLock(${JSON.stringify(ledger)}); process.stdout.write(r ? 'HELD\\n' : 'BUSY\\n'); setInterval(() => {}, 1e9);`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise((resolve) => child.on('exit', resolve));
    try {
      const said = await new Promise<string>((resolve, reject) => {
        child.on('exit', (code) => reject(new Error(`holder exited ${code}`)));
        child.stdout.setEncoding('utf8').on('data', (d: string) => resolve(d.trim()));
      });
      expect(said).toBe('HELD');
      expect(await take(ledger)).toBeNull();
    } finally {
      child.kill('SIGKILL');
      await exited;
    }
    expect(await take(ledger)).not.toBeNull();
  });

  it('keeps a second run out after the whole state directory was removed under the first', async () => {
    const dir = tempDir();
    const state = path.join(dir, 'state');
    const opts = { lockPath: path.join(state, 'job.lock'), ledgerFile: path.join(state, 'job.db'), job: 'job' };
    const first: RunLock | null = await takeSqliteRunLock({ ...opts, owner: 'host:1:run-1' });
    expect(first).not.toBeNull();
    releases.push(() => first!.release());
    // Both flocks are on files that are gone now: only the name lock still stands.
    rmSync(state, { recursive: true, force: true, maxRetries: 20, retryDelay: 5 });
    expect(await takeSqliteRunLock({ ...opts, owner: 'host:2:run-2' })).toBeNull();
    await first!.release();
    const second = await takeSqliteRunLock({ ...opts, owner: 'host:2:run-3' });
    expect(second).not.toBeNull();
    releases.push(() => second!.release());
    // allowNetworkFilesystem (no flock on the ledger) still takes the name lock.
    expect(await takeSqliteRunLock({ ...opts, lockPath: path.join(dir, 'elsewhere.lock'), allowNetworkFilesystem: true, owner: 'host:3:run-4' })).toBeNull();
  });
});
