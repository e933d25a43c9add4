import { describe, expect, it } from 'vitest';
import { AttemptSignal } from '../../src/runner/attempt-signal.js';

// The first listener is kept in a field, the others in an array (attempt-signal.ts): each
// is told once, in the order they came, and an unsubscribed one is not told.
describe('AttemptSignal.onAbort', () => {
  it('tells every listener once, in order, with the reason', () => {
    const s = new AttemptSignal();
    const told: string[] = [];
    s.onAbort((r) => told.push(`1:${String(r)}`));
    s.onAbort((r) => told.push(`2:${String(r)}`));
    s.onAbort((r) => told.push(`3:${String(r)}`));
    s.abort('stop');
    s.abort('again');
    expect(told).toEqual(['1:stop', '2:stop', '3:stop']);
    expect(s.aborted).toBe(true);
    expect(s.reason).toBe('stop');
  });

  it('does not tell one that unsubscribed, first or later, and keeps the order of those left', () => {
    const s = new AttemptSignal();
    const told: string[] = [];
    const off1 = s.onAbort(() => told.push('1'));
    const off2 = s.onAbort(() => told.push('2'));
    s.onAbort(() => told.push('3'));
    off1();
    s.onAbort(() => told.push('4'));
    off2();
    off1(); // twice: no effect on the others
    s.abort(new Error('x'));
    expect(told).toEqual(['3', '4']);
  });

  it('a lone listener that unsubscribed is not told; a new one after it is', () => {
    const s = new AttemptSignal();
    const told: string[] = [];
    const fn = () => told.push('a');
    const off = s.onAbort(fn);
    off();
    s.onAbort(() => told.push('b'));
    off(); // must not remove b
    s.abort();
    expect(told).toEqual(['b']);
  });

  it('the same function twice is told twice, each unsubscribe removes one', () => {
    const s = new AttemptSignal();
    let n = 0;
    const fn = () => n++;
    const offA = s.onAbort(fn);
    s.onAbort(fn);
    offA();
    s.abort();
    expect(n).toBe(1);
  });

  it('after the abort, a listener is told at once; the signal made later is aborted', () => {
    const s = new AttemptSignal();
    s.abort('late');
    const told: unknown[] = [];
    s.onAbort((r) => told.push(r));
    expect(told).toEqual(['late']);
    expect(s.signal.aborted).toBe(true);
    expect(s.signal.reason).toBe('late');
  });
});
