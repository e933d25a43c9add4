import type { Logger } from 'pino';

export interface ProgressSnapshot {
  scanned: number;
  claimed: number;
  succeeded: number;
  failed: number;
  deadLettered: number;
  released: number;
  /** Claims that ended without an attempt of ours to count: the item forgotten as gone, or fenced (another run has it). */
  gone?: number;
  fenced?: number;
  inFlight: number;
  queued: number;
  scanComplete: boolean;
  /** Directories the scan could not read and skipped. */
  skippedDirectories: number;
}

/**
 * Periodic `progress` log lines: done / total known so far, rate over the last interval,
 * and an ETA once the scan has finished (before that the total is not known).
 */
export class Progress {
  private timer: NodeJS.Timeout | undefined;
  private lastAt = 0;
  private lastDone = 0;

  constructor(
    private readonly log: Logger,
    private readonly now: () => number,
    private readonly intervalMs: number,
    private readonly snapshot: () => ProgressSnapshot,
  ) {}

  start(): void {
    this.lastAt = this.now();
    this.timer = setInterval(() => this.report(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  report(): void {
    const s = this.snapshot();
    const t = this.now();
    const finished = s.succeeded + s.failed + s.deadLettered;
    const rate = t > this.lastAt ? ((s.succeeded - this.lastDone) * 1000) / (t - this.lastAt) : 0;
    this.lastAt = t;
    this.lastDone = s.succeeded;
    // An item is claimed only when its handler starts, so the ids waiting in the channel
    // for a slot are work the pass knows of but has not claimed: they count too.
    const total = s.claimed + s.queued;
    const remaining = Math.max(0, total - finished - s.released - (s.gone ?? 0) - (s.fenced ?? 0));
    const etaSeconds = s.scanComplete && rate > 0 ? Math.round(remaining / rate) : null;
    this.log.info(
      { ...s, done: s.succeeded, total, ratePerSec: Math.round(rate * 10) / 10, etaSeconds },
      'progress',
    );
  }
}
