/**
 * Text of bytes that may not be UTF-8, with each byte that is not part of valid UTF-8 kept as
 * something the caller chooses: a leaf module, shared by item ids (runner/item-id.ts) and the
 * config reader (config/read-yaml.ts).
 */

/**
 * `bytes` as text, each byte that is not part of valid UTF-8 written as `bad(byte)` (one
 * byte at a time), each valid character as `valid(character)`: an item id's `\xHH`, or the
 * config reader's lone surrogates, which keep the bytes its message must show.
 */
export function decodeEscaping(bytes: Buffer, bad: (byte: number) => string, valid: (character: string) => string = (c) => c): string {
  let out = '';
  let i = 0;
  while (i < bytes.length) {
    const len = utf8SequenceLength(bytes, i);
    if (len === 0) {
      out += bad(bytes[i]!);
      i += 1;
      continue;
    }
    out += valid(bytes.toString('utf8', i, i + len));
    i += len;
  }
  return out;
}

/** The length of the valid UTF-8 sequence starting at `i`, or 0 when the byte there starts none. */
function utf8SequenceLength(b: Buffer, i: number): number {
  const c = b[i]!;
  if (c < 0x80) return 1;
  const cont = (k: number) => i + k < b.length && (b[i + k]! & 0xc0) === 0x80;
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    const c1 = b[i + 1];
    if (c1 === undefined) return 0;
    // No overlong forms (E0 80..9F) and no surrogates (ED A0..BF).
    if ((c === 0xe0 && c1 < 0xa0) || (c === 0xed && c1 > 0x9f)) return 0;
    return cont(1) && cont(2) ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    const c1 = b[i + 1];
    if (c1 === undefined) return 0;
    // No overlong forms (F0 80..8F) and nothing past U+10FFFF (F4 90..).
    if ((c === 0xf0 && c1 < 0x90) || (c === 0xf4 && c1 > 0x8f)) return 0;
    return cont(1) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}
