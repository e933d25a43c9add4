import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, FIXTURES, finished, spawnCliRaw, workspace } from '../helpers/cli.js';
import { LIBFAKETIME } from '../helpers/faketime.js';

const OVERRUN = 'overrun: an occurrence came due while this run is still active';

// The wall clock stepped forward by a year during a run (NTP correcting a board that booted
// with an old clock, a VM resumed): every occurrence of the year "came due" at the overrun
// watch's next wake-up. Counted one by one, that was half a million log lines and ledger
// writes in one synchronous loop (about a minute here; ten years, ten minutes), the process
// deaf to SIGTERM and its Lease unrenewed meanwhile. libfaketime steps the wall clock (re-read
// from a file at each call) and leaves the monotonic one alone, as NTP does.
describe.skipIf(LIBFAKETIME === undefined)('a step forward of the wall clock during a run', () => {
  it('counts at most 100 overruns at once, says the rest are not counted in one line, and the run goes on', async () => {
    const ws = workspace(
      { schedule: { cron: '* * * * *', timeZone: 'UTC' }, handler: { module: path.join(FIXTURES, 'process/step-clock-module.mjs') } },
      { 'a.txt': 'a' },
    );
    const clock = path.join(ws.dir, 'faketime');
    const gate = path.join(ws.dir, 'gate');
    // The faked clock starts at hh:mm:50: the minute the watch wakes at is seconds away (a
    // start slower than that only moves the step to the next minute).
    const offset = Math.round((((50 - (Date.now() / 1000) % 60) % 60) + 60) % 60);
    writeFileSync(clock, `+${offset}\n`);
    const run = spawnCliRaw(process.execPath, [CLI, 'run', '-c', ws.configPath], {
      timeoutMs: 95_000,
      env: {
        LD_PRELOAD: LIBFAKETIME!,
        FAKETIME_TIMESTAMP_FILE: clock,
        FAKETIME_NO_CACHE: '1',
        FAKETIME_DONT_FAKE_MONOTONIC: '1',
        STEP_SECONDS: String(365 * 24 * 3600),
        GATE: gate,
      },
    });
    try {
      const skipped = await run.waitFor((l) => l.msg.startsWith('overrun: more occurrences came due at once'), 80_000);
      expect(skipped).toMatchObject({ level: 'warn', counted: 100 });
      expect(Date.parse(String(skipped.now)) - Date.parse(String(skipped.from))).toBeGreaterThan(300 * 24 * 3600_000);
      expect(run.lines.filter((l) => l.msg === OVERRUN)).toHaveLength(100);
      writeFileSync(gate, '');
      const { code } = await run.exited;
      expect(code, run.stderr()).toBe(0);
      expect(finished(run)).toMatchObject({ outcome: 'completed', counts: { succeeded: 1 } });
      expect(run.lines.filter((l) => l.msg === OVERRUN)).toHaveLength(100);
    } finally {
      run.child.kill('SIGKILL');
    }
  }, 100_000);
});
