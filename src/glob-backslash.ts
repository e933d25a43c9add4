/**
 * A glob ending in a backslash that escapes nothing (`tmp\`, as Windows writes a directory):
 * ids write a backslash of a name as `\\` (runner/item-id.ts), so it names no item, and an
 * exclude so written left the directory in the scan, silently. A leaf module, so that the
 * config and the program's option parsers check it without loading picomatch.
 */
export function endsInLoneBackslash(glob: string): boolean {
  return /(^|[^\\])(\\\\)*\\$/.test(glob);
}

export const LONE_BACKSLASH =
  'expected a glob that can match an item: one ending in a lone "\\" escapes nothing (a backslash in a name is "\\\\" in its id; "/" separates directories)';

/**
 * A glob with an empty or a "." segment (`a//b`, `a/./b`, as a path pasted or built from
 * variables gives): ids have neither, so it matched nothing, silently. A leading "./" is read
 * away by the matcher (`./tmp` is `tmp`); a leading or trailing "/" is refused apart.
 */
export function hasEmptyOrDotSegment(glob: string): boolean {
  if (glob.startsWith('/')) return false;
  return glob.replace(/^(\.\/)+/, '').split('/').some((seg, i, all) => seg === '.' || (seg === '' && i < all.length - 1));
}

export const EMPTY_OR_DOT_SEGMENT =
  'expected a glob that can match an item: an empty segment ("//") or a "." segment matches none (ids have neither): write "a/b", not "a//b" or "a/./b"';
