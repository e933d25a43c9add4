/**
 * A pod drained again and again (evictions: SIGTERM, then the grace period) while its first
 * items outlast the time it gets. The drain hands their claims back uncharged, as it must;
 * but offered first again by the next scan, they took every slot of every run, and the
 * backlog behind them never ran. Handed back, they wait behind the pass's fresh items (in
 * its sweep) as charged items do.
 */
import { appendFileSync, existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { configure, finished, spawnCli, workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

// Logs each start; an id listed in $LONG (or every id while $ALL_LONG exists) runs 60 s.
const HANDLER = [
  '/bin/sh',
  '-c',
  'printf "%s\\n" "$CRONSAFE_ITEM_ID" >> "$STARTS"; if [ -e "$ALL_LONG" ] || grep -qxF "$CRONSAFE_ITEM_ID" "$LONG" 2>/dev/null; then exec sleep 60; fi; cat "$1" > "$2"',
  'sh',
  '{path}',
  '{output}',
];
const CONCURRENCY = 2;
const starts = (file: string): string[] => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : []);

describe('an SQLite pass drained again and again while its first items outlast it', () => {
  it('the items handed back wait behind the fresh ones: the rest of the backlog is done meanwhile, nothing charged', async () => {
    const files = Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`item-${i}`, `payload ${i}\n`]));
    const ws = workspace({ concurrency: CONCURRENCY, drain: { gracePeriodSeconds: 3, marginSeconds: 1 } }, files);
    const env = { STARTS: path.join(ws.dir, 'starts'), LONG: path.join(ws.dir, 'long'), ALL_LONG: path.join(ws.dir, 'all-long') };
    configure(ws, { handler: { command: HANDLER, env } });
    appendFileSync(env.ALL_LONG, '');

    // First run: whatever the scan offers first runs long; drained, both handed back.
    const first = spawnCli(['run', '-c', ws.configPath]);
    await until(() => starts(env.STARTS).length === CONCURRENCY, 'the first attempts to start');
    first.child.kill('SIGTERM');
    expect((await first.exited).code, first.stderr()).toBe(75);
    const long = starts(env.STARTS);
    appendFileSync(env.LONG, long.map((id) => `${id}\n`).join(''));
    rmSync(env.ALL_LONG);

    // Drained again, each time once the long items are running again.
    for (let round = 0; round < 2; round++) {
      const before = starts(env.STARTS).length;
      const run = spawnCli(['run', '-c', ws.configPath]);
      await until(() => long.every((id) => starts(env.STARTS).slice(before).includes(id)), `the long items to start again (round ${round + 1})`);
      run.child.kill('SIGTERM');
      const { code } = await run.exited;
      expect(code, run.stderr()).toBe(75);
      expect(finished(run)?.outcome).toBe('drained');
    }

    const ledger = await openSqliteLedger(ws.db);
    try {
      for (const id of Object.keys(files)) {
        const rec = await ledger.get(id);
        if (long.includes(id)) {
          expect(rec, id).toMatchObject({ state: 'pending' });
          expect(rec!.attempts - rec!.released, `${id} is never charged for the drains`).toBe(0);
        } else {
          expect(rec, `${id}: run while the long items waited`).toMatchObject({ state: 'done', attempts: 1, released: 0 });
          expect(readFileSync(path.join(ws.out, `${id}.out`), 'utf8')).toBe(files[id]);
        }
      }
    } finally {
      await ledger.close();
    }
  }, 120_000);
});
