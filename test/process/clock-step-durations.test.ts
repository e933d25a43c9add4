import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, finished, spawnCliRaw, workspace } from '../helpers/cli.js';
import { LIBFAKETIME } from '../helpers/faketime.js';

// The wall clock set back an hour during a run (NTP, a VM resumed from a snapshot): the
// run's `run finished` durationMs and each attempt's `item done` ms are lengths of time,
// which the step must not make negative. libfaketime steps the wall clock (re-read from a
// file at each call) and leaves the monotonic one alone, as NTP does.
describe.skipIf(LIBFAKETIME === undefined)('a step back of the wall clock during a run', () => {
  it('leaves the run\'s and the attempt\'s durations in the log as long as they really were', async () => {
    const ws = workspace({}, { 'a.txt': 'a' });
    const clock = path.join(ws.dir, 'faketime');
    writeFileSync(clock, '+0\n');
    const module = path.join(ws.dir, 'step-back.mjs');
    writeFileSync(
      module,
      `import { writeFileSync } from 'node:fs';
export default async function stepBack() {
  writeFileSync(${JSON.stringify(clock)}, '-3600\\n');
  await new Promise((r) => setTimeout(r, 50));
}
`,
    );
    writeFileSync(ws.configPath, `${readFileSync(ws.configPath, 'utf8')}handler:\n  module: ${JSON.stringify(module)}\n`);
    const run = spawnCliRaw(process.execPath, [CLI, 'run', '-c', ws.configPath], {
      env: { LD_PRELOAD: LIBFAKETIME!, FAKETIME_TIMESTAMP_FILE: clock, FAKETIME_NO_CACHE: '1', FAKETIME_DONT_FAKE_MONOTONIC: '1' },
    });
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(0);
    const end = finished(run);
    expect(end).toMatchObject({ outcome: 'completed', counts: { succeeded: 1 } });
    expect(end!.durationMs).toBeGreaterThanOrEqual(50);
    expect(end!.durationMs).toBeLessThan(60_000);
    const done = run.lines.find((l) => l.msg === 'item done');
    expect(done?.ms).toBeGreaterThanOrEqual(40);
    expect(done?.ms).toBeLessThan(60_000);
  });
});
