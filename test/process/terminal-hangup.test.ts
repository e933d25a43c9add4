import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, FIXTURES, statusJson, workspace } from '../helpers/cli.js';

const hang = [process.execPath, path.join(FIXTURES, 'process/hang-exec.mjs'), '{path}'];

describe('a run on a terminal that hangs up', () => {
  it('drains on the SIGHUP and exits 75, not SIGSEGV, and its helper does not abort', async () => {
    const ws = workspace({ handler: { command: hang }, concurrency: 1, drain: { gracePeriodSeconds: 6, marginSeconds: 3 } }, { 'a.txt': 'a', 'b.txt': 'b' });
    const markers = path.join(ws.dir, 'markers');
    // Node 20 aborted at exit restoring the modes of a terminal that had hung up
    // (nodejs/node#51519): the run, whose drain had gone well, ended in SIGSEGV (139), and the
    // helper that forks handler.command children in SIGABRT.
    const r = spawnSync('python3', [path.join(FIXTURES, 'process/pty-hangup.py'), process.execPath, CLI, 'run', '-c', ws.configPath], {
      env: { ...process.env, MARKER_DIR: markers },
      encoding: 'utf8',
      timeout: 150_000,
    });
    expect(r.status, r.stderr).toBe(0);
    const { main, others } = JSON.parse(r.stdout.trim().split('\n').pop()!) as { main: number; others: number[] };
    expect(main).toBe(75);
    // The helper ends with code 0; the handler's group is killed by it (SIGKILL, -9).
    expect(others.filter((c) => c === -6 || c === -11)).toEqual([]);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 2, claimed: 0, done: 0, dead: 0 });
  }, 180_000);
});
