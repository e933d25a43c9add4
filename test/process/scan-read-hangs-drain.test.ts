/**
 * A directory read that hangs (an NFS server gone silent, a dead FUSE daemon) while a pass
 * scans: a SIGTERM then waited for that read, whose batch the stopping pass would throw
 * away, until the drain's last resort ("the drain did not end within
 * drain.gracePeriodSeconds", a sixth of the margin before the kubelet's SIGKILL), without
 * recording its end. The drain now ends as soon as the attempts in flight have: its end
 * recorded (drained, 75), no last resort. (The process itself still cannot exit while the
 * read is stuck in libuv's threadpool, whose threads exit(3) joins: the test lets it answer.)
 *
 * The hang is the LD_PRELOAD shim of fixtures/process/hang-readdir-shim.c (readdir(3) of
 * one directory waits for a file the test makes at its end), built by gcc as quota-shim.ts does.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, spawnCli, workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

const SHIM = path.join(FIXTURES, 'process/hang-readdir-shim.c');

describe('a directory read that hangs while the pass scans', () => {
  it('a SIGTERM drains without waiting for it: exit 75, not at the last resort', async () => {
    const aside = mkdtempSync(path.join(tmpdir(), 'cronsafe-hang-'));
    const so = path.join(aside, 'hang.so');
    const built = spawnSync('gcc', ['-shared', '-fPIC', '-O1', '-o', so, SHIM, '-ldl'], { encoding: 'utf8' });
    expect(built.status, built.stderr).toBe(0);
    // Enough files at the top for a first discovery batch (256) before the hanging directory.
    const files = Object.fromEntries(Array.from({ length: 600 }, (_, i) => [`item-${String(i).padStart(3, '0')}.txt`, String(i)]));
    const ws = workspace({ handler: { command: ['cat', '{path}'] } }, files);
    mkdirSync(path.join(ws.source, 'stuck'));
    writeFileSync(path.join(ws.source, 'stuck', 'x.txt'), 'x');
    const ready = path.join(aside, 'ready');
    const release = path.join(aside, 'release');
    const env = { LD_PRELOAD: so, HANG_DIR: 'stuck', HANG_READY: ready, HANG_RELEASE: release, UV_USE_IO_URING: '0' };
    const run = spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 90_000 });
    try {
      // Readiness: the scan is in the hanging read.
      await until(() => existsSync(ready), 'the scan to reach the hanging directory', 60_000);
      run.child.kill('SIGTERM');
      // Whichever comes first: the run's end, or the drain's last resort (25 s on, by default).
      const LAST_RESORT = /the drain did not end within/;
      await until(() => run.lines.some((l) => l.msg === 'run finished') || LAST_RESORT.test(run.stderr()), 'the run to end', 80_000);
      // Before: the last resort, the run's end never recorded (its hand-backs, the Lease's release).
      expect(run.stderr()).not.toMatch(LAST_RESORT);
      expect(run.lines.find((l) => l.msg === 'run finished')).toMatchObject({ outcome: 'drained', exitCode: 75 });
      // A process does not exit while a read is stuck in libuv's threadpool (exit joins its
      // threads): the read answers now, as a server that came back would.
      writeFileSync(release, '');
      const { code } = await run.exited;
      expect(code, run.stderr()).toBe(75);
    } finally {
      writeFileSync(release, '');
      run.child.kill('SIGKILL');
    }
  }, 120_000);
});
