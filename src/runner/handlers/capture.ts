import type { Logger } from 'pino';
import { noRedact, type Redact } from '../../redact.js';

/** Bytes of stderr kept for the failure message. */
export const TAIL_BYTES = 2048;
const NEWLINE = 0x0a;

/**
 * Turns a child's stdout/stderr into log lines, one per complete line, under a byte
 * budget shared by both streams for one attempt. Past the budget the bytes are only
 * counted: the pipes are still drained, because a child blocked on a full pipe would
 * look like a hang and be killed by the timeout.
 */
export class OutputCapture {
  private logged = 0;
  private dropped = 0;
  private readonly partial: Record<Stream, Buffer> = { stdout: Buffer.alloc(0), stderr: Buffer.alloc(0) };
  private tail = Buffer.alloc(0);
  /** The tail lost its start: a secret may have been cut there. */
  private tailCut = false;

  constructor(
    private readonly log: Logger,
    private readonly maxBytes: number,
    /** Applied to every line and to the stderr tail: this is where a child's output becomes cronsafe's text. */
    private readonly redact: Redact = noRedact,
  ) {}

  /** Feed one chunk read from `stream`. */
  write(stream: Stream, chunk: Buffer): void {
    if (stream === 'stderr') {
      this.tailCut ||= this.tail.length + chunk.length > TAIL_BYTES;
      this.tail = this.tailCut ? Buffer.concat([this.tail, chunk]).subarray(-TAIL_BYTES) : Buffer.concat([this.tail, chunk]);
    }
    const room = Math.max(0, this.maxBytes - this.logged);
    const accepted = chunk.length <= room ? chunk : chunk.subarray(0, room);
    this.logged += accepted.length;
    this.dropped += chunk.length - accepted.length;

    // Split on the newline byte: it never occurs inside a multi-byte UTF-8 sequence.
    let buf = this.partial[stream].length ? Buffer.concat([this.partial[stream], accepted]) : accepted;
    let nl: number;
    while ((nl = buf.indexOf(NEWLINE)) !== -1) {
      this.emit(stream, buf.subarray(0, nl));
      buf = buf.subarray(nl + 1);
    }
    // Copy so a retained slice does not pin the whole chunk in memory.
    this.partial[stream] = Buffer.from(buf);
    // Over budget, the rest of this line will never arrive in the log: show what we have.
    if (accepted.length < chunk.length) this.flush(stream, 'end');
  }

  /**
   * Bytes the child wrote past the budget that were counted but never read here (the helper
   * that forks the child drops them: spawn-server.ts), with the last of its stderr among them.
   */
  unread(bytes: number, stderrTail: Buffer): void {
    this.dropped += bytes;
    if (stderrTail.length > 0) {
      this.tail = Buffer.concat([this.tail, stderrTail]).subarray(-TAIL_BYTES);
      this.tailCut = true;
    }
  }

  /** Log unterminated last lines and, if the budget was hit, one line saying how much was dropped. */
  end(): void {
    this.flush('stdout');
    this.flush('stderr');
    if (this.dropped > 0) {
      const fields = { droppedBytes: this.dropped, maxLogBytes: this.maxBytes };
      const msg = `handler output exceeded handler.maxLogBytes (${this.maxBytes}): dropped ${this.dropped} bytes`;
      // 0 keeps nothing on purpose: dropping is the setting at work, and a warning per attempt
      // would put back a line per item in the log it was set to keep quiet.
      if (this.maxBytes === 0) this.log.debug(fields, msg);
      else this.log.warn(fields, msg);
    }
  }

  /** The last ~2 KB of stderr, trimmed, for a failure message ('' when none). */
  stderrTail(): string {
    let start = 0;
    // A cut may land inside a multi-byte character: skip its continuation bytes.
    while (start < this.tail.length && (this.tail[start]! & 0xc0) === 0x80) start++;
    return this.redact(this.tail.subarray(start).toString('utf8'), this.tailCut ? 'start' : undefined).trim();
  }

  private flush(stream: Stream, cut?: 'end'): void {
    if (this.partial[stream].length === 0) return;
    this.emit(stream, this.partial[stream], cut);
    this.partial[stream] = Buffer.alloc(0);
  }

  private emit(stream: Stream, bytes: Buffer, cut?: 'end'): void {
    // A budget's cut inside a multi-byte character: drop its first bytes, or the line would
    // end in U+FFFD and a secret's first characters before it would not be seen as a piece.
    if (cut === 'end') bytes = bytes.subarray(0, completeEnd(bytes));
    const line = this.redact(bytes.toString('utf8').replace(/\r$/, ''), cut);
    if (line === '') return; // blank lines are noise in `kubectl logs`
    if (stream === 'stdout') this.log.info({ stream }, line);
    else this.log.warn({ stream }, line);
  }
}

/** Which pipe a chunk came from; also the `stream` field of each logged line. */
export type Stream = 'stdout' | 'stderr';

/** The length of `bytes` without an incomplete UTF-8 sequence at its end. */
function completeEnd(bytes: Buffer): number {
  for (let i = bytes.length - 1; i >= Math.max(0, bytes.length - 4); i--) {
    const b = bytes[i]!;
    if ((b & 0xc0) === 0x80) continue; // a continuation byte: look for its lead
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return bytes.length - i < need ? i : bytes.length;
  }
  return bytes.length;
}
