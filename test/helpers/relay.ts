/**
 * A TCP relay to 127.0.0.1:`target` standing for the network between a pod and its
 * database. Cut, it stops forwarding in both directions (bytes and closes are held, new
 * connections are accepted and get no answer), as a partition that drops packets does;
 * healed, it delivers what it held, in order. `cut(reset)` also resets, at once, the
 * connections whose first bytes (PostgreSQL's startup message: user, database,
 * application_name) `reset` picks, as a middlebox that times a connection out does.
 */
import net from 'node:net';
import { afterAll, beforeAll } from 'vitest';
import type { Running } from './cli.js';
import { startPostgres, type PgServer } from './postgres.js';

export interface Relay {
  port: number;
  cut(reset?: (startup: Buffer) => boolean): void;
  heal(): void;
  close(): void;
}

export async function relay(target: number): Promise<Relay> {
  let cut = false;
  let held: Array<() => void> = [];
  const sockets = new Set<net.Socket>();
  const pairs = new Map<net.Socket, { upstream: net.Socket; startup?: Buffer }>();
  const deliver = (fn: () => void) => (cut ? held.push(fn) : fn());
  const server = net.createServer((client) => {
    const upstream = net.connect(target, '127.0.0.1');
    const pair: { upstream: net.Socket; startup?: Buffer } = { upstream };
    pairs.set(client, pair);
    client.once('data', (chunk: Buffer) => (pair.startup = chunk));
    client.once('close', () => pairs.delete(client));
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      sockets.add(from);
      from.on('data', (chunk: Buffer) => deliver(() => to.write(chunk)));
      from.on('close', () => deliver(() => to.destroy()));
      from.on('error', () => undefined);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    cut: (reset) => {
      cut = true;
      if (reset === undefined) return;
      for (const [client, { upstream, startup }] of pairs) {
        if (startup === undefined || !reset(startup)) continue;
        client.resetAndDestroy();
        upstream.destroy();
      }
    },
    heal: () => {
      cut = false;
      const h = held;
      held = [];
      for (const fn of h) fn();
    },
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

/**
 * The hooks of a PostgreSQL test behind a relay: beforeAll starts the server (`started` gets
 * it); afterAll heals and closes the relay, SIGKILLs the CLI processes still running, and
 * stops the server (`left` says what there is by then).
 */
export function postgresBehindRelay(started: (server: PgServer) => void, left: () => { server: PgServer | undefined; link: Relay | undefined; running: Running[] }): void {
  beforeAll(async () => started(await startPostgres()));
  afterAll(async () => {
    const { server, link, running } = left();
    link?.heal();
    for (const r of running) if (r.child.exitCode === null) r.child.kill('SIGKILL');
    link?.close();
    await server?.stop();
  });
}
