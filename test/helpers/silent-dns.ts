import { spawnSync } from 'node:child_process';
import { createSocket, type Socket } from 'node:dgram';
import { afterEach } from 'vitest';

/** Root with `unshare -m`: a test can bind-mount its own /etc/resolv.conf (and /etc/hosts) over the machine's. */
export const canUnshare = process.getuid?.() === 0 && spawnSync('unshare', ['-m', 'true']).status === 0;

/**
 * A DNS server that takes every query and answers none, each on a loopback address of its
 * own (a nameserver line for a resolv.conf); closed after each test of the file that calls this.
 */
export function useSilentDns(): () => Promise<string> {
  let sink: Socket | undefined;
  afterEach(() => {
    sink?.close();
    sink = undefined;
  });
  return async () => {
    const host = `127.${1 + Math.floor(Math.random() * 250)}.${1 + Math.floor(Math.random() * 250)}.${1 + Math.floor(Math.random() * 250)}`;
    sink = createSocket('udp4');
    sink.on('message', () => undefined);
    await new Promise<void>((resolve, reject) => {
      sink!.once('error', reject);
      sink!.bind(53, host, () => resolve());
    });
    return host;
  };
}
