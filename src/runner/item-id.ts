import { isUtf8 } from 'node:buffer';
import { decodeEscaping } from '../utf8-bytes.js';

/**
 * Item ids are file names as bytes, written as text. Linux allows any byte but `/` and
 * NUL in a name, including bytes that are not UTF-8 (`caf\xe9` from a Latin-1 producer)
 * and backslashes, while ids must be strings (the ledger, logs, argv, JSON). So an id is a
 * reversible, stable escape of the path's bytes relative to source.directory:
 *   - valid UTF-8 without a backslash stays as it is (nearly every name: id = name);
 *   - a backslash becomes `\\`;
 *   - a byte that is not part of valid UTF-8 becomes `\xHH` (two lowercase hex digits).
 * `/` separates the segments and is never escaped. Before this, a backslash made an id
 * "unsafe" (dead-lettered at once) and invalid bytes were decoded lossily (the handler got
 * a path that did not exist, and the item was dead-lettered), so no item that was ever done
 * changes its id.
 */

const BACKSLASH = 0x5c;

/** The id segment for one file name's bytes (see above). */
export function idFromName(name: Buffer): string {
  if (isUtf8(name)) {
    const s = name.toString('utf8');
    return s.includes('\\') ? s.replaceAll('\\', '\\\\') : s;
  }
  return decodeEscaping(name, (byte) => `\\x${byte.toString(16).padStart(2, '0')}`, (s) => (s === '\\' ? '\\\\' : s));
}

/** idFromName of a name's bytes given as a latin1 string (dir-entries.ts): a name of ASCII alone is its own id, as idFromName makes it. */
export function idFromLatin1(name: string): string {
  if (NOT_ASCII.test(name)) return idFromName(Buffer.from(name, 'latin1'));
  return name.includes('\\') ? name.replaceAll('\\', '\\\\') : name;
}

const NOT_ASCII = /[^\x00-\x7f]/;

const ESCAPE = /\\(\\|x[0-9a-f]{2})/y;

/** Why `id` is not a well-formed escape (a `\` not followed by `\` or `xHH`), or null. */
export function escapeProblem(id: string): string | null {
  for (let i = id.indexOf('\\'); i !== -1; i = id.indexOf('\\', i)) {
    ESCAPE.lastIndex = i;
    const m = ESCAPE.exec(id);
    if (!m) return `backslash at ${i} starts no escape (\\\\ or \\xHH)`;
    i += m[0].length;
  }
  return null;
}

/** True when the id is the file's relative path itself (no escape in it): the common case. */
export const isPlainId = (id: string): boolean => !id.includes('\\');

/** The bytes of the relative path an id stands for (inverse of idFromName per segment). */
export function idBytes(id: string): Buffer {
  if (isPlainId(id)) return Buffer.from(id, 'utf8');
  const parts: Buffer[] = [];
  let start = 0;
  for (let i = id.indexOf('\\'); i !== -1; i = id.indexOf('\\', start)) {
    parts.push(Buffer.from(id.slice(start, i), 'utf8'));
    if (id[i + 1] === '\\') {
      parts.push(Buffer.of(BACKSLASH));
      start = i + 2;
    } else if (id[i + 1] === 'x' && /^[0-9a-f]{2}$/.test(id.slice(i + 2, i + 4))) {
      parts.push(Buffer.of(Number.parseInt(id.slice(i + 2, i + 4), 16)));
      start = i + 4;
    } else {
      throw new Error(`item id ${JSON.stringify(id)}: ${escapeProblem(id) ?? 'bad escape'}`);
    }
  }
  parts.push(Buffer.from(id.slice(start), 'utf8'));
  return Buffer.concat(parts);
}

/**
 * Where an item's file is: `raw`, its absolute path as bytes (always right), and `text`,
 * the same path as a string when its bytes are valid UTF-8 (so it can go into argv and
 * the environment), else null (see the exec handler's links).
 */
export function itemPaths(sourceDir: string, id: string): { raw: Buffer; text: string | null } {
  const root = sourceDir.endsWith('/') ? sourceDir : `${sourceDir}/`;
  if (isPlainId(id)) return { raw: Buffer.from(root + id, 'utf8'), text: root + id };
  const raw = Buffer.concat([Buffer.from(root, 'utf8'), idBytes(id)]);
  return { raw, text: isUtf8(raw) ? raw.toString('utf8') : null };
}

/** Longest path the kernel takes, in bytes with its NUL (PATH_MAX); a longer one is ENAMETOOLONG. */
export const PATH_MAX = 4096;

/**
 * Why no handler could open the item's file by its path (longer than PATH_MAX: the scan
 * reached it through a directory it could open, but a path from the root cannot), or null.
 * Known before the handler runs, so it is not run five times to learn it.
 */
export function itemPathProblem(sourceDir: string, id: string): string | null {
  // No Buffer per item in the common case: a UTF-16 unit is at most 3 bytes of UTF-8, and
  // an escape (`\xHH`, 4 units) stands for one byte.
  if (sourceDir.length + 1 + 3 * id.length < PATH_MAX) return null;
  const bytes = itemPaths(sourceDir, id).raw.length;
  return bytes < PATH_MAX ? null : `the item's path is ${bytes} bytes, longer than Linux allows (PATH_MAX, ${PATH_MAX} with its NUL): no handler could open it`;
}
