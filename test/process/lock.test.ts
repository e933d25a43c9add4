import { readFileSync, writeFileSync } from 'node:fs';
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
    // The first run's handlers work until the gate file exists: a fixed 4 s let the first run
    // end before the second (a Node start and a ledger open) had looked, on a loaded machine.
    const gate = path.join(ws.dir, 'gate');
    const env = { MARKER_DIR: markers, GATE: gate };
    const first = spawnCli(['run', '-c', ws.configPath], { env });
    await until(() => filesIn(markers).length === 2, 'the first run to start its handlers');

    let firstExited = false;
    void first.exited.then(() => (firstExited = true));
    const second = await runCli(['run', '-c', ws.configPath], { env });
    expect(second.code, second.stderr).toBe(0);
    expect(second.lines.some((l) => l.msg === 'skipped: another run holds the lock')).toBe(true);
    expect(finished(second)?.outcome).toBe('skipped-locked');
    expect(firstExited).toBe(false); // it skipped while the first was still working
    // Its own job's run: an overlap, not another job's lock.
    expect(second.lines.some((l) => l.level === 'warn')).toBe(false);

    writeFileSync(gate, '');
    expect((await first.exited).code, first.stderr()).toBe(0);
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

  it('a lock.path two jobs share: the start that finds it held names the other job, and its own overlaps do not', async () => {
    const slow = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];
    const a = workspace({ name: 'job-a', handler: { command: slow } }, { 'a.scc': 'a' });
    // A copy of a's config with its own name, source and ledger, that kept lock.path.
    const b = workspace({ name: 'job-b', handler: { command: slow }, lock: { path: path.join(a.state, 'cronsafe.lock') } }, { 'b.scc': 'b' });
    const markers = path.join(a.dir, 'markers');
    const first = spawnCli(['run', '-c', a.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '4000' } });
    await until(() => filesIn(markers).length === 1, 'job-a to start its handler');
    expect(readFileSync(path.join(a.state, 'cronsafe.lock'), 'utf8')).toMatch(/^[^\s:@]+:\d+:[^\s@]+@job-a\n$/);

    const other = await runCli(['run', '-c', b.configPath]);
    expect(other.code, other.stderr).toBe(0);
    expect(finished(other)?.outcome).toBe('skipped-locked');
    const warned = other.lines.find((l) => l.level === 'warn');
    expect(warned?.msg).toMatch(/lock\.path is held by a run of job 'job-a', not of this job: .*give each its own lock\.path/);
    expect(warned?.heldBy).toMatchObject({ job: 'job-a', run: expect.stringMatching(/^[^\s:@]+:\d+:[^\s@]+$/) });

    expect((await first.exited).code).toBe(0);
    // Free again: job-b runs, and writes its own name into the lock file.
    const next = await runCli(['run', '-c', b.configPath], { env: { MARKER_DIR: path.join(b.dir, 'markers'), SLOW_MS: '10' } });
    expect(finished(next)?.outcome, next.stderr).toBe('completed');
    expect(readFileSync(path.join(a.state, 'cronsafe.lock'), 'utf8')).toMatch(/@job-b\n$/);
  });

  it('a lock file written by an earlier version (host:pid:runId, no job) is taken over as before', async () => {
    const ws = workspace({ handler: { command: ['true'] } }, { 'a.scc': 'a' });
    const lockFile = path.join(ws.state, 'cronsafe.lock');
    const first = await runCli(['run', '-c', ws.configPath]);
    expect(first.code, first.stderr).toBe(0);
    writeFileSync(lockFile, 'old-host:123:mx0-0000abcd\n');
    const again = await runCli(['run', '-c', ws.configPath]);
    expect(finished(again)?.outcome, again.stderr).toBe('completed');
    expect(readFileSync(lockFile, 'utf8')).toMatch(/@test-job\n$/);
  });
});
