/**
 * metrics.port is open to whatever reaches the pod or host (a port scanner, a broken client
 * that connects and never sends a request). Each connection held a file descriptor until
 * Node's header timeout (a minute), however many there were: enough of them took every
 * descriptor the process may open, and `cronsafe daemon`'s next pass failed with "out of file
 * descriptors" (its scan, outputs and handlers had none left) for as long as they were held.
 * The server now takes a bounded number of connections at once and closes the rest at once.
 */
import { writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, spawnCliRaw, workspace } from '../helpers/cli.js';
import { freePort } from '../helpers/prom.js';

/** Open `n` connections to the port and keep them; resolves once each is connected or refused. */
async function hold(port: number, n: number): Promise<Socket[]> {
  const sockets: Socket[] = [];
  await Promise.all(
    Array.from({ length: n }, () => {
      const s = connect(port, '127.0.0.1');
      s.on('error', () => undefined);
      sockets.push(s);
      return new Promise<void>((resolve) => {
        s.once('connect', () => resolve());
        s.once('close', () => resolve());
      });
    }),
  );
  return sockets;
}

describe('metrics.port flooded with connections that send nothing', () => {
  it('cronsafe daemon (ulimit -n 256): the next pass still completes, and /metrics still answers once they are gone', async () => {
    const port = await freePort();
    // A yearly occurrence long past (no graceSeconds: never stale): one pass at start, then
    // growth passes for new files.
    const ws = workspace(
      {
        handler: { command: ['true'] },
        schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' },
        daemon: { tickSeconds: 1, growth: { enabled: true, cooldownSeconds: 0 } },
        metrics: { port },
      },
      { 'a.txt': 'a' },
    );
    const daemon = spawnCliRaw('/bin/sh', ['-c', 'ulimit -n 256 && exec "$0" "$@"', process.execPath, CLI, 'daemon', '-c', ws.configPath], { timeoutMs: 90_000 });
    const finished = () => daemon.lines.filter((l) => l.msg === 'run finished');
    let sockets: Socket[] = [];
    try {
      await daemon.waitFor((l) => l.msg === 'run finished' && l.outcome === 'completed', 30_000);
      sockets = await hold(port, 400);
      for (const name of ['b.txt', 'c.txt', 'd.txt']) writeFileSync(path.join(ws.source, name), name);
      await daemon.waitFor(() => finished().length === 2, 30_000);
      expect(finished()[1], daemon.stderr()).toMatchObject({ outcome: 'completed', counts: { succeeded: 3 } });
      for (const s of sockets) s.destroy();
      sockets = [];
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect(res.status).toBe(200);
      await res.text();
    } finally {
      for (const s of sockets) s.destroy();
      daemon.child.kill('SIGTERM');
    }
    expect((await daemon.exited).code, daemon.stderr()).toBe(0);
  }, 90_000);
});
