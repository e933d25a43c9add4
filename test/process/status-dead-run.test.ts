/**
 * A run killed outright (SIGKILL, the OOM killer, a node lost) never records its end: until
 * the next run marks it `died`, `status` listed it as `running  (counts when it ends)`, for
 * hours on a job that fires rarely, so an operator waited for a run that was gone. A run
 * beats in the ledger every lease.renewSeconds; one that has not beaten for lease.seconds is
 * now listed as `running?`, saying when it last beat and that it may have died.
 */
import { describe, expect, it } from 'vitest';
import { LIBFAKETIME } from '../helpers/faketime.js';
import { CLI, runCli, spawnCli, spawnCliRaw, workspace } from '../helpers/cli.js';

describe.skipIf(LIBFAKETIME === undefined)('status of a run that died without recording its end', () => {
  it('a live run is "running"; once killed, with no heartbeat for lease.seconds, it is "running?" with its last heartbeat', async () => {
    const ws = workspace({ handler: { command: ['sleep', '60'] }, lease: { seconds: 60, renewSeconds: 20 } }, { 'a.scc': 'x' });
    const run = spawnCli(['run', '-c', ws.configPath]);
    try {
      await run.waitFor((l) => l.msg === 'run started');
      const live = await runCli(['status', '-c', ws.configPath]);
      expect(live.code, live.stderr).toBe(0);
      expect(live.stdout).toMatch(/ running +\(counts when it ends\) /);
    } finally {
      run.child.kill('SIGKILL');
    }
    await run.exited;
    // Ten minutes on: the ledger as it was, read by a status whose clock is later.
    const later = spawnCliRaw(process.execPath, [CLI, 'status', '-c', ws.configPath], { env: { LD_PRELOAD: LIBFAKETIME!, FAKETIME: '+10m' } });
    const { code } = await later.exited;
    expect(code, later.stderr()).toBe(0);
    expect(later.stdout()).toMatch(/ running\? +\(no heartbeat since \d{4}-\d\d-\d\dT[\d:.]+Z, over lease\.seconds \(60\) ago: it may have died; the next run records it as died\) /);
  }, 60_000);
});
