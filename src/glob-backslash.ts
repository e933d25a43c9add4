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
