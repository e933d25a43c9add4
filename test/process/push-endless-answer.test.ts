/**
 * A Pushgateway (or a proxy before it) that answers a push with a body that does not end: an
 * error page streamed forever, a misrouted download. The push client read the whole answer
 * into one string before it looked at the status, so each push grew the process's memory
 * (300 MB in one 5 s push on loopback: a pod's memory limit is often less) until the push
 * timeout cut it off, and a 200 so answered was logged as a push that timed out. cronsafe now
 * reads at most 64 KiB of an answer: the status decides, and the rest is not read.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { spawnCli, workspace } from '../helpers/cli.js';

let gateway: Server | undefined;
afterEach(async () => {
  gateway?.closeAllConnections();
  await new Promise((r) => gateway?.close(r) ?? r(undefined));
  gateway = undefined;
});

/** A gateway that answers every push with `status` and a body that never ends; the most bytes it got to send one push. */
async function endlessGateway(status: number): Promise<{ port: number; most: () => number }> {
  const chunk = Buffer.alloc(1 << 20, 'x');
  let most = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      let sent = 0;
      res.writeHead(status, { 'content-type': 'text/plain' });
      const pour = () => {
        while (!res.destroyed) {
          sent += chunk.length;
          most = Math.max(most, sent);
          if (!res.write(chunk)) return;
        }
      };
      res.on('drain', pour);
      res.on('error', () => undefined);
      pour();
    });
  });
  gateway = server;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as AddressInfo).port, most: () => most };
}

describe('a Pushgateway whose answer never ends', () => {
  it('a 500: the warning gives the status at once (not a timeout), and the answer is not read on', async () => {
    const gw = await endlessGateway(500);
    const ws = workspace({ handler: { command: ['true'] }, metrics: { pushgateway: `http://127.0.0.1:${gw.port}` } }, { 'a.txt': 'a' });
    const run = spawnCli(['run', '-c', ws.configPath]);
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(0);
    const failed = run.lines.filter((l) => l.msg.startsWith('metrics push failed'));
    expect(failed.length, run.stderr()).toBeGreaterThan(0);
    for (const f of failed) {
      expect(String(f.error)).toContain('500');
      expect(String(f.error).length).toBeLessThan(2_000);
    }
    // What the kernel's socket buffers take, not hundreds of megabytes read into memory.
    expect(gw.most()).toBeLessThan(16 << 20);
  });

  it('a 200: the push landed, no warning', async () => {
    const gw = await endlessGateway(200);
    const ws = workspace({ handler: { command: ['true'] }, metrics: { pushgateway: `http://127.0.0.1:${gw.port}` } }, { 'a.txt': 'a' });
    const run = spawnCli(['run', '-c', ws.configPath]);
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(0);
    expect(run.lines.filter((l) => l.msg.startsWith('metrics push failed'))).toEqual([]);
    expect(gw.most()).toBeLessThan(16 << 20);
  });
});
