/**
 * The two-signal drain state machine (graphile-worker's model), driven by AbortSignals so
 * that only cli.ts touches process signals:
 *
 *   running --stop--> stopping: claim nothing more; in-flight items may finish
 *   stopping --deadline (grace - margin after the stop) or force--> aborting: cut in-flight items short
 *
 * The deadline is measured from the moment of the stop, so the process exits inside the
 * pod's terminationGracePeriodSeconds with `margin` left for hand-back and exit.
 */
export interface DrainOptions {
  stop: AbortSignal;
  force: AbortSignal;
  gracePeriodMs: number;
  marginMs: number;
}

/** Why an in-flight attempt was aborted; handlers read `killAfterMs` to bound their kill sequence. */
export class AbortReason extends Error {
  override name = 'AbortReason';
  constructor(
    message: string,
    /** How long a handler may wait between SIGTERM and SIGKILL to its children. */
    readonly killAfterMs: number,
  ) {
    super(message);
  }
}

export class Drain {
  private readonly stopCtl = new AbortController();
  private readonly abortCtl = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private readonly cleanups: Array<() => void> = [];
  /** Epoch ms of the stop request, if any. */
  stoppedAt: number | null = null;

  /** Aborted when claiming must stop. */
  readonly stopping: AbortSignal = this.stopCtl.signal;
  /** Aborted when in-flight items must be cut short; `reason` is an AbortReason. */
  readonly aborting: AbortSignal = this.abortCtl.signal;

  constructor(private readonly opts: DrainOptions) {
    this.listen(opts.stop, () => this.requestStop(String(opts.stop.reason ?? 'stop requested')));
    this.listen(opts.force, () =>
      this.abortNow(new AbortReason(`aborted at once: ${String(opts.force.reason ?? 'second signal')}`, this.killAfterMs())),
    );
  }

  /** Time budget for aborted children to die before we must be gone. */
  killAfterMs(): number {
    return Math.max(200, Math.floor(this.opts.marginMs / 3));
  }

  requestStop(reason: string): void {
    if (this.stopCtl.signal.aborted) return;
    this.stoppedAt = Date.now();
    this.stopCtl.abort(reason);
    const budget = Math.max(0, this.opts.gracePeriodMs - this.opts.marginMs);
    this.timer = setTimeout(
      () => this.abortNow(new AbortReason(`drain deadline reached ${budget / 1000}s after ${reason}`, this.killAfterMs())),
      budget,
    );
    this.timer.unref();
  }

  abortNow(reason: AbortReason): void {
    if (!this.stopCtl.signal.aborted) {
      this.stoppedAt = Date.now();
      this.stopCtl.abort(reason.message);
    }
    if (!this.abortCtl.signal.aborted) this.abortCtl.abort(reason);
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    for (const c of this.cleanups.splice(0)) c();
  }

  private listen(signal: AbortSignal, fn: () => void): void {
    if (signal.aborted) {
      fn();
      return;
    }
    signal.addEventListener('abort', fn, { once: true });
    this.cleanups.push(() => signal.removeEventListener('abort', fn));
  }
}

/**
 * How long a handler may give its work to stop after an abort: its own killAfter, or less
 * when the abort reason (the drain) grants less.
 */
export function killBudgetMs(reason: unknown, defaultMs: number): number {
  const budget = reason instanceof AbortReason ? reason.killAfterMs : undefined;
  return typeof budget === 'number' && budget >= 0 ? Math.min(defaultMs, budget) : defaultMs;
}

/**
 * A signal that aborts when the first of `signals` does (with its reason), and a dispose
 * that removes the listeners. The run's stop is the CLI's signal, a lost Kubernetes Lease
 * or a lost PostgreSQL run lock: any of them means stop claiming and drain.
 */
export function firstAbort(...signals: Array<AbortSignal | undefined>): { signal: AbortSignal; dispose(): void } {
  const present = signals.filter((s): s is AbortSignal => s !== undefined);
  if (present.length === 1) return { signal: present[0]!, dispose: () => undefined };
  const ctl = new AbortController();
  const offs = present.map((s) => {
    const on = () => ctl.abort(s.reason);
    s.addEventListener('abort', on, { once: true });
    return () => s.removeEventListener('abort', on);
  });
  const already = present.find((s) => s.aborted);
  if (already) ctl.abort(already.reason);
  return { signal: ctl.signal, dispose: () => offs.forEach((off) => off()) };
}
