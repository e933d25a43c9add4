import { createServer, type Server } from 'node:http';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';

/** Connections the server takes at once; more are closed as they come. */
export const MAX_CONNECTIONS = 64;

/**
 * How long a connection may stay silent (no byte either way) before it is closed. Node's
 * header and request timeouts start only with a request's first byte: a client that
 * connected and sent nothing (a port scanner, a broken client) was kept for as long as it
 * liked, and with MAX_CONNECTIONS so held every scrape was refused. A scraper sends its few
 * hundred bytes at once and the answer is rendered in milliseconds; ten seconds is generous.
 */
export const REQUEST_TIMEOUT_MS = 10_000;

/** A `/metrics` + `/healthz` endpoint for the duration of one run. */
export interface MetricsServer {
  /** The port actually bound (useful when 0 was asked for). */
  readonly port: number;
  /** Stop listening and drop open (keep-alive) connections; idempotent. */
  close(): Promise<void>;
}

export interface MetricsServerOptions {
  port: number;
  /** Default: every interface, so a PodMonitor can scrape the pod IP. */
  host?: string;
  /** What to serve; a function is asked at each request (`cronsafe daemon`: its pass's, or its own between passes). */
  registry: Registry | (() => Registry);
  log: Logger;
  /** A port in use is logged at debug, not as a warning (`cronsafe daemon` trying again between passes). */
  quiet?: boolean;
}

/**
 * Serve the registry on `port` with node:http (no framework: two routes). Resolves once
 * listening, or with `undefined` when the port cannot be bound: metrics must never fail a
 * run, so that is a warning (the Pushgateway, when set, still gets the numbers).
 */
export async function startMetricsServer(opts: MetricsServerOptions): Promise<MetricsServer | undefined> {
  const { log } = opts;
  const current = typeof opts.registry === 'function' ? opts.registry : () => opts.registry as Registry;
  const server = createServer((req, res) => {
    const url = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (url === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end('ok\n');
      return;
    }
    if (url !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found: try /metrics or /healthz\n');
      return;
    }
    const registry = current();
    registry.metrics().then(
      (body) => res.writeHead(200, { 'content-type': registry.contentType }).end(req.method === 'HEAD' ? undefined : body),
      (err: unknown) => {
        log.warn({ err }, 'metrics: could not render /metrics');
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('metrics unavailable\n');
      },
    );
  });
  // A scraper must never hold the process open after the run: no idle keep-alive past 5 s.
  server.keepAliveTimeout = 5000;
  // The port is open to whatever reaches the pod or host: connections that send nothing (a
  // port scanner, a broken client) were each kept for as long as the client liked (Node's header timeout starts with a request's first byte), a
  // file descriptor apiece. Enough of them took every descriptor the process may open, and
  // the run's scan, outputs and handlers failed with EMFILE (the daemon's growth check saw
  // nothing new, its passes failed). Past this many at once, a new connection is closed at
  // once: a few scrapers (Prometheus and its replica, an agent, an operator's curl) need one each.
  server.maxConnections = MAX_CONNECTIONS;
  // A socket silent this long is destroyed (no 'timeout' listener on the server).
  server.setTimeout(REQUEST_TIMEOUT_MS);

  const bound = await listen(server, opts.port, opts.host).catch((err: unknown) => {
    // The system's answer (EADDRINUSE, EACCES) says it all: no stack trace, which told nothing
    // and made the line a screenful.
    const e = err as NodeJS.ErrnoException;
    const said = { port: opts.port, error: e instanceof Error ? e.message : String(err), ...(typeof e?.code === 'string' ? { code: e.code } : {}) };
    log[opts.quiet ? 'debug' : 'warn'](said, 'metrics: cannot serve /metrics on this port; carrying on without it');
    return undefined;
  });
  if (bound === undefined) return undefined;
  // Belt and braces: a missed close() must not keep the CLI alive after the run.
  server.unref();
  log.debug({ port: bound }, 'metrics: serving /metrics and /healthz');

  let closing: Promise<void> | undefined;
  return {
    port: bound,
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

function listen(server: Server, port: number, host: string | undefined): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      const addr = server.address();
      resolve(typeof addr === 'object' && addr !== null ? addr.port : port);
    });
  });
}
