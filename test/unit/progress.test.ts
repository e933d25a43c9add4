import { describe, expect, it } from 'vitest';
import { Progress, type ProgressSnapshot } from '../../src/runner/progress.js';
import { memoryLogger } from '../helpers/log.js';

const base: ProgressSnapshot = {
  scanned: 100,
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

describe('Progress (the periodic `progress` log line)', () => {
  it('after the scan, the ETA covers the items waiting for a slot, not only those in flight', () => {
    const { log, lines } = memoryLogger();
    let t = 0;
    let snap: ProgressSnapshot = { ...base, claimed: 2, inFlight: 2, queued: 98 };
    const progress = new Progress(log, () => t, 10_000, () => snap);
    progress.start();
    progress.stop();
    // 10 s later: 10 done at 1 item/s, 2 running, 88 still waiting in the channel (never claimed).
    t = 10_000;
    snap = { ...base, claimed: 12, succeeded: 10, inFlight: 2, queued: 88, scanComplete: true };
    progress.report();
    expect(lines.at(-1)).toMatchObject({ msg: 'progress', done: 10, total: 100, ratePerSec: 1, etaSeconds: 90 });
  });

  it('the items forgotten as gone or fenced are no longer counted as left to do', () => {
    const { log, lines } = memoryLogger();
    let t = 0;
    let snap: ProgressSnapshot = { ...base, claimed: 2, inFlight: 2, queued: 98 };
    const progress = new Progress(log, () => t, 10_000, () => snap);
    progress.start();
    progress.stop();
    // 10 s later: 8 done (0.8 item/s), 1 deleted after the scan (gone), 1 taken by another
    // run (fenced), 2 running, 88 waiting: 90 left.
    t = 10_000;
    snap = { ...base, claimed: 12, succeeded: 8, gone: 1, fenced: 1, inFlight: 2, queued: 88, scanComplete: true };
    progress.report();
    expect(lines.at(-1)).toMatchObject({ msg: 'progress', total: 100, etaSeconds: Math.round(90 / 0.8) });
  });
});
