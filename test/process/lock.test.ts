import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { FIXTURES, finished, runCli, spawnCli, statusJson, workspace } from '../helpers/cli.js';
import { filesIn, until } from '../helpers/wait.js';

describe('one run at a time', () => {
  it('a second run while one is active exits 0 at once, logs the skip and records it', async () => {
    const slow = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];
    const ws = workspace({ handler: { command: slow }, concurrency: 2 }, { 'a.scc': 'a', 'b.scc': 'b' });
    const markers = path.join(ws.dir, 'markers');
    const env = { MARKER_DIR: markers, SLOW_MS: '4000' };
    const first = spawnCli(['run', '-c', ws.configPath], { env });
    await until(() => filesIn(markers).length === 2, 'the first run to start its handlers');

    let firstExited = false;
    void first.exited.then(() => (firstExited = true));
    const second = await runCli(['run', '-c', ws.configPath], { env });
    expect(second.code, second.stderr).toBe(0);
    expect(second.lines.some((l) => l.msg === 'skipped: another run holds the lock')).toBe(true);
    expect(finished(second)?.outcome).toBe('skipped-locked');
    expect(firstExited).toBe(false); // it skipped while the first was still working

    expect((await first.exited).code).toBe(0);
    // Only the first run processed anything: each handler started once.
    expect(filesIn(markers)).toHaveLength(2);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
    const ledger = await openSqliteLedger(ws.db);
    try {
      expect((await ledger.totals()).lockSkips).toBe(1);
    } finally {
      await ledger.close();
    }
  });

  it('the kernel releases the lock of a SIGKILLed run: the next run resumes at once', async () => {
    const slow = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];
    const ws = workspace({ handler: { command: slow }, concurrency: 1, lease: { seconds: 3600, renewSeconds: 60 } }, { 'a.scc': 'a' });
    const markers = path.join(ws.dir, 'markers');
    const first = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '60000' } });
    await until(() => filesIn(markers).length === 1, 'the handler to start');
    first.child.kill('SIGKILL');
    await first.exited;
    // The lease is an hour, but holding the lock proves the claim is orphaned.
    const second = await runCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '10' } });
    expect(second.code, second.stderr).toBe(0);
    expect(second.lines.some((l) => l.msg.startsWith('reclaimed claims'))).toBe(true);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
  });
});
