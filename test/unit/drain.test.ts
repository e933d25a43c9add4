import { afterEach, describe, expect, it, vi } from 'vitest';
import { AbortReason, Drain } from '../../src/runner/drain.js';

describe('Drain', () => {
  afterEach(() => vi.useRealTimers());

  it('first signal stops claiming; in-flight are aborted only at grace - margin', () => {
    vi.useFakeTimers();
    const stop = new AbortController();
    const force = new AbortController();
    const d = new Drain({ stop: stop.signal, force: force.signal, gracePeriodMs: 30_000, marginMs: 5_000 });
    expect(d.stopping.aborted).toBe(false);
    stop.abort('SIGTERM');
    expect(d.stopping.aborted).toBe(true);
    expect(d.aborting.aborted).toBe(false);
    vi.advanceTimersByTime(24_999);
    expect(d.aborting.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(d.aborting.aborted).toBe(true);
    expect(d.aborting.reason).toBeInstanceOf(AbortReason);
    expect((d.aborting.reason as AbortReason).message).toContain('drain deadline');
    d.dispose();
  });

  it('a second signal aborts at once', () => {
    const stop = new AbortController();
    const force = new AbortController();
    const d = new Drain({ stop: stop.signal, force: force.signal, gracePeriodMs: 30_000, marginMs: 5_000 });
    stop.abort('SIGTERM');
    force.abort('second SIGTERM');
    expect(d.aborting.aborted).toBe(true);
    expect((d.aborting.reason as AbortReason).message).toContain('second SIGTERM');
    d.dispose();
  });

  it('kill budget for children fits inside the margin', () => {
    const c = new AbortController();
    const d = new Drain({ stop: c.signal, force: c.signal, gracePeriodMs: 30_000, marginMs: 6_000 });
    expect(d.killAfterMs()).toBe(2_000);
    d.dispose();
  });
});
