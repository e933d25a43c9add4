import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { findLiveRun } from '../../src/lock/heartbeat.js';

const root = mkdtempSync(path.join(tmpdir(), 'cronsafe-beat-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

describe('findLiveRun: is another run of this job alive?', () => {
  const T = 1_000_000;
  const STALE = 90_000;

  it('a run on another host is alive while it beat within the stale time', async () => {
    const ledger = await openSqliteLedger(path.join(root, `${++n}.db`));
    await ledger.startRun({ runId: 'r1', owner: 'other-node:1:r1', startedAt: T });
    expect((await findLiveRun(ledger, 'me', T + 10_000, STALE))?.runId).toBe('r1');
    expect(await findLiveRun(ledger, 'me', T + STALE + 1, STALE)).toBeNull();
    await ledger.heartbeat('r1', T + STALE);
    expect((await findLiveRun(ledger, 'me', T + STALE + 1, STALE))?.runId).toBe('r1');
    await ledger.finishRun('r1', T + STALE + 2, 'completed', {});
    expect(await findLiveRun(ledger, 'me', T + STALE + 3, STALE)).toBeNull();
    await ledger.close();
  });

  it('on this host, by its process: alive while the pid exists and is not ours', async () => {
    const ledger = await openSqliteLedger(path.join(root, `${++n}.db`));
    const now = Date.now();
    await ledger.startRun({ runId: 'gone', owner: `${hostname()}:2147483646:gone`, startedAt: now });
    await ledger.startRun({ runId: 'mine', owner: `${hostname()}:${process.pid}:mine`, startedAt: now });
    expect(await findLiveRun(ledger, `${hostname()}:${process.pid}:new`, now, STALE)).toBeNull();
    await ledger.startRun({ runId: 'init', owner: `${hostname()}:1:init`, startedAt: now }); // pid 1 exists
    expect((await findLiveRun(ledger, `${hostname()}:${process.pid}:new`, now, STALE))?.runId).toBe('init');
    await ledger.close();
  });
});
