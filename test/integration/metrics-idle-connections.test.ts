/**
 * metrics.port takes at most MAX_CONNECTIONS at once (metrics-connection-flood.test.ts). A
 * client that connects and sends nothing (a port scanner, a broken client) held its slot for
 * Node's default header timeout, a minute: with every slot so held, each scrape was refused
 * for that minute. A connection now has REQUEST_TIMEOUT_MS to send its request.
 */
import { connect, type Socket } from 'node:net';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { MAX_CONNECTIONS, REQUEST_TIMEOUT_MS, startMetricsServer } from '../../src/metrics/server.js';
import { memoryLogger } from '../helpers/log.js';

describe('metrics server: connections that send nothing', () => {
  it('are closed after REQUEST_TIMEOUT_MS, so a scrape gets through again', async () => {
    const { log } = memoryLogger();
    const server = await startMetricsServer({ port: 0, host: '127.0.0.1', registry: new Registry(), log });
    if (server === undefined) throw new Error('no metrics server');
    const sockets: Socket[] = [];
    try {
      const opened = Date.now();
      const closed = await Promise.all(
        Array.from({ length: MAX_CONNECTIONS }, async () => {
          const s = connect(server.port, '127.0.0.1');
          s.on('error', () => undefined);
          sockets.push(s);
          await new Promise<void>((resolve) => s.once('connect', () => resolve()));
          // Resolves when the server closes it: the time since they were opened.
          return new Promise<number>((resolve) => s.once('close', () => resolve(Date.now() - opened)));
        }),
      );
      // Every one closed by the server well before Node's default minute (the test's own
      // timeout), and not before the client had its REQUEST_TIMEOUT_MS.
      expect(Math.min(...closed)).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 500);
      expect(Math.max(...closed)).toBeLessThan(REQUEST_TIMEOUT_MS + 5_000);
      const res = await fetch(`http://127.0.0.1:${server.port}/metrics`);
      expect(res.status).toBe(200);
      await res.text();
    } finally {
      for (const s of sockets) s.destroy();
      await server.close();
    }
  }, 40_000);
});
