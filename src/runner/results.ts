import type { Logger } from 'pino';
import { coerceError } from '../errors.js';
import { sharesPass, type Claim, type ClaimOptions, type FenceOutcome, type Ledger, type RetryPolicy, type Settlement, type SettleOutcome } from '../ledger/types.js';

/** A claim made with a result write (ResultBatcher.flushAndClaim). */
interface ClaimRequest {
  ids: string[];
  opts: () => ClaimOptions;
  limit: number;
  /** Ids the caller holds (SharedPassLedger.settleOffered). */
  exclude?: readonly string[];
  /** Whether the claim may take a suspect (SharedPassLedger.settleOffered): once the scan is over. */
  suspects?: boolean;
}

/** The claims made, and how many of the ids offered the claim looked at. */
export interface Claimed {
  claims: Claim[];
  considered: number;
}

/** How one attempt ended, as recorded in the ledger. */
export type AttemptOutcome = 'succeeded' | 'failed' | 'dead' | 'released' | 'fenced' | 'gone';

// A type alias (not an interface) so that it is assignable to Record<string, number>.
export type ResultCounts = {
  succeeded: number;
  failed: number;
  deadLettered: number;
  released: number;
  fenced: number;
  /** Items dropped because their file was deleted after the scan. */
  gone: number;
};

/**
 * Collects item results and writes them to the ledger in batches, so that the ledger is
 * not the bottleneck (one transaction per batch instead of per item). Flushes when
 * `maxBatch` results wait or `maxDelayMs` after the first one, always on `flush()`, and
 * with every claim (`flushAndClaim`): the write that starts new attempts also records the
 * ones that freed their slots (SQLite: one transaction; a shared pass on PostgreSQL: one
 * statement, SharedPassLedger.settleOffered), so finished attempts hardly ever wait as
 * claims, and a pod's claims in the ledger never outnumber its slots. Writes are
 * serialised. A result is only ever reported as done after its write committed; a crash
 * before that leaves the claim in place, and the item is redone (its attempt charged: it
 * did start).
 */
export class ResultBatcher {
  readonly counts: ResultCounts = { succeeded: 0, failed: 0, deadLettered: 0, released: 0, fenced: 0, gone: 0 };
  private pending: Settlement = { complete: [], fail: [], release: [], gone: [] };
  /** What to say of a hand-back once the ledger answered it (release's `onAnswered`), by its entry in `pending.release`. */
  private readonly releaseNotes = new WeakMap<object, (answer: FenceOutcome) => void>();
  private size = 0;
  /**
   * The maxDelayMs timer, kept between batches and re-armed (refresh) for the next one: a
   * slot batch's results are written with the next claim, within the turn, so a new timer
   * per batch (~12,500 per 100,000 no-op items) was made only to be cleared.
   */
  private timer: NodeJS.Timeout | undefined;
  /** Whether the timer counts for the results now pending (else it fires idle). */
  private armed = false;
  private chain: Promise<void> = Promise.resolve();
  /** First ledger error; once set, every later flush rethrows it. */
  error: Error | undefined;
  /**
   * Hand-backs of started attempts whose write failed: their claims stay in the ledger, and the
   * next run takes them for a dead run's and charges them (runPass says so).
   */
  unrecordedHandBacks = 0;

  constructor(
    private readonly ledger: Ledger,
    private readonly log: Logger,
    private readonly opts: {
      now: () => number;
      maxBatch: number;
      maxDelayMs: number;
      onError: (err: Error) => void;
      onSettled?: (claim: Claim) => void;
      /** Each applied or fenced write, after its transaction committed. */
      onOutcome?: (claim: Claim, outcome: AttemptOutcome) => void;
      /** Each item dead-lettered, after its transaction committed. */
      onDeadLettered?: (id: string, error: string) => void;
      /**
       * Just before a batch is written, after every attempt in it ended: may turn its
       * completions into hand-backs (PassState.rootCheckedBeforeWrite).
       */
      beforeWrite?: (batch: Settlement) => void;
    },
  ) {}

  complete(claim: Claim): void {
    this.pending.complete.push(claim);
    this.added();
  }

  fail(claim: Claim, error: string, retry: RetryPolicy): void {
    this.pending.fail.push({ claim, error, retry });
    this.added();
  }

  /** The item's file is gone: forget it (not charged, not dead). */
  gone(claim: Claim): void {
    this.pending.gone.push(claim);
    this.added();
  }

  /**
   * `unstarted`: its handler never started (Ledger.release undoes the claim). `onAnswered`:
   * called with the ledger's answer to the hand-back, applied or fenced (its log line: "claim
   * handed back (attempt not charged)" said before the write could be a lie, as a write that
   * fails leaves the claim to be taken back after its lease, charged; and so it is of a fenced
   * one, whose claim another owner had taken over: handBackLine).
   */
  release(claim: Claim, reason: string, unstarted = false, onAnswered?: (answer: FenceOutcome) => void): void {
    const entry = { claim, reason, unstarted };
    if (onAnswered) this.releaseNotes.set(entry, onAnswered);
    this.pending.release.push(entry);
    this.added();
  }

  /** Write everything queued so far; resolves when it is committed. */
  /**
   * An item that crash recovery dead-lettered (ReclaimOptions.onDeadLettered): the abandoned
   * attempt of a run that died was its last. Logged and told as one of ours would be; not
   * counted, as it was not this run's attempt.
   */
  reclaimedDead(id: string, error: string): void {
    this.log.error({ itemId: id, error }, 'item dead-lettered');
    this.opts.onDeadLettered?.(id, error);
  }

  flush(): Promise<void> {
    return this.enqueue().then(() => undefined);
  }

  /**
   * Write everything queued so far and claim from `ids` in the same ledger write: at most
   * `limit` (a shared pass offers more candidates than slots, and fills up from the pass's
   * pending items, never one of `exclude`: SharedPassLedger.settleOffered). `considered`:
   * how many of `ids` the claim looked at (the rest may be offered again).
   */
  flushAndClaim(ids: string[], opts: () => ClaimOptions, limit = ids.length, exclude?: readonly string[], suspects?: boolean): Promise<Claimed> {
    return this.enqueue({ ids, opts, limit, exclude, suspects });
  }

  private enqueue(claim?: ClaimRequest): Promise<Claimed> {
    this.armed = false;
    const batch = this.pending;
    this.pending = { complete: [], fail: [], release: [], gone: [] };
    this.size = 0;
    const done = this.chain.then(() => this.write(batch, claim));
    this.chain = done.then(
      () => undefined,
      () => undefined,
    );
    return done;
  }

  private added(): void {
    this.size++;
    if (this.size >= this.opts.maxBatch) {
      void this.flush().catch(() => undefined);
    } else if (!this.armed) {
      this.armed = true;
      if (this.timer) this.timer.refresh();
      else this.timer = setTimeout(() => this.timedOut(), this.opts.maxDelayMs);
    }
  }

  private timedOut(): void {
    if (!this.armed) return; // written with a claim meanwhile
    void this.flush().catch(() => undefined);
  }

  private async write(batch: Settlement, claim?: ClaimRequest): Promise<Claimed> {
    const unrecorded = (): number => (this.unrecordedHandBacks += batch.release.filter((r) => !r.unstarted).length);
    if (this.error) {
      unrecorded();
      throw this.error;
    }
    this.opts.beforeWrite?.(batch);
    const size = batch.complete.length + batch.fail.length + batch.release.length + batch.gone.length;
    if (size === 0 && (!claim || (claim.ids.length === 0 && !sharesPass(this.ledger)))) return { claims: [], considered: 0 };
    const now = this.opts.now();
    let out: SettleOutcome & { considered?: number };
    try {
      if (claim && sharesPass(this.ledger)) {
        out = await this.ledger.settleOffered(batch, now, { ids: claim.ids, opts: { ...claim.opts(), limit: claim.limit, exclude: claim.exclude, suspects: claim.suspects } });
      } else {
        out = await this.ledger.settle(batch, now, claim && { ids: claim.ids, opts: claim.opts() });
      }
    } catch (err) {
      unrecorded();
      this.error = coerceError(err);
      this.opts.onError(this.error);
      throw this.error;
    }
    this.account(out.complete, 'complete', batch.complete);
    this.account(out.fail, 'fail', batch.fail.map((f) => f.claim), batch.fail);
    // Said once the ledger answered: applied, or fenced (the claim was no longer this
    // attempt's: nothing was handed back, nor charged to it; the line says why the attempt
    // ended, what the fence's 'stale claim' line after it does not). Not for a write that failed.
    batch.release.forEach((r, i) => {
      const answer = out.release[i];
      if (answer?.result === 'applied' || answer?.result === 'fenced') this.releaseNotes.get(r)?.(answer);
    });
    this.account(out.release, 'release', batch.release.map((r) => r.claim));
    this.account(out.gone, 'gone', batch.gone);
    for (const c of batch.complete) this.opts.onSettled?.(c);
    for (const c of batch.gone) this.opts.onSettled?.(c);
    for (const f of batch.fail) this.opts.onSettled?.(f.claim);
    for (const r of batch.release) this.opts.onSettled?.(r.claim);
    return { claims: out.claims, considered: out.considered ?? claim?.ids.length ?? 0 };
  }

  private account(
    outcomes: FenceOutcome[],
    op: 'complete' | 'fail' | 'release' | 'gone',
    claims: Claim[],
    failures?: Array<{ claim: Claim; error: string }>,
  ): void {
    // Outcomes come in the order of the claims written (Ledger.settle).
    for (let i = 0; i < outcomes.length; i++) {
      const o = outcomes[i]!;
      const claim = claims[i];
      if (claim) this.opts.onOutcome?.(claim, outcomeOf(o, op));
      if (o.result === 'fenced') {
        this.counts.fenced++;
        this.log.warn({ itemId: o.id, op, reason: o.reason }, 'stale claim: write rejected by the ledger (another owner holds this item now)');
        continue;
      }
      if (op === 'complete') this.counts.succeeded++;
      else if (op === 'release') this.counts.released++;
      else if (op === 'gone') {
        this.counts.gone++;
        this.log.warn({ itemId: o.id }, 'item gone: its file was deleted (or is no longer a file) after the scan; dropped from the ledger (not charged)');
      }
      else {
        const f = failures?.[i];
        if (o.state === 'dead') {
          this.counts.deadLettered++;
          this.log.error({ itemId: o.id, attempt: f?.claim.attempt, error: f?.error }, 'item dead-lettered');
          this.opts.onDeadLettered?.(o.id, f?.error ?? '');
        } else {
          this.counts.failed++;
          this.log.warn(
            { itemId: o.id, attempt: f?.claim.attempt, error: f?.error, retryAt: o.availableAt ? new Date(o.availableAt).toISOString() : undefined },
            'item failed; will retry',
          );
        }
      }
    }
  }
}

function outcomeOf(o: FenceOutcome, op: 'complete' | 'fail' | 'release' | 'gone'): AttemptOutcome {
  if (o.result === 'fenced') return 'fenced';
  if (op === 'complete') return 'succeeded';
  if (op === 'release') return 'released';
  if (op === 'gone') return 'gone';
  return o.state === 'dead' ? 'dead' : 'failed';
}
