import { describe, expect, it } from 'vitest';
import { coerceError } from '../../src/errors.js';

describe('coerceError: anything thrown becomes an Error with a readable message', () => {
  it('keeps an Error as it is (same object, stack and all)', () => {
    const err = new TypeError('boom');
    expect(coerceError(err)).toBe(err);
  });

  it('takes a thrown string as the message', () => {
    expect(coerceError('disk full').message).toBe('disk full');
  });

  it('shows a thrown object as JSON, not [object Object]', () => {
    expect(coerceError({ code: 'E42', detail: 'x' }).message).toBe('{"code":"E42","detail":"x"}');
  });

  it('falls back to String() for what JSON cannot show (a cycle, a BigInt)', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(coerceError(cyclic).message).toBe('[object Object]');
    expect(coerceError(10n).message).toBe('10');
  });
});
