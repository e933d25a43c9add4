/**
 * The handler-time histogram, `cronsafe_item_duration_seconds`, kept in the ledger like every
 * other counter. Counted in each process from zero, it did not survive short-lived pods: each
 * run's push replaced the Pushgateway group's histogram with its own, a count of 2 after a run
 * of 2 attempts and 2 again after the next, which Prometheus reads as nothing happened (it sees
 * a reset only where a value goes down), so rate() and the dashboard's handler-time panels
 * counted nothing, or the difference between two runs' numbers.
 *
 * A process adds what it observed to the ledger just before each read for a scrape or a push
 * (LedgerViewReader's `beforeRead`), and at the end of a completed run that pushes nowhere,
 * one small transaction each time, never one per attempt. What is shown is the ledger's
 * total, which only grows; what a process observed and did not add (SIGKILL) was never
 * shown, so nothing goes back.
 */
import type { AttemptOutcome } from '../runner/results.js';

/** Handler time from 10 ms to an hour: cheap checks to long transcodes (timeoutSeconds is 300 by default). */
export const DURATION_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

/** Rows, as Ledger.addHandlerTimes names them: `<result>.<bucket index>` (that bucket alone; DURATION_BUCKETS.length past the last), `.count`, `.us` (the sum in microseconds). */
const row = {
  bucket: (result: AttemptOutcome, i: number) => `${result}.${i}`,
  count: (result: AttemptOutcome) => `${result}.count`,
  micros: (result: AttemptOutcome) => `${result}.us`,
};

/** Attempts observed by this process and not yet added to the ledger. */
export class PendingHandlerTimes {
  #bumps = new Map<string, number>();

  observe(result: AttemptOutcome, seconds: number): void {
    const s = Number.isFinite(seconds) && seconds > 0 ? seconds : 0;
    const i = DURATION_BUCKETS.findIndex((le) => s <= le);
    this.#add(row.bucket(result, i === -1 ? DURATION_BUCKETS.length : i), 1);
    this.#add(row.count(result), 1);
    this.#add(row.micros(result), Math.round(s * 1e6));
  }

  /** What is waiting, as Ledger.addHandlerTimes takes it. */
  peek(): Record<string, number> {
    return Object.fromEntries(this.#bumps);
  }

  /**
   * Hand what is waiting to `write` (the ledger's addHandlerTimes). Kept for the next flush
   * when the write fails: shown only once it is in the ledger. Never rejects.
   */
  async flush(write: (bumps: Record<string, number>) => Promise<void>): Promise<void> {
    if (this.#bumps.size === 0) return;
    const taken = this.#bumps;
    this.#bumps = new Map();
    try {
      await write(Object.fromEntries(taken));
    } catch {
      for (const [name, by] of taken) this.#add(name, by);
    }
  }

  #add(name: string, by: number): void {
    if (by > 0) this.#bumps.set(name, (this.#bumps.get(name) ?? 0) + by);
  }
}

export interface HistogramSample {
  metricName: string;
  labels: Record<string, string | number>;
  value: number;
}

/** The histogram's exposition (cumulative buckets, +Inf, sum, count) for each result, from the ledger's rows. */
export function histogramSamples(name: string, rows: Record<string, number>, job: string, results: readonly AttemptOutcome[]): HistogramSample[] {
  const out: HistogramSample[] = [];
  for (const result of results) {
    let seen = 0;
    DURATION_BUCKETS.forEach((le, i) => {
      seen += rows[row.bucket(result, i)] ?? 0;
      out.push({ metricName: `${name}_bucket`, labels: { le, job, result }, value: seen });
    });
    const count = rows[row.count(result)] ?? 0;
    out.push({ metricName: `${name}_bucket`, labels: { le: '+Inf', job, result }, value: count });
    out.push({ metricName: `${name}_sum`, labels: { job, result }, value: (rows[row.micros(result)] ?? 0) / 1e6 });
    out.push({ metricName: `${name}_count`, labels: { job, result }, value: count });
  }
  return out;
}
