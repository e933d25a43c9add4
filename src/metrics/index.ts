import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Config } from '../config/types.js';
import type { Ledger } from '../ledger/types.js';
import type { LastRead, LedgerReads } from './ledger-view.js';
import type { PassObserver, PassOutcome } from '../runner/pass.js';
import type { ProgressSnapshot } from '../runner/progress.js';

// prom-client (and @opentelemetry/api under it) is loaded only by a run that serves or
// pushes metrics: most starts (a lock skip without a Pushgateway, `validate`, `status`)
// never touch it, and it is a good part of the CLI's start-up time when loaded eagerly.
const loadMetrics = async () => {
  const [{ LedgerViewReader }, { Pusher }, { createMetrics }, { PendingHandlerTimes }] = await Promise.all([
    import('./ledger-view.js'),
    import('./push.js'),
    import('./registry.js'),
    import('./handler-times.js'),
  ]);
  return { LedgerViewReader, Pusher, createMetrics, PendingHandlerTimes };
};

/** The metrics of one run, as the run command drives them. No method throws or rejects. */
export interface RunMetrics {
  /** Give to runPass: per-attempt histogram and the live in-flight / queued gauges. */
  readonly observer: PassObserver;
  /** The run is recorded in the ledger: push at once, then every metrics.pushIntervalSeconds. */
  /**
   * The run started: push, then push every interval until `draining` aborts (the drain's
   * start) or the run finishes. A periodic push in flight when the drain deadline comes
   * would make the final push wait for it, past the kubelet's SIGKILL.
   */
  runStarted(draining?: AbortSignal): void;
  /** The run's end is recorded in the ledger: final push (awaited, bounded by the push timeout). */
  runFinished(outcome: PassOutcome): Promise<void>;
  /** Stop pushing and serving; pushes first if runFinished never did (a run that threw). Idempotent. */
  close(): Promise<void>;
}

export interface MetricsDeps {
  config: Config;
  /** Open for as long as the metrics are: close() the metrics before the ledger. */
  ledger: Ledger;
  log: Logger;
  now?: () => number;
  /**
   * metrics.port is already served by a server that outlives the run (`cronsafe daemon`):
   * the run shows its metrics there while it lasts instead of opening the port itself.
   */
  served?: MetricsSlot;
  /**
   * `cronsafe daemon` could not listen on metrics.port and said so once: the run tries it
   * again without a warning of its own (debug), or every pass repeated it.
   */
  quietPort?: boolean;
}

/**
 * A /metrics server that outlives a run: the run's registry is served from show() until the
 * returned function is called; `live` (the pass's live gauges) is read on after that, settled,
 * so that what the pass skipped stays shown until the next pass starts. `read`: the run's last
 * ledger snapshot, which the server shows from then on while the ledger cannot be read (never
 * older values than the run's, or the counters would go back).
 */
export interface MetricsSlot {
  show(registry: Registry, live: () => ProgressSnapshot | undefined, read?: () => LastRead | undefined): () => void;
}

const NO_METRICS: RunMetrics = {
  observer: { attempt: () => undefined },
  runStarted: () => undefined,
  runFinished: async () => undefined,
  close: async () => undefined,
};

/**
 * Start the metrics of one run: serve `/metrics` and `/healthz` on metrics.port (when set)
 * and push to metrics.pushgateway (when set). Call once the ledger is open; resolves once
 * the port is listening. Any failure here is logged and gives a run without (some)
 * metrics: metrics never make a run fail.
 */
export async function startRunMetrics(deps: MetricsDeps): Promise<RunMetrics> {
  const { config, ledger, log } = deps;
  const m = config.metrics;
  if (!m || (m.port === undefined && m.pushgateway === undefined)) return NO_METRICS;
  try {
    const { LedgerViewReader, Pusher, createMetrics, PendingHandlerTimes } = await loadMetrics();
    // The handler times observed go to the ledger before each read (handler-times.ts).
    const handlerTimes = new PendingHandlerTimes();
    const addHandlerTimes = () => handlerTimes.flush((bumps) => ledger.addHandlerTimes(bumps));
    // A scrape answers within SCRAPE_BUDGET_MS, with the last values read while the ledger does
    // not (PostgreSQL down mid-pass: its reads, and the handler times' write before them, retry
    // for up to 30 s each, past Prometheus's scrape timeout, and the pod's target was down for
    // the whole outage). A push reads for itself (readForPush), unbudgeted: it carries what the
    // ledger says now or nothing.
    const view = new LedgerViewReader(ledger, log, deps.now, SCRAPE_BUDGET_MS, addHandlerTimes);
    let live: (() => ProgressSnapshot) | undefined;
    const metrics = createMetrics({ job: config.name, read: () => view.read(), live: () => live?.(), handlerTimes }, 'run');
    const slot = m.port === undefined ? undefined : deps.served;
    const server = m.port === undefined || slot ? undefined : await (await import('./server.js')).startMetricsServer({ port: m.port, registry: metrics.registry, log, quiet: deps.quietPort === true });
    if (server !== undefined && deps.quietPort === true) log.info({ port: m.port }, 'metrics: metrics.port is free now; serving /metrics while this pass runs');
    const hide = slot?.show(metrics.registry, () => live?.(), () => view.lastRead());
    const pusher =
      m.pushgateway === undefined
        ? undefined
        : new Pusher({
            url: m.pushgateway,
            job: config.name,
            registry: metrics.registry,
            log,
            timeoutMs: pushTimeoutMs(config),
            method: 'put',
            ready: async () => {
              const read = await view.readForPush();
              return read !== undefined && (() => view.unpin(read));
            },
          });
    // The pass is over: in-flight and queued read 0 from now on; what the pass skipped stays,
    // so that the final push (and a scrape after the run) still says the scan was partial.
    const settle = () => {
      const last = live?.();
      live = last && (() => ({ ...last, inFlight: 0, queued: 0 }));
    };
    let finalPushed = false;
    let ended = false; // runFinished or close began: no push from now on is beside a pass or drain
    let closing: Promise<void> | undefined;
    return {
      observer: {
        attempt: (outcome, durationMs) => metrics.observeAttempt(outcome, durationMs / 1000),
        live: (read) => {
          live = read;
        },
      },
      runStarted(draining) {
        if (!pusher) return;
        void pusher.push('run started');
        if (draining?.aborted) {
          pusher.besides('the drain carries on');
          return;
        }
        pusher.start(m.pushIntervalSeconds * 1000);
        draining?.addEventListener(
          'abort',
          () => {
            pusher.stop();
            // A stop after the run's end (its final push on its way) does not make it a drain.
            if (!ended) pusher.besides('the drain carries on');
          },
          { once: true },
        );
      },
      async runFinished(outcome) {
        settle();
        // Without a push to add them (a scrape-only run), the last ones go to the ledger now:
        // not after a drain (the kubelet's SIGKILL is near) nor a failure (the ledger may be
        // what failed, and its writes retry for up to 30 s). Those were never shown.
        if (!pusher) return outcome === 'completed' ? addHandlerTimes() : undefined;
        pusher.stop();
        ended = true;
        pusher.besides(`the run's outcome, ${outcome}, stands`);
        await pusher.push(`run ${outcome}`);
        finalPushed = true;
      },
      close() {
        closing ??= (async () => {
          settle();
          pusher?.stop();
          if (!ended) pusher?.besides('the run ends all the same');
          ended = true;
          if (pusher && !finalPushed) await pusher.push('closing');
          hide?.();
          await server?.close();
        })();
        return closing;
      },
    };
  } catch (err) {
    log.warn({ err }, 'metrics: could not start; the run goes on without them');
    return NO_METRICS;
  }
}

/** How long a scrape (of a run, or of the daemon between passes) waits for the ledger before it shows the last values read. */
const SCRAPE_BUDGET_MS = 5000;

/** `cronsafe daemon`'s metrics.port, served for as long as the daemon runs. */
export interface DaemonMetrics {
  /** Give to each pass (ExecuteOptions.served): it shows its own metrics while it runs. */
  readonly slot: MetricsSlot;
  /** Stop serving; idempotent. Before the ledger closes. */
  close(): Promise<void>;
}

/**
 * Serve metrics.port for the daemon's whole life, not only while a pass runs: a static
 * scrape of a long-lived process must not find it down between passes (`up == 0`, and the
 * ledger's series, which the alerts watch, absent). While a pass runs, its metrics (the
 * same as `cronsafe run` serves); between passes, every metric from the ledger `ledger()`
 * returns, the live gauges at 0 and the handler-time histogram empty. Undefined without
 * metrics.port, or when the port cannot be bound (a warning, as for a run: each pass then
 * tries it again, and the daemon between passes, `again`: a port in use then is logged at
 * debug). Never rejects.
 */
export async function startDaemonMetrics(config: Config, ledger: () => LedgerReads, log: Logger, again = false): Promise<DaemonMetrics | undefined> {
  const port = config.metrics?.port;
  if (port === undefined) return undefined;
  try {
    const [{ LedgerViewReader, createMetrics }, { startMetricsServer }] = await Promise.all([loadMetrics(), import('./server.js')]);
    const reads: LedgerReads = {
      totals: () => ledger().totals(),
      counts: () => ledger().counts(),
      attemptTotals: () => ledger().attemptTotals(),
      runStats: () => ledger().runStats(),
      recentRuns: (n) => ledger().recentRuns(n),
      handlerTimes: () => ledger().handlerTimes?.() ?? Promise.resolve({}),
    };
    // A scrape answers within 5 s, with the last values read while the ledger is unreachable.
    const view = new LedgerViewReader(reads, log, Date.now, SCRAPE_BUDGET_MS);
    // The last pass's live gauges once it ended (settled: in-flight and queued 0).
    let last: (() => ProgressSnapshot | undefined) | undefined;
    const idle = createMetrics({ job: config.name, read: () => view.read(), live: () => last?.() }, 'run').registry;
    let shown: Registry | undefined;
    const server = await startMetricsServer({ port, registry: () => shown ?? idle, log, quiet: again });
    if (server === undefined) return undefined;
    return {
      slot: {
        show(registry, live, read) {
          shown = registry;
          return () => {
            if (shown !== registry) return;
            shown = undefined;
            last = live;
            view.adopt(read?.());
          };
        },
      },
      close: () => server.close(),
    };
  } catch (err) {
    log.warn({ err }, 'metrics: could not start; the daemon goes on without them');
    return undefined;
  }
}

/**
 * Push the ledger-derived metrics alone, once: a start that found the lock held (its lock
 * skip is now in the ledger's overrun and lock-skip totals), or an operator's `dead-letter
 * retry` / `requeue` (the dead-letter gauge and requeue total moved, and a Pushgateway-only
 * setup would otherwise page on the old dead letters until the next run). POST keeps a
 * running pass's live gauges in the group. Never rejects.
 */
export async function pushLedgerMetrics(deps: MetricsDeps, reason: string): Promise<void> {
  const { config, ledger, log } = deps;
  const url = config.metrics?.pushgateway;
  if (url === undefined) return;
  try {
    const { LedgerViewReader, Pusher, createMetrics } = await loadMetrics();
    const view = new LedgerViewReader(ledger, log, deps.now);
    const { registry } = createMetrics({ job: config.name, read: () => view.read() }, 'ledger');
    const pusher = new Pusher({
      url,
      job: config.name,
      registry,
      log,
      timeoutMs: pushTimeoutMs(config),
      method: 'post',
      ready: async () => {
        const read = await view.readForPush();
        return read !== undefined && (() => view.unpin(read));
      },
    });
    await pusher.push(reason);
  } catch (err) {
    log.warn({ err, reason }, 'metrics: could not push');
  }
}

/**
 * One push may take at most 5 s, no more than the push interval, and no more than a quarter
 * of the drain margin: after a drain, the handlers' kill (a third), the final push (periodic
 * ones stopped when the drain began) and the Lease release beside the last Events must fit
 * before the kubelet's SIGKILL.
 */
export function pushTimeoutMs(config: Config): number {
  const interval = (config.metrics?.pushIntervalSeconds ?? 30) * 1000;
  return Math.max(500, Math.min(5000, interval, (config.drain.marginSeconds * 1000) / 4));
}
