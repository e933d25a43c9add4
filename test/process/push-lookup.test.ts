/**
 * The Pushgateway's host name is looked up with `getent ahosts NAME` in a child process. A
 * name that getent took for one of its options (`-i`, `--service=files`, `--`: all valid URL
 * hosts) left it no key, and getent then listed the whole hosts database: the push went to
 * its first address (127.0.0.1), wherever that is, instead of failing as a name that does
 * not resolve, as Node's own lookup did before.
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

describe('a Pushgateway host name that looks like an option', () => {
  it.each(['-i', '--service=files', '--'])('%s is not found, and nothing is pushed to the hosts database\'s first address', async (host) => {
    const got: string[] = [];
    gateway = createServer((req, res) => {
      got.push(`${req.method} ${req.url}`);
      req.resume();
      res.end();
    });
    await new Promise<void>((r) => gateway!.listen(0, '127.0.0.1', r));
    const port = (gateway.address() as AddressInfo).port;
    const ws = workspace({ handler: { command: ['true'] }, metrics: { pushgateway: `http://${host}:${port}` } }, { 'a.txt': 'a' });
    const run = spawnCli(['run', '-c', ws.configPath]);
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(0);
    expect(got, 'pushes that reached 127.0.0.1').toEqual([]);
    const failed = run.lines.filter((l) => l.msg.startsWith('metrics push failed'));
    expect(failed.length, run.stderr()).toBeGreaterThan(0);
    expect(String(failed[0]!.error)).toContain(`ENOTFOUND ${host}`);
  });
});
