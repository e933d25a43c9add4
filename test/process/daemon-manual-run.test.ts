/**
 * `cronsafe daemon` started while a manual `cronsafe run` is going. That run has no end
 * recorded yet, as a killed one has, so the daemon took it for interrupted: it logged a
 * false "resuming it", found the lock held, and recorded a lock-skip (an overrun, though no
 * occurrence came due). Its growth trigger then did the same once per cooldown for as long
 * as the manual run lasted: enough lock-skips to page CronsafeRepeatedOverruns. A run that
 * is going is neither interrupted nor an overrun of a growth pass (which is not a fire):
 * the daemon waits for it, then picks up the new files.
 */
import path from 'node:path';
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { FIXTURES, spawnCli, statusJson, workspace } from '../helpers/cli.js';
import { filesIn, until } from '../helpers/wait.js';

const SLOW = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];

describe('cronsafe daemon started while a manual run is going', () => {
  it('neither resumes nor counts an overrun; its growth pass waits for the run, then takes the new file', async () => {
    // A yearly occurrence long past (no graceSeconds: never stale): nothing comes due during the test.
    const ws = workspace(
      {
        handler: { command: SLOW },
        concurrency: 1,
        schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' },
        daemon: { tickSeconds: 1, growth: { enabled: true, cooldownSeconds: 1 } },
      },
      { 'a.scc': 'a' },
    );
    const markers = path.join(ws.dir, 'markers');
    const manual = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '5000' } });
    await until(() => filesIn(markers).length === 1, 'the manual run to start its handler');

    const daemon = spawnCli(['daemon', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '10' }, timeoutMs: 60_000 });
    try {
      await daemon.waitFor((l) => l.msg === 'daemon started');
      writeFileSync(path.join(ws.source, 'b.scc'), 'b'); // new work while the manual run is going
      expect((await manual.exited).code).toBe(0);
      await daemon.waitFor((l) => l.msg === 'run finished' && l.outcome === 'completed', 30_000);
    } finally {
      daemon.child.kill('SIGTERM');
    }
    expect((await daemon.exited).code).toBe(0);

    expect(daemon.lines.filter((l) => String(l.msg).includes('resuming it'))).toEqual([]);
    expect(daemon.lines.filter((l) => l.msg === 'run finished').map((l) => l.outcome)).toEqual(['completed']);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
    const ledger = await openSqliteLedger(ws.db);
    try {
      expect(await ledger.totals()).toMatchObject({ lockSkips: 0, overruns: 0 });
    } finally {
      await ledger.close();
    }
  });
});
