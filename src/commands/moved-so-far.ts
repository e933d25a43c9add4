/**
 * What `requeue` and `dead-letter retry` have moved so far, page by page, for cli.ts to say
 * when a signal ends them: each page is its own transaction, so the pages written before
 * the signal stay moved, and an operator who pressed Ctrl-C on a big ledger must know how
 * many (exiting with 130 and nothing said left them guessing).
 */
/**
 * Between two pages: lets the event loop run, so that a signal is handled there. On SQLite
 * each page's read and write are synchronous, and a loop of them never reached the
 * signal's handler: Ctrl-C on `requeue --all` waited for the last page, then exited 130.
 */
export const betweenPages = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export class MovedSoFar {
  #moved = 0;
  /** Items of the page being written (0 between pages; undefined: a last sweep of unknown size). */
  #writing: number | undefined = 0;
  /** Every page written: the command's own report says the rest. */
  #over = false;
  /** The errors failed() has told already. */
  readonly #told = new WeakSet<Error>();

  constructor(private readonly what: string) {}

  /** One page's write: counted once it is committed. */
  async page<T>(size: number | undefined, write: () => Promise<T>, moved: (out: T) => number): Promise<T> {
    this.#writing = size;
    try {
      const out = await write();
      this.#moved += moved(out);
      return out;
    } finally {
      this.#writing = 0;
    }
  }

  /**
   * Pages written by the ledger itself (retryDead('all')), told through `onPage`: until it
   * returns, a page of `pageSize` may be in flight (0: never at a signal, as on SQLite).
   */
  async pages<T>(pageSize: number, write: (onPage: (moved: number) => void) => Promise<T>): Promise<T> {
    this.#writing = pageSize;
    try {
      return await write((n) => (this.#moved += n));
    } finally {
      this.#writing = 0;
    }
  }

  /** Every page is written. */
  over(): void {
    this.#over = true;
  }

  /**
   * The store's error that ended the command after some pages were written, saying so: the
   * error alone read as if nothing had moved, and the pages before it stay moved.
   */
  failed<E extends Error>(err: E): E {
    // Said once: a write's error is told here, and again by the command around it.
    if (this.#told.has(err)) return err;
    this.#told.add(err);
    if (this.#moved > 0) err.message += `; ${this.#count()} requeued before the error stay requeued (pending again, attempts reset): run the same command again to requeue the rest`;
    return err;
  }

  /**
   * The command's report could not be written whole (`requeue --json | true`: a reader that
   * left, a full disk) after every page was: exit 1 as for any cut report (docs/operations.md),
   * and the line says that the move itself stands. "output incomplete" alone read as if the
   * requeue had failed, and a script that retried it requeued nothing the second time.
   */
  reportCut<E extends Error>(err: E): E {
    err.message += `; the ${this.what === 'item' ? 'requeue' : 'retry'} itself was done: ${this.#count()} requeued (pending again, attempts reset)`;
    return err;
  }

  /** `what` pending again: what the report should have said ("requeued 3 items"). */
  #count(): string {
    return `${this.#moved} ${this.what}${this.#moved === 1 ? '' : 's'}`;
  }

  /** The line cli.ts writes to stderr when a signal ends the command (none once every page is written). */
  note(signal: string): string | undefined {
    if (this.#over) return undefined;
    const n = this.#count();
    // On PostgreSQL a page's transaction may be committing when the process exits: the server
    // commits it whole or not at all, and which one cannot be known from here.
    const page = this.#writing === undefined ? 'the last few' : `the page of ${this.#writing}`;
    const inFlight = this.#writing !== 0 ? `, and maybe ${page} being written at the signal (moved whole or not at all)` : '';
    return `interrupted by ${signal}: requeued ${n} before the signal (pending again, attempts reset)${inFlight}; the rest were not: run the same command again to requeue them`;
  }
}
