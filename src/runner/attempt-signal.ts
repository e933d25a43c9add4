/**
 * One attempt's abort state, with its AbortSignal made only when someone reads it.
 * On Node 20 creating an AbortSignal costs ~8 us (more than the whole ledger write of a
 * no-op item), and most handlers never look at it: a module handler that ignores
 * `ctx.signal` must not pay for it on every item.
 */
export class AttemptSignal {
  #ctl: AbortController | undefined;
  #aborted = false;
  #reason: unknown;

  /** The attempt's AbortSignal (created on first read; already aborted if the attempt was). */
  get signal(): AbortSignal {
    if (this.#ctl === undefined) {
      this.#ctl = new AbortController();
      if (this.#aborted) this.#ctl.abort(this.#reason);
    }
    return this.#ctl.signal;
  }

  get aborted(): boolean {
    return this.#aborted;
  }

  get reason(): unknown {
    return this.#reason;
  }

  abort(reason?: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#ctl?.abort(reason);
  }
}
