import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { coerceError } from '../errors.js';
import { lenientDecode } from '../redact.js';
import { killableLookup } from '../lookup.js';

/**
 * `put` replaces the whole group (a run: it owns every metric). `post` replaces only the
 * metric names it sends (a skipped start: ledger-derived metrics only, so the running
 * pass's live gauges and histogram in the group are left alone).
 */
export type PushMethod = 'put' | 'post';

export interface PusherOptions {
  /** metrics.pushgateway, e.g. http://pushgateway:9091 (may carry credentials; never logged). */
  url: string;
  /** The config name: the only grouping label (see docs/metrics.md, "Pushgateway grouping"). */
  job: string;
  registry: Registry;
  log: Logger;
  /** Hard bound on one push, connect to last byte. */
  timeoutMs: number;
  method: PushMethod;
  /**
   * Asked before each push; false skips it. Used to not push when the ledger cannot be read
   * for this push: never readable, an empty group would replace the last good totals; read
   * before, the last values read may be older than what another pod pushed since. Otherwise
   * a function, called once this push's request is over (landed, failed or cut off).
   */
  ready?: () => Promise<false | (() => void)>;
}

/**
 * Pushes a registry to a Pushgateway under `/metrics/job/<job>`: one group per cronsafe
 * job, without pod or instance labels, so each push replaces the previous pod's series
 * instead of adding new ones. Pushes are serialised (each waits for the previous answer, so
 * an older push does not land after a newer one, short of a timed-out request that the
 * gateway still applies late) and bounded by `timeoutMs`. A failure is a warning, never an error: metrics
 * must not fail a run. `push()` never rejects.
 */
export class Pusher {
  private chain: Promise<unknown> = Promise.resolve();
  private inFlight: AbortController | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly where: string;
  /** A skipped push (ledger unreadable) was warned about since the last push that landed: the next ones are debug. */
  private skipTold = false;
  /**
   * What goes on beside a push that fails, said in its warning. A run's push (PUT) fails
   * beside a pass that goes on, until the run drains or ends (besides()); a ledger-only push
   * (POST: a skipped start, an operator's retry or requeue) beside a change already made.
   */
  private beside: string;

  constructor(private readonly opts: PusherOptions) {
    this.where = displayUrl(opts.url);
    this.beside = opts.method === 'put' ? 'the run carries on' : 'nothing else is affected';
  }

  /**
   * What a failed push's warning says goes on beside it from now on: after a drain began or
   * the run ended, "the run carries on" was said of a run that was stopping or over.
   */
  besides(what: string): void {
    this.beside = what;
  }

  /**
   * Push after any push in progress has ended. Never aborts that one to go first: a body
   * already sent may still be applied by the gateway after ours, older values winning.
   * Resolves true when it landed.
   */
  push(reason: string): Promise<boolean> {
    const next = this.chain.then(() => this.once(reason));
    this.chain = next;
    return next;
  }

  /** Push every `intervalMs` until stop(); a tick is skipped while a push is still on its way. */
  start(intervalMs: number): void {
    this.stop();
    this.timer = setInterval(() => {
      if (this.inFlight === undefined) void this.push('interval');
    }, intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private async once(reason: string): Promise<boolean> {
    const { log, timeoutMs } = this.opts;
    const ctl = new AbortController();
    this.inFlight = ctl;
    const stage: Stage = { reading: false };
    let timer: NodeJS.Timeout | undefined;
    // Abort the request and also race it: the bound must hold even if the client ignored the signal.
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const err = new Error(`timed out after ${timeoutMs} ms`);
        ctl.abort(err);
        reject(err);
      }, timeoutMs);
    });
    try {
      await Promise.race([this.send(ctl.signal, stage), timedOut]);
      log.debug({ url: this.where, reason }, 'metrics: pushed to the Pushgateway');
      this.skipTold = false;
      return true;
    } catch (err) {
      // Cut off while still reading the ledger (PostgreSQL down: its reads retry for up to
      // 30 s) is a skipped push too, not a failed one: said as one, every push through the
      // outage was a `metrics push failed ... timed out` warning, which pointed at the gateway.
      if (err instanceof NotReady || stage.reading) {
        // Said once until a push lands again: the reader logs the outage itself, and a
        // periodic push every 30 s through an hour's outage would repeat this 120 times.
        const msg = 'metrics: not pushing, the ledger could not be read (the Pushgateway keeps what was pushed last)';
        if (this.skipTold) log.debug({ url: this.where, reason }, msg);
        else log.warn({ url: this.where, reason }, msg);
        this.skipTold = true;
      } else {
        const message = boundedMessage(coerceError(err).message);
        log.warn({ url: this.where, reason, error: message, timeoutMs }, `metrics push failed (${this.beside})`);
      }
      return false;
    } finally {
      clearTimeout(timer);
      if (this.inFlight === ctl) this.inFlight = undefined;
    }
  }

  private async send(signal: AbortSignal, stage: Stage): Promise<void> {
    stage.reading = true;
    const over = this.opts.ready ? await this.opts.ready() : () => undefined;
    stage.reading = false;
    if (over === false) throw new NotReady();
    try {
      await this.request(signal);
    } finally {
      over();
    }
  }

  private async request(signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    const { base, auth } = gatewayTarget(this.opts.url);
    const target = new URL(base);
    target.pathname = `${target.pathname.replace(/\/+$/, '')}/metrics/job/${encodeURIComponent(this.opts.job)}`;
    const body = await this.opts.registry.metrics();
    signal.throwIfAborted();
    const { answer, text } = await send(target, body, {
      method: this.opts.method === 'put' ? 'PUT' : 'POST',
      contentType: this.opts.registry.contentType,
      timeoutMs: this.opts.timeoutMs,
      signal,
      auth,
    });
    const status = answer.statusCode ?? 0;
    if (status >= 400) throw new Error(`push failed with status ${status}, ${text}`);
    // Any answer below 400 is no failure to an HTTP client, and none follows a redirect here:
    // a 3xx (an ingress sending http:// on to https://, a path the gateway "cleans") would pass
    // for a push that landed.
    if (status < 200 || status > 299) {
      const location = answer.headers.location;
      const where = location ? `, redirecting to ${redirectTarget(location, this.opts.url)}` : '';
      throw new Error(`the Pushgateway answered ${status}${where}; nothing was pushed`);
    }
  }
}

/**
 * The most of an answer's body that is read: what a warning quotes of it (MESSAGE_MAX) and
 * more. prom-client's push read the whole answer into one string before it looked at the
 * status: a gateway or proxy answering with a body that does not end (an error page streamed
 * forever, a misrouted download) grew the process's memory by hundreds of megabytes in one
 * push, until the push timeout, and a 200 so answered was a push that "timed out".
 */
const ANSWER_MAX = 64 * 1024;

interface SendOptions {
  method: 'PUT' | 'POST';
  contentType: string;
  timeoutMs: number;
  signal: AbortSignal;
  auth: string | undefined;
}

/** One request to the gateway: the answer and at most ANSWER_MAX bytes of its body (the rest is not read). */
function send(target: URL, body: string, o: SendOptions): Promise<{ answer: IncomingMessage; text: string }> {
  return new Promise((resolve, reject) => {
    const request = target.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = request(
      target,
      {
        method: o.method,
        headers: { 'content-type': o.contentType, 'content-length': Buffer.byteLength(body) },
        timeout: o.timeoutMs,
        signal: o.signal,
        lookup: killableLookup(o.signal),
        ...(o.auth === undefined ? {} : { auth: o.auth }),
      },
      (answer) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const done = () => resolve({ answer, text: Buffer.concat(chunks).toString('utf8') });
        answer.on('data', (chunk: Buffer) => {
          chunks.push(chunk.subarray(0, ANSWER_MAX - size));
          size += chunk.length;
          if (size < ANSWER_MAX) return;
          // Enough read: the rest is not, and the connection is not reused for another push.
          done();
          answer.destroy();
          req.destroy();
        });
        answer.on('end', done);
        answer.on('error', reject);
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('Pushgateway request timed out')));
    req.end(body);
  });
}

/**
 * The gateway's URL without credentials or a trailing slash, and its credentials apart.
 * `/metrics/job/<name>` is appended to the path: with a path prefix's trailing slash
 * (`http://gw/pgw/`) it became `/pgw//metrics/...`, which the Pushgateway answers with a
 * redirect, not a push. A user and password left in the URL are percent-decoded leniently
 * (prom-client, which sent the pushes before, threw on a `%` that starts no `%XX` escape,
 * "URI malformed", at every push): a password from a Secret through `${VAR}` is often not
 * percent-encoded, and such a `%` is sent as itself (lenientDecode, as the redaction also
 * reads it).
 */
function gatewayTarget(raw: string): { base: string; auth?: string } {
  const u = new URL(raw);
  u.pathname = u.pathname.replace(/\/+$/, '');
  const user = lenientDecode(u.username);
  const password = lenientDecode(u.password);
  u.username = '';
  u.password = '';
  if (user === '' && password === '') return { base: u.toString() };
  // Always `user:password`, the ':' too when the password is empty (a token given as the user,
  // `https://TOKEN@gw`): RFC 7617 needs it, and the Pushgateway (Go's BasicAuth) refuses without.
  return { base: u.toString(), auth: `${user}:${password}` };
}

class NotReady extends Error {}

/** Where one push is: `reading` while it waits for the ledger (ready()), before its request. */
interface Stage {
  reading: boolean;
}

/**
 * Where a 3xx points, for the warning: the URL without credentials, or, when the Location is
 * no URL (a broken proxy rule), says so: new URL()'s own `Invalid URL` read as if
 * metrics.pushgateway were wrong, and lost the status.
 */
function redirectTarget(location: string, base: string): string {
  let target: URL;
  try {
    target = new URL(location, base);
  } catch {
    return 'a Location that is not a URL (the gateway or a proxy before it is misconfigured)';
  }
  return `${displayUrl(target.toString())} (set metrics.pushgateway to that URL)`;
}

/** What of a failed push's message goes to the log (it quotes the answer's body, up to ANSWER_MAX). */
const MESSAGE_MAX = 1024;

/**
 * A failed push's message, cut at MESSAGE_MAX characters: a gateway (or the proxy before
 * it) that answers 400 with a page of HTML or a 100 KB body would put it into a warning at
 * every push.
 */
function boundedMessage(message: string): string {
  return message.length <= MESSAGE_MAX ? message : `${message.slice(0, MESSAGE_MAX)}... (${message.length - MESSAGE_MAX} more characters not logged)`;
}

/** The URL for logs: no user, password or query (any of which may hold a secret). */
export function displayUrl(raw: string): string {
  try {
    const u = new URL(raw);
    u.username = '';
    u.password = '';
    u.search = '';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}
