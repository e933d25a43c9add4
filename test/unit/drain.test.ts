import { afterEach, describe, expect, it, vi } from 'vitest';
import { AbortReason, Drain, firstAbort } from '../../src/runner/drain.js';

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

describe('firstAbort', () => {
  it('aborts with the reason of whichever signal fires first, and stops listening on dispose', () => {
    const cli = new AbortController();
    const lease = new AbortController();
    const merged = firstAbort(cli.signal, lease.signal, undefined);
    expect(merged.signal.aborted).toBe(false);
    lease.abort('lease lost');
    expect(merged.signal.reason).toBe('lease lost');
    cli.abort('SIGTERM');
    expect(merged.signal.reason).toBe('lease lost');

    const a = new AbortController();
    const b = new AbortController();
    const m2 = firstAbort(a.signal, b.signal);
    m2.dispose();
    a.abort('late');
    expect(m2.signal.aborted).toBe(false);
  });

  it('passes a lone signal through, and is aborted at once if a source already was', () => {
    const only = new AbortController();
    expect(firstAbort(only.signal, undefined).signal).toBe(only.signal);
    const done = new AbortController();
    done.abort('already');
    expect(firstAbort(new AbortController().signal, done.signal).signal.reason).toBe('already');
  });
});

