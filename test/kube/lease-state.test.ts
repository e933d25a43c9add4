/** The pure Lease decision, walked through a Lease's life on an injected clock. */
import { describe, expect, it } from 'vitest';
import { decideAcquire, leaseExpiry, MICRO_TIME_RE, microTime, timeOf } from '../../src/kube/lease/state.js';

const T0 = Date.parse('2026-11-30T10:00:00.000Z');
const held = { holderIdentity: 'pod-a/run-1', renewTime: '2026-11-30T10:00:00.123456Z', leaseDurationSeconds: 60, leaseTransitions: 4 };

describe('decideAcquire', () => {
  it('no Lease, an empty holder (released) or no holder at all: take it', () => {
    expect(decideAcquire(undefined, 'me', T0, 60)).toEqual({ action: 'take', transitions: 1 });
    expect(decideAcquire({ ...held, holderIdentity: '' }, 'me', T0, 60)).toEqual({ action: 'take', transitions: 5 });
    expect(decideAcquire({ ...held, holderIdentity: null }, 'me', T0, 60)).toEqual({ action: 'take', transitions: 5 });
  });

  it('held by someone else until renewTime + leaseDurationSeconds, then free to take', () => {
    const expiresAt = new Date('2026-11-30T10:01:00.123Z');
    expect(decideAcquire(held, 'me', T0 + 1000, 60)).toEqual({ action: 'held', holder: 'pod-a/run-1', expiresAt });
    expect(decideAcquire(held, 'me', expiresAt.getTime() - 1, 60)).toMatchObject({ action: 'held' });
    // Exactly at expiry it is no longer held.
    expect(decideAcquire(held, 'me', expiresAt.getTime(), 60)).toEqual({ action: 'take', transitions: 5, previousHolder: 'pod-a/run-1' });
  });

  it('judges by the Lease\'s own duration, not ours', () => {
    expect(decideAcquire({ ...held, leaseDurationSeconds: 5 }, 'me', T0 + 6000, 600)).toMatchObject({ action: 'take' });
    expect(decideAcquire({ ...held, leaseDurationSeconds: 600 }, 'me', T0 + 6000, 5)).toMatchObject({ action: 'held' });
  });

  it('falls back to acquireTime, and to our duration, when the record lacks them', () => {
    const partial = { holderIdentity: 'x', acquireTime: new Date(T0) };
    expect(decideAcquire(partial, 'me', T0 + 59_000, 60)).toMatchObject({ action: 'held' });
    expect(decideAcquire(partial, 'me', T0 + 60_000, 60)).toMatchObject({ action: 'take' });
    // No time at all: nobody can be renewing it.
    expect(decideAcquire({ holderIdentity: 'x' }, 'me', T0, 60)).toMatchObject({ action: 'take', previousHolder: 'x' });
  });

  it('our own identity is ours to take', () => {
    expect(decideAcquire({ ...held, holderIdentity: 'me' }, 'me', T0, 60)).toMatchObject({ action: 'take' });
  });
});

describe('times', () => {
  it('microTime has exactly 6 fractional digits and round-trips to the millisecond', () => {
    const s = microTime(T0 + 123);
    expect(s).toBe('2026-11-30T10:00:00.123000Z');
    expect(s).toMatch(MICRO_TIME_RE);
    expect(timeOf(s)).toBe(T0 + 123);
  });

  it('timeOf reads server strings (6 digits) and Dates; garbage is undefined', () => {
    expect(timeOf('2026-11-30T10:00:00.123456Z')).toBe(T0 + 123);
    expect(timeOf(new Date(T0))).toBe(T0);
    expect(timeOf('soon')).toBeUndefined();
    expect(timeOf(undefined)).toBeUndefined();
  });

  it('leaseExpiry prefers renewTime over acquireTime', () => {
    expect(leaseExpiry({ acquireTime: new Date(T0), renewTime: new Date(T0 + 5000), leaseDurationSeconds: 10 }, 60)).toBe(T0 + 15_000);
  });
});
