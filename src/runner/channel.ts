/**
 * A bounded async channel between the scanner (one producer) and the dispatcher.
 * `send` waits while the buffer is full: that wait is what keeps memory flat, because the
 * scanner cannot run ahead of the workers by more than `capacity` items.
 */
export class Channel<T> {
  private readonly buffer: T[] = [];
  private readonly senders: Array<() => void> = [];
  private readonly receivers: Array<(r: IteratorResult<T>) => void> = [];
  #closed = false;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new TypeError(`Expected capacity to be an integer from 1 and up, got ${capacity}`);
    }
  }

  get size(): number {
    return this.buffer.length;
  }

  /** True once close() was called (values may still be buffered). */
  get closed(): boolean {
    return this.#closed;
  }

  /** Resolves once the value is buffered or handed to a receiver. Throws if closed. */
  async send(value: T): Promise<void> {
    while (!this.offer(value)) await new Promise<void>((resolve) => this.senders.push(resolve));
  }

  /**
   * send without waiting: true when the value was buffered or handed to a receiver, false
   * when the buffer is full (nothing done). Throws if closed. The producer offers each id
   * and waits (send) only when full: an awaited send per id cost two promises and their
   * microtask turns even when there was room.
   */
  offer(value: T): boolean {
    if (this.#closed) throw new Error('send on a closed channel');
    const receiver = this.receivers.shift();
    if (receiver) {
      receiver({ value, done: false });
      return true;
    }
    if (this.buffer.length < this.capacity) {
      this.buffer.push(value);
      return true;
    }
    return false;
  }

  /** Next value, or `done` once closed and empty. */
  receive(): Promise<IteratorResult<T>> {
    const value = this.buffer.shift();
    if (value !== undefined) {
      this.senders.shift()?.();
      return Promise.resolve({ value, done: false });
    }
    if (this.#closed) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => this.receivers.push(resolve));
  }

  /** Up to `n` buffered values, without waiting (possibly none); blocked senders resume. */
  take(n: number): T[] {
    const out = this.buffer.splice(0, Math.max(0, n));
    for (let i = 0; i < out.length; i++) this.senders.shift()?.();
    return out;
  }

  /** No more sends; receivers finish after the buffer empties; blocked senders throw. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const r of this.receivers.splice(0)) r({ value: undefined, done: true });
    for (const s of this.senders.splice(0)) s();
  }

  /** Close and take everything still buffered (drain hands these claims back). */
  closeAndTake(): T[] {
    const rest = this.buffer.splice(0);
    this.close();
    return rest;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for (;;) {
      const r = await this.receive();
      if (r.done) return;
      yield r.value;
    }
  }
}
