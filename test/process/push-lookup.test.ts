/**
 * The Pushgateway's host name is looked up with `getent ahosts NAME` in a child process. A
 * name that getent took for one of its options (`-i`, `--service=files`, `--`: all valid URL
 * hosts) left it no key, and getent then listed the whole hosts database: the push went to
 * its first address (127.0.0.1), wherever that is, instead of failing as a name that does
 * not resolve, as Node's own lookup did before.
 *
 * A DNS that refuses is made with a resolv.conf bind-mounted over /etc/resolv.conf in the
 * CLI's own mount namespace (unshare -m, as push-dns-hangs.test.ts). Needs root and unshare.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI, spawnCli, spawnCliRaw, workspace } from '../helpers/cli.js';

let gateway: Server | undefined;
afterEach(async () => {
  gateway?.closeAllConnections();
  await new Promise((r) => gateway?.close(r) ?? r(undefined));
  gateway = undefined;
});

/** A stand-in Pushgateway on 127.0.0.1: what reached it, and its port. */
async function recordingGateway(): Promise<{ got: string[]; port: number }> {
  const got: string[] = [];
  const server = createServer((req, res) => {
    got.push(`${req.method} ${req.url}`);
    req.resume();
    res.end();
  });
  gateway = server;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { got, port: (server.address() as AddressInfo).port };
}

describe('a Pushgateway host name that looks like an option', () => {
  it.each(['-i', '--service=files', '--'])('%s is not found, and nothing is pushed to the hosts database\'s first address', async (host) => {
    const { got, port } = await recordingGateway();
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

const canUnshare = process.getuid?.() === 0 && spawnSync('unshare', ['-m', 'true']).status === 0;

describe.skipIf(!canUnshare)('a Pushgateway host name while the DNS refuses every query', () => {
  // Node's lookup said `getaddrinfo EAI_AGAIN NAME` (the DNS failed); getent exits 2 for that
  // as for a name that does not exist, and the warning said ENOTFOUND alone: an operator
  // went looking for a wrong Service name while CoreDNS was down. It now names both causes.
  it('the warning does not say only that the name is unknown', async () => {
    // A nameserver on a loopback address nothing listens on: each query is refused at once.
    const dns = `127.${1 + Math.floor(Math.random() * 250)}.${1 + Math.floor(Math.random() * 250)}.${1 + Math.floor(Math.random() * 250)}`;
    const ws = workspace({ handler: { command: ['true'] }, metrics: { pushgateway: 'http://pushgateway.cronsafe-test.example:9091' } }, { 'a.txt': 'a' });
    const resolv = path.join(ws.dir, 'resolv.conf');
    writeFileSync(resolv, `nameserver ${dns}\noptions timeout:1 attempts:1\n`);
    const run = spawnCliRaw(
      'unshare',
      ['-m', 'sh', '-c', 'mount --bind "$1" /etc/resolv.conf && shift && exec "$@"', 'sh', resolv, process.execPath, CLI, 'run', '-c', ws.configPath],
      { timeoutMs: 60_000 },
    );
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(0);
    const failed = run.lines.filter((l) => l.msg.startsWith('metrics push failed'));
    expect(failed.length, run.stderr()).toBeGreaterThan(0);
    expect(String(failed[0]!.error)).toContain('pushgateway.cronsafe-test.example');
    expect(String(failed[0]!.error)).toContain('or the DNS failed');
  });
});

describe('a getent that does not know the ahosts database', () => {
  // glibc's getent has `ahosts`; others (musl's, the BSDs') answer `Unknown database` and
  // exit 1. Every push failed as `ENOTFOUND localhost`, where Node's lookup had found it.
  it('the name is looked up as without getent, and the push lands', async () => {
    const { got, port } = await recordingGateway();
    const ws = workspace({ handler: { command: ['true'] }, metrics: { pushgateway: `http://localhost:${port}` } }, { 'a.txt': 'a' });
    const bin = path.join(ws.dir, 'bin');
    mkdirSync(bin);
    writeFileSync(path.join(bin, 'getent'), '#!/bin/sh\necho "Unknown database: $1" >&2\nexit 1\n', { mode: 0o755 });
    const run = spawnCli(['run', '-c', ws.configPath], { env: { PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}` } });
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(0);
    expect(run.lines.filter((l) => l.msg.startsWith('metrics push failed')), run.stderr()).toEqual([]);
    expect(got.length).toBeGreaterThan(0);
  });
});
