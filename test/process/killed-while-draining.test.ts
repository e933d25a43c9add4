/**
 * An eviction whose grace is shorter than drain.gracePeriodSeconds (`kubectl delete pod
 * --grace-period=2`, a node drained or shut down with a short grace, `timeout -k 2`): the
 * SIGTERM starts the drain, and the SIGKILL lands before the drain handed the claims back.
 * The attempts it cut were stopped from outside, not by their items: the next run hands
 * them back uncharged, as the drain would have. Before, each such eviction charged them as a
 * crash does, and a good item in flight at every eviction was dead-lettered by evictions alone.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { FIXTURES, finished, runCli, spawnCli, workspace } from '../helpers/cli.js';
import { killTree } from '../helpers/proc.js';
import { filesIn, until } from '../helpers/wait.js';

const slow = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];
const ids = ['a.txt', 'b.txt'];

describe('a run SIGKILLed while it drained (SQLite, default retry and drain)', () => {
  it('charges nothing: ten such evictions in a row dead-letter no item, and the next clean run does them', async () => {
    const ws = workspace({ handler: { command: slow }, concurrency: 2 }, Object.fromEntries(ids.map((id) => [id, id])));
    const markers = path.join(ws.dir, 'markers');
    for (let round = 0; round < 10; round++) {
      const before = filesIn(markers).length;
      const run = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '120000' } });
      // A handler started (or, charged to death already, none will: the run ends at once).
      const started = await Promise.race([until(() => filesIn(markers).length > before, 'a handler to start').then(() => true), run.exited.then(() => false)]);
      if (!started) break;
      run.child.kill('SIGTERM');
      await run.waitFor((l) => l.msg === 'drain: stopped claiming; in-flight items may finish');
      killTree(run.child.pid!);
      await run.exited;
    }
    const clean = await runCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '10' } });
    expect(clean.code, clean.stderr).toBe(0);
    // It took the last eviction's claims back uncharged, and nothing was dead beforehand.
    expect(finished(clean)?.items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
    const ledger = await openSqliteLedger(ws.db);
    try {
      for (const id of ids) {
        const rec = await ledger.get(id);
        expect(rec!.attempts, id).toBeGreaterThan(5);
        // Only the clean run's own attempt is charged; every evicted one was handed back.
        expect(rec!.attempts - rec!.released, id).toBe(1);
      }
    } finally {
      await ledger.close();
    }
  });
});
