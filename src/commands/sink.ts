/**
 * Command output that is either complete or reported as cut. stdout on a pipe is written
 * asynchronously by libuv: what the reader has not taken yet waits in a queue, and a
 * process.exit drops it (a slow `| jq` got exactly the first 64 KiB). So commands write
 * through a Sink, which waits for the stream to drain (bounded memory however much is
 * printed) and rejects once the reader is gone (EPIPE); and cli.ts waits for stdout to
 * flush before it exits (settleStdout).
 */

import { OutputClosed } from '../errors.js';
import { escapeForTerminal } from '../terminal-safe.js';

/** Text is buffered up to this many characters, then written; a write waits for 'drain'. */
const CHUNK = 64 * 1024;

export class Sink {
  #buf = '';
  #error: Error | undefined;
  readonly #onError = (err: Error): void => {
    this.#error ??= err;
  };

  constructor(private readonly out: NodeJS.WritableStream = process.stdout) {
    out.on('error', this.#onError);
  }

  /**
   * Queue `text`; waits while the stream is full. Rejects with OutputClosed once it failed.
   * Control characters but newline and tab, and the INVISIBLE ones, are escaped
   * (escapeForTerminal): `--json` output holds DEL, C1 and the bidirectional controls as
   * JSON.stringify leaves them, and text output the ledger's strings as they were stored.
   */
  async write(text: string): Promise<void> {
    this.#buf += escapeForTerminal(text);
    if (this.#buf.length >= CHUNK) await this.#flush();
  }

  /** Write what is buffered and wait until all of it is out; then detach. Rejects like write(). */
  async end(): Promise<void> {
    try {
      await this.#flush();
      // An empty write's callback runs once the writes before it are out. (One callback,
      // not one per chunk: a promise per chunk resolved from a write callback kept every
      // chunk alive until the event loop turned, ~200 bytes per dead item.)
      await new Promise<void>((resolve, reject) => {
        this.out.write('', (err?: Error | null) => (err ? reject(new OutputClosed(err)) : resolve()));
      });
      this.#check();
    } finally {
      this.out.off('error', this.#onError);
    }
  }

  #check(): void {
    if (this.#error) throw new OutputClosed(this.#error);
  }

  async #flush(): Promise<void> {
    this.#check();
    if (this.#buf === '') return;
    const chunk = this.#buf;
    this.#buf = '';
    if (!this.out.write(chunk)) await this.#drained();
  }

  #drained(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const done = (err?: Error): void => {
        this.out.off('drain', onDrain);
        this.out.off('error', onFail);
        this.out.off('close', onClose);
        if (err) reject(new OutputClosed(err));
        else resolve();
      };
      const onDrain = (): void => done();
      const onFail = (err: Error): void => done(err);
      const onClose = (): void => done(this.#error ?? new Error('stream closed'));
      this.out.on('drain', onDrain);
      this.out.on('error', onFail);
      this.out.on('close', onClose);
    });
  }
}

/**
 * Called by cli.ts before it exits (not for `run` and `daemon`, which log through their own
 * synchronous writer and must not have process.stdout made: on a pipe, that turns fd 1
 * non-blocking for the whole run). Waits until stdout and stderr have written out
 * everything queued (an empty write's callback runs after the writes before it) and
 * resolves with OutputClosed when stdout failed (EPIPE: the reader left early), so that the
 * exit is not 0 after a cut output.
 */
export async function settleStdout(earlier?: Error): Promise<OutputClosed | undefined> {
  let error: Error | undefined = earlier;
  const onError = (err: Error): void => {
    error ??= err;
  };
  process.stdout.on('error', onError);
  const flushed = (s: NodeJS.WriteStream): Promise<Error | undefined> =>
    new Promise((resolve) => {
      if (s.destroyed || !s.writable) return resolve(undefined);
      s.write('', (err) => resolve(err ?? undefined));
    });
  try {
    const [out] = await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
    const cut = error ?? out;
    return cut && new OutputClosed(cut);
  } finally {
    process.stdout.off('error', onError);
  }
}
