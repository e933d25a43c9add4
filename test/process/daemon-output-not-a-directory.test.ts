import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, statusJson, workspace } from '../helpers/cli.js';
import { LIBFAKETIME, spawnFastCli, stopFastDaemon } from '../helpers/faketime.js';

// `cronsafe daemon` checks output.directory with its config, once. Replaced by a file while
// the daemon idled (a mistaken `cp report /data/out`), it made the next pass's mkdir throw
// EEXIST: the daemon ended (exit 1) with `cronsafe: fatal:` and a stack trace, and nothing
// ran again until someone restarted it. Like a source unmounted, it is the environment's
// fault: the pass fails (said in one line), is run again, and the daemon goes on.

describe.skipIf(LIBFAKETIME === undefined)('cronsafe daemon, output.directory replaced by a file while idle', () => {
  it('fails that pass in one line and carries on once the directory is back', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'handlers/module-ok.mjs') }, schedule: { cron: '* * * * *', timeZone: 'UTC' } }, { 'a.txt': 'a' });
    const daemon = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 12:00:30', { timeoutMs: 90_000 });
    try {
      const first = await daemon.waitFor((l) => l.msg === 'run finished', 30_000);
      expect(first.outcome).toBe('completed');
      // A pass may be making its temp directory in it meanwhile (one every real second): rm's
      // walk then meets ENOTEMPTY (seen in CI), which it retries, as `rm -r` run again would.
      rmSync(ws.out, { recursive: true, maxRetries: 50, retryDelay: 20 });
      writeFileSync(ws.out, 'not a directory');
      // A pass that started between the two lines above found no directory and made one; the
      // file then put there fails its mkdir of the temp directory below it (ENOTDIR, also one
      // line). The pass after it finds the file from the start.
      const message = `output.directory is not a directory: ${ws.out}`;
      const failed = await daemon.waitFor((l) => l.msg === 'run finished' && l.outcome === 'failed' && (l.err as { message?: string } | undefined)?.message === message, 30_000);
      expect(failed).toMatchObject({ exitCode: 1, err: { message } });
      // Before: the daemon exited here (1), with EEXIST's stack on stderr.
      // b.txt first: the first pass that completes after the failed one has it to do (a pass
      // every fake minute, one real second, may start between any two of these steps).
      writeFileSync(path.join(ws.source, 'b.txt'), 'b');
      rmSync(ws.out);
      mkdirSync(ws.out, { recursive: true }); // a pass in between may have made it already
      await daemon.waitFor((l) => l.msg === 'run finished' && l.outcome === 'completed' && daemon.lines.indexOf(l) > daemon.lines.indexOf(failed), 30_000);
    } catch (err) {
      daemon.child.kill('SIGTERM');
      throw err;
    }
    // Still up, its passes going on (exit 0, or 75 when the stop drained one: not 1).
    await stopFastDaemon(daemon);
    expect(daemon.stderr()).toContain(`cronsafe: run failed: output.directory is not a directory: ${ws.out}\n`);
    expect(daemon.stderr()).not.toContain('fatal');
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
  }, 60_000);
});
