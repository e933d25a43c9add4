import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, statusJson, workspace, type LogLine } from '../helpers/cli.js';
import { LIBFAKETIME, spawnFastCli } from '../helpers/faketime.js';

// A pass that cannot reach the state store (the SQLite ledger's directory replaced by a file;
// a read-only ledger) is tried again at every tick, and the outage is said once. But each try
// also said `daemon: occurrence due; starting a pass` at info: one line a tick for as long as
// the outage lasted (2,880 a day at the default tick), each about a pass that never started.
// Those tries are at debug now; the first try and the one after the outage stay at info.

const UNAVAILABLE = 'daemon: the state store is unavailable; trying again every tick';
const BACK = 'daemon: the state store is available again';
const STARTING = 'daemon: occurrence due; starting a pass';

describe.skipIf(LIBFAKETIME === undefined)('cronsafe daemon, a pass that cannot reach the state store', () => {
  it('says "starting a pass" at info once for the outage, not at every tick', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'handlers/module-ok.mjs') }, schedule: { cron: '0 * * * *', timeZone: 'UTC' } }, { 'a.txt': 'a' });
    const daemon = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 12:50:30', { timeoutMs: 90_000 });
    let out: LogLine, back: LogLine;
    // The 12:00 pass (late) at once, and the state store gone before 13:00, 9.5 real seconds on.
    try {
      await daemon.waitFor((l) => l.msg === 'run finished', 30_000);
      rmSync(ws.state, { recursive: true });
      writeFileSync(ws.state, 'not a directory');
      out = await daemon.waitFor((l) => l.msg === UNAVAILABLE, 60_000);
      // Four more tries of that pass, a tick apart.
      const tries = () => daemon.lines.slice(daemon.lines.indexOf(out)).filter((l) => l.msg === STARTING).length;
      await daemon.waitFor(() => tries() >= 4, 30_000);
      rmSync(ws.state);
      // The daemon's next try may make it first (a state directory gone is made again).
      mkdirSync(ws.state, { recursive: true });
      back = await daemon.waitFor((l) => l.msg === BACK, 30_000);
    } finally {
      daemon.child.kill('SIGTERM');
    }
    expect((await daemon.exited).code, daemon.stderr()).toBe(0);
    const during = daemon.lines.slice(daemon.lines.indexOf(out), daemon.lines.indexOf(back)).filter((l) => l.msg === STARTING);
    expect(during.length).toBeGreaterThanOrEqual(4);
    expect(during.filter((l) => l.level !== 'debug')).toEqual([]); // before: every one at info
    expect(daemon.lines.filter((l) => l.msg === STARTING && l.level === 'info')).toHaveLength(2); // 12:00 and 13:00
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
  }, 60_000);
});
