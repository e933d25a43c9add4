/**
 * What the next run would do (`cronsafe plan`, `cronsafe run --dry-run`): its fire and the
 * pass's plan for each item, against the ledger as it is now. Takes no lock (a run in
 * progress is neither blocked nor blocking), opens the ledger read-only, runs no handler,
 * and writes nothing: no ledger is created when there is none (then every item is new),
 * and the output directory is not touched.
 */
import type { Config } from '../config/types.js';
import { openStore } from '../ledger/open.js';
import { reading } from '../ledger/reading.js';
import { planPass, type PassPlan } from '../runner/plan.js';
import { identifyFire, type Fire } from '../schedule/fire.js';
import { fireSkip, firstPassRecorded, refreshFor, type FireSkip } from './fire-plan.js';

export { PLAN_CATEGORIES, type PassPlan, type PlanCategory } from '../runner/plan.js';

export interface DryRun extends PassPlan {
  /** Whether a ledger was read: 'none' when there is none yet. */
  ledger: 'found' | 'none';
  /** The fire a run now would be for (null without a schedule), and whether it would skip it. */
  fire: { fire: Fire; skip?: FireSkip } | null;
}

export async function dryRun(config: Config, opts: { now: number; scheduledTime?: Date; limit: number; signal?: AbortSignal }): Promise<DryRun> {
  const { schedule } = config;
  const fire = schedule ? identifyFire(schedule, new Date(opts.now), opts.scheduledTime, 'kubernetes') : null;
  const store = openStore(config);
  // No ledger yet (no SQLite file, an empty PostgreSQL schema): every item is new, and none is created here.
  const ledger = await store.openReader();
  try {
    const plan = await planPass({
      config,
      // Its reads, not its scan, name the store when they fail.
      ledger: ledger && { peek: (ids) => reading(store, ledger.peek(ids)), counts: () => reading(store, ledger.counts()) },
      now: opts.now,
      clock: Date.now,
      refresh: schedule && fire ? refreshFor(schedule, fire.occurrence.getTime()) : undefined,
      limit: opts.limit,
      signal: opts.signal,
    });
    const skip = schedule && fire ? fireSkip(schedule, fire, await reading(store, firstPassRecorded(schedule, fire, ledger))) : undefined;
    // A run now would record the skip and process nothing: it would attempt none and forget
    // none (the groups still say where each item stands).
    const none = skip ? { wouldAttempt: 0, gone: 0 } : {};
    return { ...plan, ...none, ledger: ledger ? 'found' : 'none', fire: schedule && fire ? { fire, skip } : null };
  } finally {
    await ledger?.close();
  }
}
