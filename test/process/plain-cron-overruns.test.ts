import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, FIXTURES, spawnCliRaw, workspace } from '../helpers/cli.js';
import { LIBFAKETIME } from '../helpers/faketime.js';
import { freePort, parseMetrics, value } from '../helpers/prom.js';

const OVERRUN = 'overrun: an occurrence came due while this run is still active';

// Plain cron (README: "and plain cron / systemd timers") has no Forbid: at each occurrence
// that comes due during a run it starts `cronsafe run`, which finds the lock held. The running
// pass's watch counts that occurrence as an overrun, and the start counted it again as a
// lock-skip: cronsafe_overruns_total went up by 2 per late occurrence, and
// CronsafeRepeatedOverruns ("three in an hour") paged on two.
describe.skipIf(LIBFAKETIME === undefined)('plain cron: an occurrence that comes due during a run, and the start cron makes for it', () => {
  it('is one overrun in cronsafe_overruns_total (and one lock skip)', async () => {
    const port = await freePort();
    const ws = workspace(
      {
        schedule: { cron: '* * * * *', timeZone: 'UTC' },
        handler: { module: path.join(FIXTURES, 'process/wait-module.mjs') },
        metrics: { port },
        // The run ends with a SIGTERM once the counts are read; its handler waits until it is
        // aborted, which the drain does at its deadline: 25 s after the stop with the default
        // grace (30 s, 5 s margin), which this test is not about.
        drain: { gracePeriodSeconds: 6, marginSeconds: 2 },
      },
      { 'a.txt': 'a' },
    );
    // Both processes read one faked wall clock, at hh:mm:52 when the run starts: the next
    // occurrence is seconds away (a start slower than that only moves it to the next minute).
    const clock = path.join(ws.dir, 'faketime');
    const offset = Math.round((((52 - (Date.now() / 1000) % 60) % 60) + 60) % 60);
    writeFileSync(clock, `+${offset}\n`);
    const env = { LD_PRELOAD: LIBFAKETIME!, FAKETIME_TIMESTAMP_FILE: clock, FAKETIME_NO_CACHE: '1', FAKETIME_DONT_FAKE_MONOTONIC: '1' };
    const running = spawnCliRaw(process.execPath, [CLI, 'run', '-c', ws.configPath], { timeoutMs: 150_000, env });
    try {
      const overrun = await running.waitFor((l) => l.msg === OVERRUN, 90_000);
      // cron's start for that occurrence (its latest at start: the one the watch just counted).
      const cron = spawnCliRaw(process.execPath, [CLI, 'run', '-c', ws.configPath], { timeoutMs: 60_000, env });
      expect((await cron.exited).code, cron.stderr()).toBe(0);
      expect(cron.lines.map((l) => l.msg)).toContain('skipped: another run holds the lock');
      const scrape = parseMetrics(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
      expect(value(scrape, 'cronsafe_lock_skips_total', { job: 'test-job' })).toBe(1);
      // The one occurrence, whichever way it was seen, unless another came due meanwhile.
      const overruns = running.lines.filter((l) => l.msg === OVERRUN).length;
      expect(overruns, `overrun of ${String(overrun.occurrence)}`).toBeGreaterThanOrEqual(1);
      expect(value(scrape, 'cronsafe_overruns_total', { job: 'test-job' })).toBe(overruns);
      running.child.kill('SIGTERM');
      expect((await running.exited).code, running.stderr()).toBe(75);
    } finally {
      running.child.kill('SIGKILL');
    }
  }, 160_000);
});
