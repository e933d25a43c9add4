import { setImmediate as yieldTurn } from 'node:timers/promises';
import type { Logger } from 'pino';
import { sharesPass, type Claim, type ClaimOptions, type Ledger, type RetryPolicy } from '../ledger/types.js';
import type { Channel } from './channel.js';
import type { Drain } from './drain.js';
import type { ResultBatcher } from './results.js';
import { committedOutputs, type OutputStore } from './output.js';

/**
 * How often a pod with nothing of its own left asks whether its siblings' claims came back:
 * soon at first (fast items end within milliseconds), then every 500 ms at most.
 */
export const SIBLING_POLL_MS = { first: 50, max: 500 };
/** With no attempt running, the claim loop still gives the event loop a turn this often (ms). */
const TURN_MS = 10;

export interface ClaimLoopDeps {
  ledger: Ledger;
  results: ResultBatcher;
  channel: Channel<string>;
  drain: Drain;
  log: Logger;
  /** Claims of attempts started and not yet written, by id. */
  held: Map<string, Claim>;
  /** The pass (run group on PostgreSQL, the run on SQLite), the owner, the clock and the lease. */
  claimOpts: () => ClaimOptions;
  freeSlots: () => number;
  /** Attempts running now. */
  running: () => number;
  /** Start an attempt for each claim of one ledger answer (dispatch.ts). */
  start: (claims: readonly Claim[]) => void;
  /** Resolves at the next wake-up: an attempt ended, a result was written, or a stop. */
  changed: () => Promise<void>;
  scanComplete: () => boolean;
  /** Candidates offered per claim on a shared pass (the channel's capacity). */
  queueSize: number;
  /** Policy for claims of the pass whose lease expired (resumed at once, charged). */
  retry: RetryPolicy;
  /** Where an expired claim's attempt may have committed its output (then it is done): committedOutputs. */
  outputs?: OutputStore;
  /** Asked synchronously before each claim; it may stop the run (PassDeps.beforeClaim). */
  beforeClaim?: () => void;
}

/**
 * Claim at the slot: when handlers are free, claim that many candidates and start them at
 * once. A claim is a started attempt, so a crash charges at most `concurrency` items. After
 * the scan, a sweep claims the pass's due items, until nothing is held and nothing is due.
 * Resolves true when the pass is over for this pod (the sweep proved it), false when it
 * stopped (a drain, or the scan did not complete).
 *
 * The claim goes with the results of the attempts that freed the slots, in one write
 * (ResultBatcher.flushAndClaim): one transaction on SQLite, one statement on a shared pass
 * (PostgreSQL, SharedPassLedger). On a shared pass the whole channel is offered to each
 * claim, which fills up from the pass's pending items when the candidates fall short, and
 * the pod's pass ends only once no sibling holds a claim of the pass that could come back
 * (docs/postgres.md, "How pods share a pass").
 */
export async function claimLoop(d: ClaimLoopDeps): Promise<boolean> {
  const { channel, drain, held, ledger, results } = d;
  const shared = sharesPass(ledger) ? ledger : undefined;
  // Shared pass: candidates offered to a claim that it did not reach, offered first next time.
  let front: string[] = [];

  let pollMs = SIBLING_POLL_MS.first;
  // Shared pass: a claim found nothing claimable in the pass. Until the scan offers
  // something new, there is no point in asking again.
  let dry = false;
  // Shared pass: the last look found expired claims of siblings that it could not take (locked).
  let expiredLocked = false;

  /**
   * Candidates for `free` slots: SQLite `free` of them, a shared pass all it has. Waits
   * while the channel is empty and open, except on a shared pass whose claim can take the
   * pass's pending items without any (until one such claim came back empty).
   */
  async function candidates(free: number): Promise<string[]> {
    const want = shared ? Math.max(free, d.queueSize - front.length) : free;
    let ids = front.length > 0 ? front.concat(channel.take(want)) : channel.take(want);
    front = [];
    if (ids.length === 0 && !channel.closed && !(shared && !dry)) {
      const next = await channel.receive();
      if (next.done) return [];
      dry = false;
      // The scan hands over a discovered batch id by id: let it, so that the claim is
      // offered the batch rather than its first id.
      if (shared) await yieldTurn();
      ids = [next.value, ...channel.take(want - 1)];
    }
    // A pod never claims an id it holds: after a server crash forgot a claim, the same
    // owner would get the same fencing token for a second attempt (SharedPassLedger).
    return shared ? ids.filter((id) => !held.has(id)) : ids;
  }

  /** With the results of the attempts that freed these slots, in one write. */
  async function claimCandidates(ids: string[], free: number): Promise<Claim[]> {
    // A shared pass takes a suspect only once the scan is over: before, the only suspects it
    // has marked as the pass's are those the start just reclaimed (the one in flight at each
    // kill, taken first again until dead), not the ones waiting longer (settleOfferedQuery).
    const out = await results.flushAndClaim(ids, d.claimOpts, free, shared ? [...held.keys()] : undefined, shared ? channel.closed : undefined);
    front = ids.slice(out.considered);
    if (shared && out.claims.length === 0) {
      // Nothing of the pass was claimable, so neither is anything this pod found before:
      // the siblings took it. Wait for what the scan finds next instead of offering that.
      dry = true;
      front = [];
      channel.take(channel.size);
    }
    return out.claims;
  }

  /**
   * Nothing claimable and nothing of ours held. True: the pass is over for this pod. On a
   * shared pass only once no sibling holds a claim of the pass that could come back (a
   * hand-back, a failure) and nothing of the pass became claimable since the sweep (a
   * sibling's hand-back between the two statements); claims whose lease expired are
   * reclaimed, then swept.
   */
  async function passOver(): Promise<boolean> {
    if (!shared) return true;
    const { runId: passId, owner, now } = d.claimOpts();
    const s = await shared.siblings(passId, owner, now);
    if (s.stray > 0) {
      d.log.warn({ claims: s.stray }, 'handed back claims the ledger had for this run that it was not running (a lost acknowledgement, or completions a database crash forgot); not charged');
      return false;
    }
    if (s.expired > 0) {
      const byOutput = committedOutputs(d.outputs);
      // Any pass's: an earlier pass's claims that expired while this one ran are taken
      // back (and made this pass's) now, not by the next run.
      const n = await shared.reclaimExpired({ now, retry: d.retry, committed: byOutput.committed, onDeadLettered: (id, error) => results.reclaimedDead(id, error) });
      if (n > 0) {
        d.log.warn({ orphans: n, doneByOutput: byOutput.count() }, 'reclaimed claims whose lease expired (a sibling, or a pod of an earlier pass, stopped renewing); those whose output was committed are done, the rest charged (handed back uncharged if the sibling was killed while it drained)');
        return false;
      }
      // None taken: another session holds their rows locked (a sibling frozen or cut off in
      // the middle of its transaction, an operator's SELECT ... FOR UPDATE). They may still
      // come back: wait for them as for live claims, asking again every SIBLING_POLL_MS
      // (asking at once again ran the pod's statements in a loop as fast as the server answered).
      if (!expiredLocked) d.log.warn({ claims: s.expired }, 'claims whose lease expired are locked by another session (a pod frozen in its transaction, or an operator\'s lock): waiting for them as for live ones');
      expiredLocked = true;
    } else expiredLocked = false;
    if (s.live === 0 && s.expired === 0 && !s.due) return true;
    await sleepOrWake(d.changed(), pollMs);
    pollMs = Math.min(SIBLING_POLL_MS.max, pollMs * 2);
    return false;
  }

  let turnAt = performance.now();
  for (;;) {
    if (drain.stopping.aborted) return false;
    if (d.freeSlots() <= 0) {
      await d.changed();
      continue;
    }
    // Let every attempt that is finishing in this turn of the event loop free its slot
    // first, so that one claim serves all of them (with fast handlers, claiming per freed
    // slot would cost a statement per item). With nothing running, at least every TURN_MS:
    // after the scan, SQLite's claims are synchronous and a module handler can settle at
    // once, so this loop would otherwise never leave the microtask queue, and signals (a
    // SIGTERM's drain), timers (progress, heartbeats, the journal's flush) and the lock
    // check would wait for the whole sweep. (A turn every round cost ~9% of a no-op pass.)
    if (d.running() > 0 || performance.now() - turnAt >= TURN_MS) {
      await yieldTurn();
      turnAt = performance.now();
    }
    if (drain.stopping.aborted) return false;
    const free = d.freeSlots();
    const ids = await candidates(free);
    // What the run relies on may have run out while the event loop was blocked (a module
    // handler's synchronous work), with the timer that says so not yet run: ask now.
    if (d.beforeClaim) {
      d.beforeClaim();
      if (drain.stopping.aborted) return false;
    }
    const scanning = !channel.closed || channel.size > 0 || front.length > 0;
    let claims: Claim[];
    if (ids.length > 0 || (shared && scanning)) {
      claims = await claimCandidates(ids, free);
    } else if (scanning) {
      continue; // every candidate was one we hold: look again
    } else {
      // The scan ended (or stopped: checked above) and its candidates are taken.
      if (!d.scanComplete()) return false;
      // Retry sweep, after the settled results are written, so failures whose backoff is
      // over are claimable (a shared pass: in one statement); listen first, so no wake-up
      // is missed.
      const wake = d.changed();
      if (shared) {
        claims = await claimCandidates([], free);
      } else {
        await results.flush();
        // The flush may have written the hand-back of an attempt that stopped the pass (the
        // environment's fault): claimed again here, it was handed back a second time, unstarted,
        // and the run counted 2 released for 1 claimed.
        if (drain.stopping.aborted) return false;
        claims = await ledger.claimDue({ ...d.claimOpts(), limit: free });
      }
      if (claims.length === 0) {
        // Every attempt of this pod is settled and written: nothing of its own can become due.
        if (d.running() === 0 && held.size === 0) {
          if (await passOver()) return true;
          continue;
        }
        if (shared) {
          // A sibling's hand-back (its drain) becomes claimable without waking this pod: with
          // slots free, sweep again every SIBLING_POLL_MS, not only once an attempt of ours
          // ends (one long attempt left the other slots idle for as long as it ran).
          await sleepOrWake(wake, pollMs);
          pollMs = Math.min(SIBLING_POLL_MS.max, pollMs * 2);
        } else await wake;
        continue;
      }
    }
    if (drain.stopping.aborted) {
      // The stop came while we were claiming: these never started, so the claim is undone
      // (no attempt counted: `attempts` is the handler starts).
      for (const c of claims) {
        held.set(c.id, c);
        results.release(c, 'handed back unstarted: run stopping', true);
      }
      return false;
    }
    if (claims.length > 0) {
      pollMs = SIBLING_POLL_MS.first;
      d.start(claims);
    }
  }
}

/** Wait for `wake` or `ms`, whichever comes first. */
async function sleepOrWake(wake: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([wake, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}
