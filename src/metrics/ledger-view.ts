import type { Logger } from 'pino';
import type { AttemptTotals, ItemCounts, Ledger, LedgerTotals, RunRecord, RunStats } from '../ledger/types.js';

/** What the ledger-derived metrics show, read in one go per scrape or push. */
export interface LedgerView {
  totals: LedgerTotals;
  items: ItemCounts;
  attempts: AttemptTotals;
  runs: RunStats;
  /** Failed runs since the last completed one (see failedRunsInARow), over the newest STREAK_WINDOW runs. */
  failedInARow: number;
  /** Seconds the newest run took (finished) or has taken so far (running); null before the first run. */
  lastRunSeconds: number | null;
  /** The handler-time histogram's rows (handler-times.ts); empty from a reader without them. */
  handlerTimes: Record<string, number>;
}

/** A reader's last good snapshot and when its read started (performance.now(): within one process). */
export interface LastRead {
  view: LedgerView;
  at: number;
}

/** The ledger's reads the metrics make (a Ledger has them). */
export type LedgerReads = Pick<Ledger, 'totals' | 'counts' | 'attemptTotals' | 'runStats' | 'recentRuns'> & Partial<Pick<Ledger, 'handlerTimes'>>;

/** A budgeted read's fetch older than this is not waited on by later reads: another starts. */
const STUCK_MS = 60_000;

/** While reads keep failing, the warning is repeated (one line, no stack) this often. */
export const STILL_FAILING_EVERY_MS = 15 * 60_000;

/** Kinds of error said in full within one outage, at most (the rest: the 15-minute line). */
const MAX_KINDS_TOLD = 5;

/**
 * An error's kind: its class and code (a SQLSTATE, an errno, SQLite's), not its message, which
 * names the read that failed (five run at once) or an address.
 */
function errorKind(err: unknown): string {
  const e = err as { name?: unknown; code?: unknown } | null;
  return `${typeof e?.name === 'string' ? e.name : typeof err}:${typeof e?.code === 'string' ? e.code : ''}`;
}

/** How many recent runs a failure streak is counted over (the gauge saturates there). */
export const STREAK_WINDOW = 20;

/**
 * Reads the ledger for the metrics. Every collect callback of one scrape or push calls
 * `read()` in the same tick, so they share one read (one consistent snapshot, one set of
 * queries per scrape). A failed read is logged and answered with the last good snapshot:
 * a counter must never drop to 0 because the ledger hiccuped, or Prometheus would see a
 * reset and `increase()` would count the whole total again. `undefined` means there was
 * never a good read: callers then expose nothing rather than zeros. A push reads with
 * readForPush(), which never answers with the last values read.
 */
export class LedgerViewReader {
  private pending: Promise<LedgerView | undefined> | undefined;
  private lastGood: LedgerView | undefined;
  /** When the read that gave lastGood started (performance.now()): an older read never replaces it. */
  private lastGoodAt = -Infinity;

  /** The snapshot a push read for itself (readForPush), answered to its collect calls until unpin(). */
  private pinned: LedgerView | undefined;

  /** The budget's fetch still running (budgetMs): read on by the next scrapes, not started again. */
  private slow: Promise<LedgerView | undefined> | undefined;
  private slowSince = 0;

  /** Since when reads fail (undefined: the last one worked), and when that was last said. */
  private failingSince: number | undefined;
  private failingToldAt = 0;
  /** The kinds of error (errorKind) said in full in this outage. */
  private failingKinds = new Set<string>();

  /**
   * `budgetMs`: a read answers within it, with the last values read when the ledger is slower
   * (for a scrape only, never for a push, which must carry what the ledger says now).
   */
  constructor(
    private readonly ledger: LedgerReads,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
    private readonly budgetMs?: number,
    /** Before each read of the ledger: a run adds the handler times it observed (handler-times.ts). Never rejects. */
    private readonly beforeRead?: () => Promise<void>,
  ) {}

  /** The last good snapshot and when its read started, for another reader of this process to take over (adopt). */
  lastRead(): LastRead | undefined {
    return this.lastGood && { view: this.lastGood, at: this.lastGoodAt };
  }

  /**
   * Take another reader's last snapshot when it is newer than this one's: `cronsafe daemon`'s
   * between-passes reader, after a pass that read (and served, and pushed) newer values. A
   * ledger down just after the pass was otherwise answered with the values read before it,
   * and every counter went back: a reset to Prometheus, whose increase() then counted each
   * whole total again (the dead-letter and overrun alerts paged).
   */
  adopt(other: LastRead | undefined): void {
    if (other === undefined || other.at <= this.lastGoodAt) return;
    this.lastGood = other.view;
    this.lastGoodAt = other.at;
  }

  read(): Promise<LedgerView | undefined> {
    if (this.pinned !== undefined) return Promise.resolve(this.pinned);
    if (this.budgetMs !== undefined) return this.readWithin(this.budgetMs);
    if (this.pending) return this.pending;
    const p = this.fetch();
    this.pending = p;
    // Shared within this tick only: a read that started before a ledger write (say, the
    // run's end) must not answer a push that was asked for after it.
    setImmediate(() => {
      if (this.pending === p) this.pending = undefined;
    });
    return p;
  }

  /**
   * A push's read: the ledger now, kept for that push's own collect calls until `unpin()`.
   * Undefined when this read failed: a push carries what the ledger says now or nothing. The
   * last values read may be older than what another process pushed to the group since (on
   * PostgreSQL the pods of one pass push to one group; a retry or requeue pushes too), and a
   * PUT of them took the group's counters back: a reset to Prometheus, whose increase() then
   * counted each whole total again.
   */
  async readForPush(): Promise<LedgerView | undefined> {
    if (!(await this.attempt())) return undefined;
    this.pinned = this.lastGood;
    return this.pinned;
  }

  /** The push that readForPush() gave `view` to is over: reads go to the ledger again (unless a later push pinned its own). */
  unpin(view: LedgerView): void {
    if (this.pinned === view) this.pinned = undefined;
  }

  /**
   * A scrape of `cronsafe daemon` between passes while the database is down: the ledger's
   * reads retry for up to 30 s, past Prometheus's scrape timeout (10 s by default), so the
   * target was down (`up == 0`) instead of showing the last values read.
   */
  private readWithin(ms: number): Promise<LedgerView | undefined> {
    // A read stuck on a connection whose peer vanished (no answer until TCP gives up, many
    // minutes) is not waited on by every later scrape: past a minute, another one starts.
    if (this.slow === undefined || performance.now() - this.slowSince > STUCK_MS) {
      const started = this.fetch().finally(() => {
        if (this.slow === started) this.slow = undefined;
      });
      this.slow = started;
      this.slowSince = performance.now();
    }
    const fetching = this.slow;
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(this.lastGood), ms);
      timer.unref();
      void fetching.then((view) => {
        clearTimeout(timer);
        resolve(view);
      });
    });
  }

  private async fetch(): Promise<LedgerView | undefined> {
    await this.attempt();
    return this.lastGood;
  }

  /** One read of the ledger into lastGood (unless a newer read gave it); false when it failed. */
  private async attempt(): Promise<boolean> {
    await this.beforeRead?.();
    const started = performance.now();
    try {
      const [totals, items, attempts, runs, recent, handlerTimes] = await Promise.all([
        this.ledger.totals(),
        this.ledger.counts(),
        this.ledger.attemptTotals(),
        this.ledger.runStats(),
        this.ledger.recentRuns(STREAK_WINDOW),
        this.ledger.handlerTimes?.() ?? {},
      ]);
      // A read that started before the one that gave lastGood (one stuck for a minute, then
      // answered) is older: shown, the counters would go back.
      if (started > this.lastGoodAt) {
        this.lastGood = {
          totals,
          items,
          attempts,
          runs,
          failedInARow: failedRunsInARow(recent),
          lastRunSeconds: lastRunSeconds(recent, this.now()),
          handlerTimes,
        };
        this.lastGoodAt = started;
      }
      if (this.failingSince !== undefined) {
        this.log.info({ failedForSeconds: Math.round((this.now() - this.failingSince) / 1000) }, 'metrics: the ledger can be read again');
        this.failingSince = undefined;
      }
      return true;
    } catch (err) {
      this.failed(err);
      return false;
    }
  }

  /**
   * A failed read, said once per outage with its error, then once every
   * STILL_FAILING_EVERY_MS in one line: a daemon scraped every 15 s through an hour-long
   * database outage wrote a warning with a full stack trace for every failed read. An error
   * of another kind within the outage (the server back, but the schema gone or the role's
   * rights revoked) is said in full at once too, once: the first error's line alone hid it
   * for up to 15 minutes.
   */
  private failed(err: unknown): void {
    const now = this.now();
    const kind = errorKind(err);
    if (this.failingSince === undefined || (!this.failingKinds.has(kind) && this.failingKinds.size < MAX_KINDS_TOLD)) {
      if (this.failingSince === undefined) this.failingKinds.clear();
      this.failingSince ??= now;
      this.failingToldAt = now;
      this.failingKinds.add(kind);
      this.log.warn({ err }, 'metrics: could not read the ledger; showing the last values read');
    } else if (now - this.failingToldAt >= STILL_FAILING_EVERY_MS) {
      this.failingToldAt = now;
      const error = err instanceof Error ? err.message : String(err);
      this.log.warn({ error, failingForSeconds: Math.round((now - this.failingSince) / 1000) }, 'metrics: still cannot read the ledger; showing the last values read');
    }
  }
}

/**
 * Failed runs since the last completed one, newest first. A run that died (SIGKILL, OOM,
 * node loss) counts once a later run has marked it `died`, which every run does before it
 * records its own start. Unfinished runs are skipped: they may be running now, and on
 * PostgreSQL every pod of the pass in progress is one (older than the newest, yet alive).
 * Drained and stale runs neither break nor extend a streak: a SIGTERM is not the job's
 * fault, and a refused stale fire did no work.
 */
export function failedRunsInARow(newestFirst: readonly RunRecord[]): number {
  let streak = 0;
  for (const run of newestFirst) {
    if (run.outcome === null) continue;
    if (run.outcome === 'completed') break;
    if (run.outcome === 'failed' || run.outcome === 'died') streak++;
  }
  return streak;
}

/** Duration of the newest run in seconds: finished, or so far. */
export function lastRunSeconds(newestFirst: readonly RunRecord[], now: number): number | null {
  const run = newestFirst[0];
  if (run === undefined) return null;
  return Math.max(0, (run.finishedAt ?? now) - run.startedAt) / 1000;
}
