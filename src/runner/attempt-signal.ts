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
  /** The first listener (an attempt has one: its handler wrapper), kept without an array. */
  #first: ((reason: unknown) => void) | undefined;
  #listeners: Array<(reason: unknown) => void> | undefined;

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
    const first = this.#first;
    const listeners = this.#listeners;
    this.#first = undefined;
    this.#listeners = undefined;
    first?.(reason);
    if (listeners) for (const fn of listeners) fn(reason);
  }

  /**
   * Be told of the abort without making the AbortSignal (called at once if already
   * aborted). Returns the unsubscribe.
   */
  onAbort(fn: (reason: unknown) => void): () => void {
    if (this.#aborted) {
      fn(this.#reason);
      return () => undefined;
    }
    if (this.#first === undefined && this.#listeners === undefined) {
      this.#first = fn;
      return () => {
        if (this.#first === fn) this.#first = undefined;
      };
    }
    (this.#listeners ??= []).push(fn);
    return () => {
      const i = this.#listeners?.indexOf(fn) ?? -1;
      if (i >= 0) this.#listeners!.splice(i, 1);
    };
  }
}
