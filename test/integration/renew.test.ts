import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import type { Claim, Ledger } from '../../src/ledger/types.js';
import { discoverAndClaim } from '../contract/ledger-fixtures.js';
import { startRenewal } from '../../src/runner/renew.js';
import { memoryLogger } from '../helpers/log.js';
import { until } from '../helpers/wait.js';

const open: Ledger[] = [];
const timers: NodeJS.Timeout[] = [];
afterEach(async () => {
  for (const t of timers.splice(0)) clearInterval(t);
  for (const l of open.splice(0)) await l.close();
});

async function twoConnections() {
  const db = path.join(mkdtempSync(path.join(tmpdir(), 'cronsafe-renew-')), 'l.db');
  const a = await openSqliteLedger(db);
  const b = await openSqliteLedger(db);
  open.push(a, b);
  return { a, b };
}

const retry = { maxAttempts: 99, backoffMs: 0, backoffMaxMs: 0 };

describe('lease renewal', () => {
  it('extends held leases, and aborts an attempt whose claim another owner took over', async () => {
    const { a, b } = await twoConnections();
    const [mine, other] = await discoverAndClaim(a, [{ id: 'x' }, { id: 'y' }], { owner: 'me', runId: 'r1', now: Date.now(), leaseMs: 1000 });
    const held = new Map<string, Claim>([['x', mine!], ['y', other!]]);
    const ctlX = new AbortController();
    const ctlY = new AbortController();
    const { log, lines } = memoryLogger();
    // A lost claim is not renewed: the lease guard must not take the round's time for its lease.
    const lost: Claim[] = [];
    const onLost = (c: Claim) => void lost.push(c);
    timers.push(startRenewal({ ledger: a, owner: 'me', held, inflight: new Map([['x', ctlX], ['y', ctlY]]), log, now: Date.now, leaseMs: 60_000, everyMs: 20, killAfterMs: () => 100, onLost }));
    // Another pod takes x over (as after a lease expiry).
    await b.reclaimOrphans('thief', { now: Date.now(), retry });
    await discoverAndClaim(b, [{ id: 'x' }], { owner: 'thief', runId: 'r2', now: Date.now(), leaseMs: 60_000 });
    await new Promise<void>((resolve) => ctlX.signal.addEventListener('abort', () => resolve(), { once: true }));
    expect(ctlX.signal.reason).toMatchObject({ message: 'claim lost' });
    expect(lines.some((l) => l.msg === 'claim lost (lease expired and taken over); aborting this attempt' && l.itemId === 'x')).toBe(true);
    expect((await a.get('x'))?.owner).toBe('thief');
    expect(lost).toContain(mine);
  });

  it('does not abort a newer claim of the same id (completion raced the renewal, then a retry re-claimed it)', async () => {
    const { a } = await twoConnections();
    const [first] = await discoverAndClaim(a, [{ id: 'x' }], { owner: 'me', runId: 'r1', now: Date.now(), leaseMs: 60_000 });
    const held = new Map<string, Claim>([['x', first!]]);
    const ctl = new AbortController();
    const { log } = memoryLogger();
    // The ledger reports x lost for the renewal that saw `first`; meanwhile x was re-claimed.
    let rounds = 0;
    const racing: Ledger = Object.create(a, {
      renew: {
        value: async () => {
          rounds++;
          held.set('x', { ...first!, attempt: first!.attempt + 1 });
          return ['x'];
        },
      },
    });
    const lost: Claim[] = [];
    timers.push(
      startRenewal({ ledger: racing, owner: 'me', held, inflight: new Map([['x', ctl]]), log, now: Date.now, leaseMs: 60_000, everyMs: 10, killAfterMs: () => 100, onLost: (c) => void lost.push(c) }),
    );
    await until(() => rounds >= 3, 'three renewal rounds');
    expect(ctl.signal.aborted).toBe(false);
    expect(lost).toEqual([]);
  });
});
