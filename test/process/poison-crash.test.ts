/**
 * An item that kills the process every time it runs (an out-of-memory kill, a segfault in a
 * native library), run beside good items: it must end dead after retry.maxAttempts runs,
 * and the good items that happened to be in flight with it must not. Nothing can tell which
 * attempt killed the process, so an item charged twice, the last time by a dead run, is a
 * suspect: suspects run one at a time, after the pass's other items, so the one that kills
 * the process is charged alone. Before, they ran together again at every retry, were
 * charged together at every crash, and were dead-lettered with the poison item.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { FIXTURES, runCli, workspace } from '../helpers/cli.js';

describe('an item that kills the process every time, with the defaults users get', () => {
  it('is dead after retry.maxAttempts runs; the items in flight beside it are done, not dead', async () => {
    const files: Record<string, string> = { 'poison.txt': 'x' };
    for (let i = 0; i < 11; i++) files[`good-${String(i).padStart(2, '0')}.txt`] = `${i}`;
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/crash-on-poison-module.mjs') } }, files); // concurrency, maxAttempts: defaults (4, 5)
    const log = path.join(ws.dir, 'invocations.log');
    const env = { INVOCATIONS: log };
    let runs = 0;
    let last: Awaited<ReturnType<typeof runCli>> | undefined;
    let output = '';
    for (; runs < 10; runs++) {
      last = await runCli(['run', '-c', ws.configPath], { env, timeoutMs: 60_000 });
      output += last.stdout + last.stderr;
      if (last.signal === null) break;
      expect(last.signal, last.stderr).toBe('SIGKILL');
    }
    expect(last?.code, last?.stderr).toBe(0);
    const starts = readFileSync(log, 'utf8').trim().split('\n');
    expect(starts.filter((id) => id === 'poison.txt')).toHaveLength(5);
    // Its last attempt died with the process: the run that reclaimed it dead-lettered it, and
    // said so by name, as a pass does (before, only a count of reclaimed claims).
    const deadLines = output.split('\n').filter((l) => l.includes('item dead-lettered'));
    expect(deadLines, output).toHaveLength(1);
    expect(JSON.parse(deadLines[0] ?? '{}')).toMatchObject({ itemId: 'poison.txt', error: expect.stringContaining('attempt 5 abandoned') });
    const ledger = await openSqliteLedger(ws.db);
    try {
      expect(await ledger.get('poison.txt')).toMatchObject({ state: 'dead', attempts: 5 });
      for (const id of Object.keys(files).filter((f) => f !== 'poison.txt')) {
        expect((await ledger.get(id))?.state, `${id} (started ${starts.filter((s) => s === id).length} times)`).toBe('done');
      }
    } finally {
      await ledger.close();
    }
  }, 300_000);
});
