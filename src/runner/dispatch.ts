import pLimit from 'p-limit';
import type { Claim } from '../ledger/types.js';
import { runItem } from './attempt.js';
import { claimLoop } from './claim-loop.js';
import { resumeAtOnce, type PassState } from './pass-state.js';
import { waitForTasks } from './wait-for-tasks.js';

/**
 * The dispatcher of a pass: claim for free handler slots (claim-loop.ts), start an attempt
 * per claim (at most `concurrency` at a time), then wait for them all. After a drain
 * deadline, what did not stop is handed back uncharged.
 */
export async function dispatch(p: PassState): Promise<void> {
  const { config, held, inflight, results } = p;
  const tasks = new Set<Promise<void>>();
  // p-limit is the slot count; we claim only for free slots, so its queue stays empty.
  const limit = pLimit(config.concurrency);
  const startOne = (claim: Claim, rootReplaced: boolean) => {
    if (held.has(claim.id)) throw new Error(`bug: the ledger handed out ${JSON.stringify(claim.id)} again while this run holds it (attempt ${claim.attempt})`);
    held.set(claim.id, claim);
    if (p.leaseGuard) p.claimedAt.set(claim, p.lastClaimAt);
    p.claimed++;
    // then, not finally: finally makes a promise and two closures more per attempt, and
    // waits a microtask more. runItem never rejects; if it did, the task still would.
    const ended = () => {
      tasks.delete(task);
      p.notify();
    };
    const task: Promise<void> = limit(() => runItem(p, claim, rootReplaced)).then(ended, (err: unknown) => {
      ended();
      throw err;
    });
    tasks.add(task);
  };
  // The source root asked once for the claims of one ledger answer, just before their
  // attempts start (not around each attempt: two stat(2) per item, each making a Stats and
  // its four Dates). Found replaced, their attempts stop the pass before their handlers run. A root
  // replaced after this check is found by the check before the attempt's result is
  // written (PassState.rootCheckedBeforeWrite), or before its output is committed. The
  // answer of the check before the write that made these claims, if just given, stands
  // (PassState.rootReplacedAtStart).
  const start = (claims: readonly Claim[]) => {
    const rootReplaced = p.rootReplacedAtStart();
    for (const c of claims) startOne(c, rootReplaced);
  };
  try {
    p.sweepComplete = await claimLoop({
      ledger: p.ledger,
      results,
      channel: p.channel,
      drain: p.drain,
      log: p.log,
      held,
      claimOpts: p.claimOpts,
      freeSlots: () => config.concurrency - limit.activeCount - limit.pendingCount,
      running: () => tasks.size,
      start,
      changed: p.changed,
      scanComplete: () => p.scanComplete,
      queueSize: config.queueSize,
      // Claims of the pass whose lease expired resume at once, as at start (charged).
      retry: resumeAtOnce(p.retry),
      outputs: p.outputs,
      beforeClaim: p.beforeClaim,
    });
  } catch (err) {
    p.fail(err, 'claim failed; stopping the pass', 'claim failure');
  }
  if (await waitForTasks(tasks, p.drain, p.log)) {
    // Attempts that did not stop in time (a module ignoring its signal, a child's pipes
    // held by a process that left its group) are not the items' fault: hand them back
    // uncharged before we exit. Should one still finish, its write is fenced.
    for (const id of inflight.keys()) {
      const claim = held.get(id);
      if (claim) results.release(claim, 'interrupted: its handler did not stop within the drain margin');
    }
  }
}
