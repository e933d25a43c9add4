import { Counter, Gauge, Registry, type Metric } from 'prom-client';
import { RUN_OUTCOMES } from '../ledger/types.js';
import type { ProgressSnapshot } from '../runner/progress.js';
import type { AttemptOutcome } from '../runner/results.js';
import { histogramSamples, type PendingHandlerTimes } from './handler-times.js';
import type { LedgerView } from './ledger-view.js';

export { DURATION_BUCKETS } from './handler-times.js';

/**
 * Every cronsafe metric, declared once (docs/metrics.md lists them). All carry `job` (the
 * config name) and only low-cardinality labels; never an item id.
 *
 * Two sources:
 * - The ledger, read at collect time (each scrape or push): every total that must keep
 *   counting across short-lived pods, item counts by state, run history. A new pod reads
 *   the same numbers the last one pushed, so Prometheus never sees a counter reset.
 *   The handler-time histogram too: a run adds what it observed before each read
 *   (handler-times.ts). Counted per process, each run's push replaced the last run's
 *   histogram in the Pushgateway group without a drop Prometheus could see as a reset.
 * - This process: live gauges of the pass in progress.
 */
export const PREFIX = 'cronsafe_';

/** Results of one attempt (`cronsafe_items_processed_total{result}`, histogram `result`). */
export const RESULTS: readonly AttemptOutcome[] = ['succeeded', 'failed', 'dead', 'released', 'fenced', 'gone'];
/** Outcomes of `cronsafe_runs_total{outcome}` (all of them). `skipped-locked` comes from the lock-skip total. */
export { RUN_OUTCOMES };

export interface MetricsSources {
  /** The config name: the `job` label. */
  job: string;
  /** A ledger snapshot; `undefined` when the ledger was never readable (then nothing is shown). */
  read: () => Promise<LedgerView | undefined>;
  /** Live gauges of the pass in progress; `undefined` outside a pass. */
  live?: () => ProgressSnapshot | undefined;
  /** Where a run's observed handler times wait until they are added to the ledger (before `read`). */
  handlerTimes?: PendingHandlerTimes;
}

/**
 * `run`: every metric (a running pass serves and pushes these).
 * `ledger`: the ledger-derived ones only. A start that found the lock held pushes these
 * with POST, which replaces only the metric names it sends, so the live gauges and the
 * histogram that the running pass pushed stay as they are in the Pushgateway.
 */
export type MetricsScope = 'run' | 'ledger';

export interface CronsafeMetrics {
  /** A registry of its own (never prom-client's global one): only these metrics, no process defaults. */
  readonly registry: Registry;
  /** Handler time of one settled attempt (to `handlerTimes`, for the ledger; a no-op without it or in the `ledger` scope). */
  observeAttempt(result: AttemptOutcome, seconds: number): void;
}

type Labels = Record<string, string>;
type Samples = Array<[Labels, number | null]>;

export function createMetrics(src: MetricsSources, scope: MetricsScope): CronsafeMetrics {
  const registry = new Registry();
  const { job } = src;

  // collect() runs on every scrape/push. With no ledger snapshot at all it leaves the metric
  // empty; otherwise it replaces the values, so they are exactly what the ledger says.
  const fromLedger = (kind: 'counter' | 'gauge', name: string, help: string, labelNames: string[], samples: (v: LedgerView) => Samples) => {
    const config = { name: PREFIX + name, help, labelNames: ['job', ...labelNames], registers: [registry] };
    if (kind === 'counter') {
      return new Counter({
        ...config,
        async collect() {
          const v = await src.read();
          if (!v) return;
          this.reset();
          for (const [labels, value] of samples(v)) if (value !== null) this.inc({ job, ...labels }, value);
        },
      });
    }
    return new Gauge({
      ...config,
      async collect() {
        const v = await src.read();
        if (!v) return;
        this.reset();
        for (const [labels, value] of samples(v)) if (value !== null) this.set({ job, ...labels }, value);
      },
    });
  };
  const one = (value: number | null): Samples => [[{}, value]];
  const seconds = (ms: number | null) => (ms === null ? null : ms / 1000);

  fromLedger('counter', 'overruns_total', 'Occurrences that came due while a run was still active, plus starts that found the lock held (ledger).', [], (v) => one(v.totals.overruns));
  fromLedger('counter', 'lock_skips_total', 'Starts that found another run holding the lock and exited (ledger).', [], (v) => one(v.totals.lockSkips));
  fromLedger('counter', 'missed_occurrences_total', 'Occurrences of the schedule that no run started for (cluster down, CronJob suspended, deadline passed) (ledger).', [], (v) =>
    one(v.totals.missed),
  );
  fromLedger('counter', 'dead_lettered_total', 'Items ever moved to dead after retry.maxAttempts charged failures (ledger).', [], (v) => one(v.totals.deadLettered));
  fromLedger('counter', 'items_requeued_total', 'Items an operator put back to pending: `cronsafe requeue` and `cronsafe dead-letter retry` (ledger).', [], (v) =>
    one(v.totals.requeued),
  );
  fromLedger('counter', 'items_processed_total', 'Settled attempts by result (ledger).', ['result'], (v) =>
    RESULTS.map((result) => [{ result }, v.attempts[result]]),
  );
  fromLedger('counter', 'runs_total', 'Runs by outcome; skipped-locked counts starts that found the lock held (ledger).', ['outcome'], (v) =>
    RUN_OUTCOMES.map((outcome) => [{ outcome }, outcome === 'skipped-locked' ? v.totals.lockSkips : (v.runs.byOutcome[outcome] ?? 0)]),
  );
  fromLedger('gauge', 'dead_letter_items', 'Items dead now, waiting for `cronsafe dead-letter retry` (ledger).', [], (v) => one(v.items.dead));
  fromLedger('gauge', 'backlog_items', 'Items pending now: discovered, not done, not dead, not claimed (ledger).', [], (v) => one(v.items.pending));
  fromLedger('gauge', 'items', 'Items known to the ledger by state (ledger).', ['state'], (v) =>
    (['pending', 'claimed', 'done', 'dead'] as const).map((state) => [{ state }, v.items[state]]),
  );
  fromLedger('gauge', 'run_duration_seconds', 'Duration of the newest run: final once finished, so far while running (ledger).', [], (v) => one(v.lastRunSeconds));
  fromLedger('gauge', 'last_run_timestamp_seconds', 'Start time of the newest run, Unix seconds (ledger).', [], (v) => one(seconds(v.runs.lastStartedAt)));
  fromLedger('gauge', 'first_run_timestamp_seconds', 'Start time of the first run this ledger recorded, Unix seconds; the no-success alert counts from it until there is a success (ledger).', [], (v) =>
    one(seconds(v.runs.firstStartedAt)),
  );
  fromLedger('gauge', 'last_success_timestamp_seconds', 'End time of the newest completed run, Unix seconds; absent until one completes (ledger).', [], (v) =>
    one(seconds(v.runs.lastSuccessAt)),
  );
  fromLedger('gauge', 'consecutive_failed_runs', 'Failed (or died) runs since the last completed one, up to 20 (ledger).', [], (v) => one(v.failedInARow));

  if (scope === 'ledger') return { registry, observeAttempt: () => undefined };

  const live = (name: string, help: string, pick: (s: ProgressSnapshot) => number) =>
    new Gauge({
      name: PREFIX + name,
      help,
      labelNames: ['job'],
      registers: [registry],
      collect() {
        this.set({ job }, pick(src.live?.() ?? IDLE));
      },
    });
  live('in_flight_items', 'Items whose handler is running now in this process.', (s) => s.inFlight);
  live('queued_items', 'Item ids discovered and waiting in the bounded channel for a handler slot in this process (claimed only when started).', (s) => s.queued);
  live('scan_skipped_directories', "Directories this process's pass (running, or the one that just ended) could not read (EACCES, EPERM, ENAMETOOLONG, EMFILE, ENFILE, ENOTCONN, ESTALE, EIO) and skipped.", (s) => s.skippedDirectories);

  // From the ledger (handler-times.ts), every result from the start (zeros) so that rate()
  // and the dashboard see the series at once; nothing without a ledger read, as the others.
  const name = `${PREFIX}item_duration_seconds`;
  const help = 'Handler time per settled attempt, by result (ledger).';
  registry.registerMetric({
    name,
    help,
    type: 'histogram',
    async get() {
      const v = await src.read();
      return { name, help, type: 'histogram', aggregator: 'sum', values: v ? histogramSamples(name, v.handlerTimes, job, RESULTS) : [] };
    },
    reset: () => undefined,
  } as unknown as Metric);

  return {
    registry,
    observeAttempt(result, s) {
      src.handlerTimes?.observe(result, s);
    },
  };
}

const IDLE: ProgressSnapshot = {
  scanned: 0,
  claimed: 0,
  succeeded: 0,
  failed: 0,
  deadLettered: 0,
  released: 0,
  inFlight: 0,
  queued: 0,
  scanComplete: false,
  skippedDirectories: 0,
};
