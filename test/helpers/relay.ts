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

/** One connection through a tcpProxy: the client's socket, the server's, and the client's first bytes. */
export interface ProxiedConnection {
  client: net.Socket;
  upstream: net.Socket;
  /** The client's first chunk (PostgreSQL's startup message: user, database, application_name), latin1. */
  startup: string;
}

/** What a tcpProxy does with what passes; each hook left out forwards as is. */
export interface ProxyHooks {
  /** A new connection: false keeps it here, never forwarded (a server that accepts and never answers). */
  accept?(client: net.Socket): boolean;
  /** Bytes from the client: false holds them back (never forwarded). */
  fromClient?(chunk: Buffer, conn: ProxiedConnection): boolean;
  /** Bytes from the server: false holds them back (never forwarded). */
  fromServer?(chunk: Buffer, conn: ProxiedConnection): boolean;
}

export interface TcpProxy {
  port: number;
  /** Destroy every connection open now (client and server sides). */
  cutAll: () => void;
  /** Cut every connection and stop listening. */
  close: () => Promise<void>;
}

/**
 * A TCP proxy to 127.0.0.1:`target` whose hooks see (and may hold back) each chunk, for tests
 * that need one statement's moment made certain: hold the next statement of a session, drop a
 * committed answer, accept and never answer. A closed side closes the other.
 */
export async function tcpProxy(target: number, hooks: ProxyHooks = {}): Promise<TcpProxy> {
  const open = new Set<net.Socket>();
  const track = (s: net.Socket): void => {
    open.add(s);
    s.on('error', () => undefined);
    s.on('close', () => open.delete(s));
  };
  const server = net.createServer((client) => {
    track(client);
    if (hooks.accept?.(client) === false) return;
    const upstream = net.connect(target, '127.0.0.1');
    track(upstream);
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
    const conn: ProxiedConnection = { client, upstream, startup: '' };
    client.on('data', (chunk: Buffer) => {
      if (conn.startup === '') conn.startup = chunk.toString('latin1');
      if (hooks.fromClient?.(chunk, conn) !== false) upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (hooks.fromServer?.(chunk, conn) !== false) client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const cutAll = (): void => {
    for (const s of open) s.destroy();
  };
  return {
    port: (server.address() as net.AddressInfo).port,
    cutAll,
    close: () => {
      cutAll();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** A tcpProxy that drops the answer of one statement it is armed for (answerDropper). */
export interface AnswerDropper {
  port: number;
  /** Forward the next statement `drop` picks, drop its whole answer and cut the connection. */
  arm(): void;
  /** Whether an armed answer was dropped. */
  dropped(): boolean;
  close(): Promise<void>;
}

/** Whether `buf` holds a whole ReadyForQuery message ('Z'): the server's answer is complete. */
function answered(buf: Buffer): boolean {
  let o = 0;
  while (o + 5 <= buf.length) {
    const type = String.fromCharCode(buf[o]!);
    const len = buf.readInt32BE(o + 1);
    if (o + 1 + len > buf.length) return false;
    if (type === 'Z') return true;
    o += 1 + len;
  }
  return false;
}

/**
 * A proxy to PostgreSQL at 127.0.0.1:`target` that, once armed, forwards the next statement
 * `drop(text, conn)` picks, waits for the server's whole answer (up to ReadyForQuery: it has
 * committed) and drops it, cutting the connection: a commit whose answer was lost.
 */
export async function answerDropper(target: number, drop: (text: string, conn: ProxiedConnection) => boolean): Promise<AnswerDropper> {
  let armed = false;
  let dropped = false;
  /** The answer being held back, by connection: from the armed statement on. */
  const answers = new WeakMap<ProxiedConnection, Buffer>();
  const proxy = await tcpProxy(target, {
    fromClient(chunk, conn) {
      // The pg client sends a statement and waits for its answer: what comes back from now
      // on answers this statement alone.
      if (drop(chunk.toString('latin1'), conn) && armed) {
        armed = false;
        answers.set(conn, Buffer.alloc(0));
      }
      return true;
    },
    fromServer(chunk, conn) {
      const held = answers.get(conn);
      if (held === undefined) return true;
      const answer = Buffer.concat([held, chunk]);
      answers.set(conn, answer);
      if (answered(answer)) {
        dropped = true;
        conn.upstream.destroy();
        conn.client.destroy();
      }
      return false;
    },
  });
  return { port: proxy.port, arm: () => void (armed = true), dropped: () => dropped, close: proxy.close };
}
