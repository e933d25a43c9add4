/**
 * `cronsafe daemon` whose wall clock is set back by hours (NTP correcting a clock that ran
 * ahead, a VM restored from a snapshot while its ledger lives on): the occurrences it passes
 * again already have runs. The daemon looked for the occurrence among the latest 100 runs
 * only, so a `* * * * *` job set back more than 100 minutes ran each of those occurrences a
 * second time, silently. Each is now looked up in the ledger, refused once in the log, and the
 * first occurrence that never ran still runs.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { CLI, FIXTURES, spawnCliRaw, workspace } from '../helpers/cli.js';
import { LIBFAKETIME } from '../helpers/faketime.js';

const REFUSED = 'daemon: this occurrence already ran (the wall clock was set back since); not running it again';
const DUE = 'daemon: occurrence due; starting a pass';

describe.skipIf(LIBFAKETIME === undefined)('cronsafe daemon with its wall clock set back by hours', () => {
  it('does not run again an occurrence run 150 runs ago, says so, and runs the first one that never ran', async ({ onTestFinished }) => {
    const ws = workspace(
      { handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') }, schedule: { cron: '* * * * *', timeZone: 'UTC' }, daemon: { tickSeconds: 1 } },
      { 'a.txt': 'a' },
    );
    // The runs of 10:00 to 12:29, each started half a minute after its occurrence (a slow
    // start): a tick early in a minute finds no run started since its occurrence.
    const ledger = await openSqliteLedger(ws.db);
    try {
      const first = Date.parse('2026-06-01T10:00:00Z');
      for (let i = 0; i < 150; i++) {
        const occurrence = first + i * 60_000;
        await ledger.startRun({ runId: `before-${i}`, owner: 'before', startedAt: occurrence + 30_000, scheduledFor: occurrence });
        await ledger.finishRun(`before-${i}`, occurrence + 31_000, 'completed', {});
      }
    } finally {
      await ledger.close();
    }
    // Set back to 10:01:10, standing still (libfaketime re-reads the file at each call): every
    // tick sees 10:01 due by the latest run's start, whatever the machine's load.
    const clock = path.join(ws.dir, 'faketime');
    writeFileSync(clock, '2026-06-01 10:01:10\n');
    const daemon = spawnCliRaw(process.execPath, [CLI, 'daemon', '-c', ws.configPath], {
      env: { LD_PRELOAD: LIBFAKETIME!, FAKETIME_TIMESTAMP_FILE: clock, FAKETIME_NO_CACHE: '1', FAKETIME_DONT_FAKE_MONOTONIC: '1' },
      timeoutMs: 60_000,
    });
    onTestFinished(() => void daemon.child.kill('SIGKILL')); // gone already, unless the test failed
    const refused = await daemon.waitFor((l) => l.msg === REFUSED || l.msg === DUE, 30_000);
    expect(refused).toMatchObject({ msg: REFUSED, level: 'warn', occurrence: '2026-06-01T10:01:00.000Z' });
    // Past the runs recorded: 12:30 never ran, and runs.
    writeFileSync(clock, '2026-06-01 12:30:10\n');
    await daemon.waitFor((l) => l.msg === 'run finished', 30_000);
    daemon.child.kill('SIGTERM');
    expect((await daemon.exited).code, daemon.stderr()).toBe(0);
    expect(daemon.lines.filter((l) => l.msg === DUE).map((l) => l.occurrence)).toEqual(['2026-06-01T12:30:00.000Z']);
    expect(daemon.lines.filter((l) => l.msg === REFUSED)).toHaveLength(1); // once, however many ticks saw it
  });
});

describe.skipIf(LIBFAKETIME === undefined)('cronsafe daemon started again after a wall clock set back by hours', () => {
  it('does not "resume" an earlier occurrence that completed because a pass from before the step did not finish', async ({ onTestFinished }) => {
    const ws = workspace(
      { handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') }, schedule: { cron: '0 * * * *', timeZone: 'UTC' }, daemon: { tickSeconds: 1 } },
      { 'a.txt': 'a' },
    );
    // 06:00 and 07:00 ran and completed, 07:00's half a minute late. Then the clock ran three
    // hours ahead: 10:00 was run at 10:30 by that clock and drained (the host was shutting
    // down). The host boots with its clock right, at 07:00:10.
    const at = (t: string) => Date.parse(`2026-06-01T${t}Z`);
    const ledger = await openSqliteLedger(ws.db);
    try {
      await ledger.startRun({ runId: 'six', owner: 'before', startedAt: at('06:00:00.200'), scheduledFor: at('06:00:00') });
      await ledger.finishRun('six', at('06:00:01'), 'completed', {});
      await ledger.startRun({ runId: 'seven', owner: 'before', startedAt: at('07:00:30'), scheduledFor: at('07:00:00') });
      await ledger.finishRun('seven', at('07:00:31'), 'completed', {});
      await ledger.startRun({ runId: 'ten', owner: 'before', startedAt: at('10:30:00'), scheduledFor: at('10:00:00') });
      await ledger.finishRun('ten', at('10:31:00'), 'drained', {});
    } finally {
      await ledger.close();
    }
    const clock = path.join(ws.dir, 'faketime');
    writeFileSync(clock, '2026-06-01 07:00:10\n'); // standing still until the first tick has judged it
    const daemon = spawnCliRaw(process.execPath, [CLI, 'daemon', '-c', ws.configPath], {
      env: { LD_PRELOAD: LIBFAKETIME!, FAKETIME_TIMESTAMP_FILE: clock, FAKETIME_NO_CACHE: '1', FAKETIME_DONT_FAKE_MONOTONIC: '1' },
      timeoutMs: 60_000,
    });
    onTestFinished(() => void daemon.child.kill('SIGKILL'));
    // The first tick: 07:00 is due by the latest run's start (06:00) and has a run. The resume
    // came in the same tick, for 07:00.
    await daemon.waitFor((l) => l.msg === REFUSED, 30_000);
    writeFileSync(clock, '2026-06-01 08:00:05\n'); // the next occurrence: it runs
    await daemon.waitFor((l) => l.msg === 'run finished', 30_000);
    daemon.child.kill('SIGTERM');
    expect((await daemon.exited).code, daemon.stderr()).toBe(0);
    const passes = daemon.lines.filter((l) => l.msg === 'run started').map((l) => (l.fire as { occurrence: string }).occurrence);
    expect(passes).toEqual(['2026-06-01T08:00:00.000Z']);
    expect(daemon.lines.some((l) => String(l.msg).includes('resuming it'))).toBe(false);
  });
});
