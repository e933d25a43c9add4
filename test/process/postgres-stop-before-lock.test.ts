/**
 * docs/operations.md, "Drains": the first SIGTERM stops a run also during its start-up. On
 * PostgreSQL the start takes the run lock in the database; with the server down (a restart,
 * a failover) or not answering its connects, a SIGTERMed start went on trying for the rest of
 * its retry budget, or waited out pg's 10 s connect timeout, and then failed (exit 1, which
 * counts toward the Job's backoffLimit) for a pod that was only being stopped. It now stops
 * trying: nothing was claimed, exit 75, and stderr says why.
 *
 * No PostgreSQL server is needed: the URL points at a TCP server of the test's, which either
 * never answers (a server frozen, or packets dropped past a connect) or cuts each connection
 * at once (a server going down). Its first connection is the readiness signal.
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { spawnCli, workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

interface Fake {
  port: number;
  connections: number;
  close(): Promise<void>;
}

async function fakeServer(mode: 'silent' | 'reset'): Promise<Fake> {
  const open = new Set<net.Socket>();
  const fake = { port: 0, connections: 0, close: async () => undefined as void };
  const server = net.createServer((socket) => {
    fake.connections++;
    socket.on('error', () => undefined);
    if (mode === 'reset') {
      socket.resetAndDestroy();
      return;
    }
    open.add(socket);
    socket.on('close', () => open.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.port = (server.address() as net.AddressInfo).port;
  fake.close = () => {
    for (const s of open) s.destroy();
    return new Promise((resolve) => server.close(() => resolve()));
  };
  return fake;
}

let fake: Fake | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

describe('a SIGTERM while the PostgreSQL run lock cannot be taken', () => {
  for (const [mode, what] of [
    ['silent', 'a server that accepts and never answers (the connect waits for its timeout)'],
    ['reset', 'a server that cuts every connection (the start retries within its budget)'],
  ] as const) {
    it(`${what}: the start stops trying, exit 75, nothing claimed, the password not shown`, async () => {
      fake = await fakeServer(mode);
      const ws = workspace(
        {
          name: 'stop-before-lock',
          handler: { command: ['true'] },
          state: { postgres: `postgres://cronsafe:Sekr1tPass@127.0.0.1:${fake.port}/db` },
        },
        { 'a.txt': 'a', 'b.txt': 'b' },
      );
      const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
      const f = fake;
      await until(() => f.connections >= (mode === 'reset' ? 2 : 1), 'the start to reach the server', 30_000);
      run.child.kill('SIGTERM');
      const { code, signal } = await run.exited;
      const stderr = run.stderr();
      expect({ code, signal }, `${stderr}\n${run.lines.map((l) => l.msg).join('\n')}`).toEqual({ code: 75, signal: null });
      expect(stderr).toMatch(/stopped by SIGTERM before the run lock was taken \(the last try: take the run lock on PostgreSQL 127\.0\.0\.1:\d+\/db as cronsafe/);
      expect(stderr).toContain('nothing was claimed');
      expect(run.lines.find((l) => l.msg === 'run finished')).toMatchObject({ outcome: 'drained', exitCode: 75 });
      expect(`${stderr}${run.stdout()}`).not.toContain('Sekr1tPass');
    }, 60_000);
  }
});
