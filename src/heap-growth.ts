/**
 * Keep V8's heap from growing with the backlog during a pass.
 *
 * A pass promotes ~1 KB per item into V8's old generation. After each major collection V8
 * lets the old generation grow by a fixed step of 8 MB past what survived (~10 MB for a
 * run) before it collects again (`--trace-gc`: ~10 MB after each, ~18.5 MB before the
 * next, with or without `--optimize-for-size`; the bin's `--heap-growing-percent=10` makes the
 * step, not V8's growing factor, the larger of the two for a heap this size), and no flag sets the step. A 1,000-item run ends before the first such cycle, a 1,000,000-item
 * run goes through hundreds of them, so the step was most of the difference in their peak
 * RSS (docs/benchmarks.md, issue 13 item 4). Starting the incremental marking once 30% of
 * the step is used keeps the old generation within ~4-7 MB of what survived, about a short
 * run's, for ~2x the (incremental, mostly concurrent) collections. It was 40% while the bin
 * had --optimize-for-size, whose memory-reducing collections did part of the work; without
 * it, at 40% a handler that churns (test/process/heap-growth.test.ts) let the old generation
 * grow 8.7-10.3 MB per cycle with the bin's one V8 worker thread, and 6.7-7.7 MB at 30%
 * (docs/benchmarks.md, 2026-12-06 22:28 UTC). The no-op pass's CPU: the bin without
 * --optimize-for-size, 3.92 s per 100,000 items at 40%, 4.20 s at 30%, 4.95 s with it.
 *
 * V8 reads the flag at every allocation-limit check, so it takes effect when set at run
 * time, from inside: the bin's shebang and `node dist/cli.js` get it alike. A value given
 * on node's command line is left as it is. Imported by the run once it holds the lock only:
 * `--version`, `schedule` and a lock skip do not load node:v8 (~2-5 ms).
 */
import { setFlagsFromString } from 'node:v8';

const FLAG = '--incremental-marking-hard-trigger';
/** Percent of the growth step after which marking starts (V8's default, 0, waits for all of it). */
export const MARKING_TRIGGER_PERCENT = 30;

let done = false;

/** Set once per process, before the first pass (a daemon's later passes keep it). */
export function boundHeapGrowth(execArgv: readonly string[] = process.execArgv): void {
  if (done) return;
  done = true;
  if (markingTriggerGiven(execArgv)) return;
  setFlagsFromString(`${FLAG}=${MARKING_TRIGGER_PERCENT}`);
}

/**
 * Whether node's command line sets the trigger itself: V8 reads `-` and `_` in a flag's name
 * alike, so `--incremental_marking-hard-trigger=10` is the same flag as the dashed one.
 */
export function markingTriggerGiven(execArgv: readonly string[]): boolean {
  return execArgv.some((a) => {
    const name = a.split('=', 1)[0]!.replace(/_/g, '-');
    return name === FLAG;
  });
}
