import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { spawnCli, statusJson, workspace } from '../helpers/cli.js';

/**
 * The helper that forks command handlers never starts: Node could not make its threads (a
 * low `ulimit -u` or pod pids limit, which count threads, leaves cronsafe itself running),
 * so it never says it is ready. The run waited for it forever, and the hung helper (its
 * own session, never reading its channel) outlived cronsafe. A helper not ready within
 * 15 s is killed and counts as one that failed to start: the environment's fault, nothing
 * charged, exit 1.
 *
 * Made deterministic with NODE_EXTRA_CA_CERTS naming a FIFO: Node reads it before any
 * JavaScript runs. The test writes it once, for cronsafe's own start-up; each helper then
 * blocks opening it, as a helper starved of threads blocks.
 */
function liveProcessesWith(marker: string): number[] {
  const found: number[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readFileSync(`/proc/${pid}/environ`, 'latin1').includes(marker)) continue;
      const state = /^State:\s+(\S)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
      if (state !== 'Z') found.push(Number(pid));
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

describe('the helper that forks command handlers never becomes ready', () => {
  it('is killed after 15 s: the run exits 1 naming it, nothing is charged, no process is left behind', async () => {
    const files = { 'a.txt': 'a', 'b.txt': 'b' };
    const ws = workspace({ handler: { command: ['/bin/cp', '{path}', '{output}'] } }, files);
    const fifo = path.join(ws.dir, 'ca.pem');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const marker = `CRONSAFE_TEST_MARKER=${randomUUID()}`;
    const [k, v] = marker.split('=') as [string, string];
    const run = spawnCli(['run', '-c', ws.configPath], { env: { NODE_EXTRA_CA_CERTS: fifo, [k]: v }, timeoutMs: 90_000 });
    // cronsafe's own start-up reads the FIFO: give it one empty read (the open waits for it).
    const writer = await open(fifo, 'w');
    await writer.close();
    const { code, signal } = await run.exited;
    try {
      expect(signal).toBeNull();
      expect(code, run.stderr()).toBe(1);
      expect(run.stderr()).toContain('the process that starts handler.command children did not start within 15 s');
      const status = await statusJson(ws.configPath);
      expect(status.items).toMatchObject({ pending: 2, claimed: 0, done: 0, dead: 0 });
      expect(liveProcessesWith(marker)).toEqual([]);
    } finally {
      for (const pid of liveProcessesWith(marker)) process.kill(pid, 'SIGKILL');
    }
  }, 120_000);
});
