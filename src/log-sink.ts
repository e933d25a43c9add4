import { EventEmitter } from 'node:events';
import { constants, fstatSync, openSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';

// node:net loads the stream stack (~7 ms of every start that makes no stdio stream, a
// lock-skipped run's): only for a fd 1 that is a socket or a pipe that cannot be opened again.
const load = createRequire(import.meta.url);

/**
 * The run's and the daemon's JSON log when fd 1 is a pipe (`kubectl logs`: the container
 * runtime reads a pipe) or a socket, written without ever waiting for the reader.
 *
 * Node writes to a pipe synchronously, and a pipe takes 64 KiB. A log reader that stops
 * reading (a container runtime whose log disk is full, `cronsafe run | less` left alone)
 * froze the whole run inside write(2): no drain on SIGTERM (the kubelet's SIGKILL came
 * first, and every attempt in flight was charged), no lease or heartbeat renewal, no exit.
 * A write from a thread instead would hold up the exit just the same: Node joins its
 * threads before the process ends.
 *
 * So the sink writes through a file description of its own for the same pipe, non-blocking
 * (opening `/proc/self/fd/1` makes one; fd 1's own flags, which other processes may share,
 * are left alone; where it cannot be opened again, fd 1 itself: see forStdout). What the
 * pipe cannot take now waits in memory, in order, and is tried again every few
 * milliseconds; past `limit` bytes, lines are dropped and counted, and once the reader has
 * caught up one line says how many (`onDropped`), so memory stays bounded whatever the
 * reader does.
 *
 * A write that fails for good (EPIPE: the reader left) is said once on stderr and the rest
 * of the log is dropped: the ledger, not the log, is the run's record, and a run that died
 * of its log would leave its claims to be taken back and charged.
 *
 * cli.ts waits for `logsWritten()` before a run exits, so the final `run finished` line is
 * not lost to a slow reader; the drain's last-resort exit does not wait, so a reader that
 * never reads again cannot keep the pod past its grace period.
 */
export class StdoutSink extends EventEmitter {
  readonly #fd: number;
  readonly #limit: number;
  #queue: Buffer[] = [];
  #queued = 0;
  #timer: NodeJS.Timeout | undefined;
  #dropped = 0;
  #failed = false;
  #waiters: (() => void)[] = [];
  /** Called, once the queue is empty again, with the number of lines dropped meanwhile. */
  onDropped: ((lines: number) => void) | undefined;
  /**
   * Lines not to drop past the limit (`run finished`: the run's one record of its outcome in
   * the log, written last, when the queue is likeliest full). They take a reserve of their
   * own, KEEP_RESERVE_BYTES, so that memory stays bounded whatever matches.
   */
  keep: ((line: string) => boolean) | undefined;

  private constructor(fd: number, limit: number) {
    super();
    this.#fd = fd;
    this.#limit = limit;
    sinks.add(this);
  }

  /**
   * A sink for fd 1 when it is a pipe (or FIFO) or a socket; null otherwise (a file, a
   * terminal: written synchronously, as before; they do not stall on a reader).
   */
  static forStdout(limit = DEFAULT_LIMIT_BYTES, fd = 1): StdoutSink | null {
    let socket: boolean;
    try {
      const st = fstatSync(fd);
      socket = st.isSocket();
      if (!st.isFIFO() && !socket) return null;
    } catch {
      return null;
    }
    // A socket cannot be opened by path (ENXIO): fd 1 itself, below.
    if (!socket) {
      try {
        return new StdoutSink(openSync(`/proc/self/fd/${fd}`, constants.O_WRONLY | constants.O_NONBLOCK), limit);
      } catch (err) {
        // A named pipe whose reader is already gone: written synchronously, which says so (EPIPE).
        if ((err as NodeJS.ErrnoException).code === 'ENXIO') return null;
      }
    }
    // A Unix socket (a Node parent's `stdio: 'pipe'`, systemd's journal stream), or a pipe
    // that cannot be opened again: no /proc, or (EACCES) a pipe that the container runtime
    // made as root, mode 0600, for a process running as another user (the image's
    // `USER 65532`, `runAsNonRoot`): the usual container. fd 1 itself is made non-blocking
    // then, as Node makes it for process.stdout (which is that stream, made here), and Node
    // puts its flags back when the process exits.
    try {
      const { Socket } = load('node:net') as typeof import('node:net');
      const stream = fd === 1 ? process.stdout : new Socket({ fd, readable: false, writable: true });
      if (!(stream instanceof Socket)) return null; // not a libuv pipe: not made non-blocking
      if (fd !== 1) keptOpen.push(stream); // its handle owns the fd: never collected, never closed
      return new StdoutSink(fd, limit);
    } catch {
      return null;
    }
  }

  write(line: string): boolean {
    if (this.#failed) return true;
    const bytes = Buffer.byteLength(line);
    if (this.#queued > 0) {
      const fits = this.#queued + bytes <= this.#limit || (this.#queued + bytes <= this.#limit + KEEP_RESERVE_BYTES && this.keep?.(line) === true);
      if (fits) this.#enqueue(Buffer.from(line, 'utf8'));
      else this.#dropped++;
      return true;
    }
    const buf = Buffer.from(line, 'utf8');
    const n = this.#put(buf);
    if (n >= 0 && n < buf.length) this.#enqueue(buf.subarray(n));
    return true;
  }

  /** pino's `logger.flush(cb)`. */
  flush(cb?: (err?: Error) => void): void {
    void this.written().then(() => cb?.());
  }

  /** Settles once everything written so far has reached the pipe, or cannot (never rejects). */
  written(): Promise<void> {
    if (this.#failed || (this.#queued === 0 && this.#dropped === 0)) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Bytes the pipe took now (0 when full), or -1 when it failed for good. */
  #put(buf: Buffer): number {
    try {
      return writeSync(this.#fd, buf);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EAGAIN') return 0;
      this.#fail(err as NodeJS.ErrnoException);
      return -1;
    }
  }

  #enqueue(buf: Buffer): void {
    this.#queue.push(buf);
    this.#queued += buf.length;
    // Keeps the process alive while lines wait: cli.ts's wait for them must not find an
    // empty event loop.
    this.#timer ??= setTimeout(() => this.#retry(), RETRY_MS);
  }

  #retry(): void {
    this.#timer = undefined;
    while (this.#queue.length > 0 && !this.#failed) {
      // Whole lines, at most PIPE_BUF bytes together, go in one write: the kernel then takes
      // all of it or none, so an exit with lines still waiting (the drain's last resort)
      // leaves no half line in the log. A longer line goes alone, and may be split.
      let count = 1;
      let bytes = this.#queue[0]!.length;
      while (count < this.#queue.length && bytes + this.#queue[count]!.length <= PIPE_BUF) bytes += this.#queue[count++]!.length;
      const buf = count === 1 ? this.#queue[0]! : Buffer.concat(this.#queue.slice(0, count), bytes);
      const n = this.#put(buf);
      if (n < 0) return;
      this.#queued -= n;
      if (n < buf.length) {
        this.#queue.splice(0, count, buf.subarray(n));
        this.#timer ??= setTimeout(() => this.#retry(), RETRY_MS);
        return;
      }
      this.#queue.splice(0, count);
      if (this.#queue.length === 0 && this.#dropped > 0) {
        const lines = this.#dropped;
        this.#dropped = 0;
        this.onDropped?.(lines); // queues its line if the pipe is full again
      }
    }
    this.#settle();
  }

  #settle(): void {
    if (this.#queued > 0 && !this.#failed) return;
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
  }

  #fail(err: NodeJS.ErrnoException): void {
    this.#failed = true;
    this.#queue = [];
    this.#queued = 0;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    try {
      process.stderr.write(`cronsafe: cannot write the log to stdout (${err.code ?? err.message}); carrying on without it\n`);
    } catch {
      // stderr failed too: nothing left to tell.
    }
    this.#settle();
  }
}

/** 8 MiB: ~20,000 lines of a failing item with its error; past that lines are dropped. */
const DEFAULT_LIMIT_BYTES = 8 * 1024 * 1024;
/** Past the limit, room for the lines `keep` asks for: `run finished`, a few kB each. */
const KEEP_RESERVE_BYTES = 256 * 1024;
const RETRY_MS = 10;
const keptOpen: Socket[] = [];
/** Linux's PIPE_BUF: a write to a pipe of at most this many bytes is never split. */
const PIPE_BUF = 4096;

// On globalThis: cli.ts imports this module itself, apart from the program, which it loads
// as one CommonJS script with its own copy of every module (src/code-cache.ts).
const SINKS = Symbol.for('cronsafe.stdoutSinks');
const registry = globalThis as typeof globalThis & { [SINKS]?: Set<{ written(): Promise<void> }> };
const sinks = (registry[SINKS] ??= new Set());

/** Every sink's lines written (or given up on): what a run waits for before it exits. */
export async function logsWritten(): Promise<void> {
  await Promise.all([...sinks].map((s) => s.written()));
}
