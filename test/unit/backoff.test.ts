import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { backoffDelayMs, decideAfterFailure } from '../../src/ledger/backoff.js';

const policy = { backoffMs: 1000, backoffMaxMs: 8000 };

describe('backoffDelayMs', () => {
  it('doubles per charged attempt up to the cap (random at its top)', () => {
    const top = (): number => 1;
    expect([1, 2, 3, 4, 5, 6].map((c) => backoffDelayMs(c, policy, top))).toEqual([1000, 2000, 4000, 8000, 8000, 8000]);
  });

  it('keeps half of the delay fixed (random at 0), so a retry never comes back at once', () => {
    expect([1, 2, 3, 4, 9].map((c) => backoffDelayMs(c, policy, () => 0))).toEqual([500, 1000, 2000, 4000, 4000]);
  });

  it('spreads items that failed together over the random half', () => {
    const delays = Array.from({ length: 100 }, (_, i) => backoffDelayMs(3, policy, () => i / 100));
    expect(new Set(delays).size).toBe(100);
    expect(Math.min(...delays)).toBe(2000);
    expect(Math.max(...delays)).toBeLessThan(4000);
  });

  it('does not overflow for absurd attempt counts, and treats charged < 1 as the first retry', () => {
    expect(backoffDelayMs(5000, policy, () => 1)).toBe(8000);
    expect(backoffDelayMs(0, policy, () => 1)).toBe(1000);
  });

  it('is 0 when backoff is switched off', () => {
    expect(backoffDelayMs(3, { backoffMs: 0, backoffMaxMs: 8000 }, () => 0.5)).toBe(0);
  });

  it('stays an integer within [ceiling/2, ceiling] and never exceeds the cap (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 3000 }),
        fc.integer({ min: 1, max: 1e7 }),
        fc.integer({ min: 1, max: 1e9 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (charged, backoffMs, backoffMaxMs, r) => {
          const d = backoffDelayMs(charged, { backoffMs, backoffMaxMs }, () => r);
          const ceiling = Math.min(backoffMaxMs, backoffMs * 2 ** (charged - 1));
          expect(Number.isInteger(d)).toBe(true);
          expect(d).toBeGreaterThanOrEqual(Math.floor(ceiling / 2));
          expect(d).toBeLessThanOrEqual(Math.ceil(ceiling));
          expect(d).toBeLessThanOrEqual(backoffMaxMs);
        },
      ),
    );
  });

  it('never shrinks as charged grows, for the same random draw (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 60 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (c, r) => {
        expect(backoffDelayMs(c + 1, policy, () => r)).toBeGreaterThanOrEqual(backoffDelayMs(c, policy, () => r));
      }),
    );
  });
});

describe('decideAfterFailure', () => {
  const retry = { maxAttempts: 3, ...policy };

  it('backs off while charged attempts remain', () => {
    expect(decideAfterFailure(2, retry, 10_000, () => 0)).toEqual({ state: 'pending', availableAt: 11_000 });
  });

  it('dead-letters once charged reaches maxAttempts', () => {
    expect(decideAfterFailure(3, retry, 10_000, () => 0)).toEqual({ state: 'dead' });
    expect(decideAfterFailure(4, retry, 10_000, () => 0)).toEqual({ state: 'dead' });
  });
});
