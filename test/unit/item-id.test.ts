import { isUtf8 } from 'node:buffer';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { escapeProblem, idBytes, idFromLatin1, idFromName, isPlainId, itemPaths } from '../../src/runner/item-id.js';

const b = (...xs: Array<number | string>) => Buffer.concat(xs.map((x) => (typeof x === 'string' ? Buffer.from(x) : Buffer.of(x))));

describe('item ids: file names as bytes, escaped reversibly', () => {
  it('keeps valid UTF-8 without a backslash as it is', () => {
    for (const name of ['a.scc', '日本 é.scc', 'new\nline', '$(x)', '😀']) expect(idFromName(Buffer.from(name))).toBe(name);
  });

  it('escapes a backslash as \\\\ and a byte that is not UTF-8 as \\xHH', () => {
    expect(idFromName(Buffer.from('a\\b'))).toBe('a\\\\b');
    expect(idFromName(b('caf', 0xe9, '.txt'))).toBe('caf\\xe9.txt');
    expect(idFromName(b(0xff, 0xfe))).toBe('\\xff\\xfe');
    // Valid sequences around invalid bytes stay characters; overlong and surrogate forms are bytes.
    expect(idFromName(b('é', 0xc3, 'x'))).toBe('é\\xc3x');
    expect(idFromName(b(0xc0, 0x80))).toBe('\\xc0\\x80');
    expect(idFromName(b(0xed, 0xa0, 0x80))).toBe('\\xed\\xa0\\x80');
    expect(idFromName(b(0xe9, '\\'))).toBe('\\xe9\\\\');
  });

  it('idFromLatin1 (the scan reads names as latin1 strings) gives idFromName of the same bytes, for any bytes', () => {
    for (const name of [b('a\\b'), b('caf', 0xe9), b('日本'), b(0x7f, 0x80), b('plain.txt')]) expect(idFromLatin1(name.toString('latin1'))).toBe(idFromName(name));
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 24 }), (a) => {
        const name = Buffer.from(a);
        expect(idFromLatin1(name.toString('latin1'))).toBe(idFromName(name));
      }),
      { numRuns: 5000 },
    );
  });

  it('a literal "\\xe9" in a name and the byte 0xE9 get different ids', () => {
    expect(idFromName(Buffer.from('\\xe9'))).toBe('\\\\xe9');
    expect(idFromName(b(0xe9))).toBe('\\xe9');
  });

  it('round-trips any bytes (property), and well-formed ids only', () => {
    const name = fc.uint8Array({ minLength: 1, maxLength: 24 }).map((a) => Buffer.from(a.filter((x) => x !== 0x2f && x !== 0)));
    fc.assert(
      fc.property(name, (n) => {
        const id = idFromName(n);
        const plain = isUtf8(n) && !n.includes(0x5c);
        return idBytes(id).equals(n) && escapeProblem(id) === null && isPlainId(id) === plain && (!plain || id === n.toString());
      }),
      { numRuns: 5000 },
    );
  });

  it('names a malformed escape', () => {
    expect(escapeProblem('a\\b')).toMatch(/backslash at 1 starts no escape/);
    expect(escapeProblem('a\\x4')).toMatch(/starts no escape/);
    expect(escapeProblem('a\\xE9')).toMatch(/starts no escape/); // lowercase only: one spelling per byte
    expect(() => idBytes('a\\q')).toThrow(/starts no escape/);
  });

  it('gives the real path as bytes, and as text when it is UTF-8', () => {
    expect(itemPaths('/src', 'd/a.txt')).toEqual({ raw: Buffer.from('/src/d/a.txt'), text: '/src/d/a.txt' });
    expect(itemPaths('/src/', 'a\\\\b')).toEqual({ raw: Buffer.from('/src/a\\b'), text: '/src/a\\b' });
    const odd = itemPaths('/src', 'd/caf\\xe9');
    expect(odd.raw.equals(b('/src/d/caf', 0xe9))).toBe(true);
    expect(odd.text).toBeNull();
  });
});
