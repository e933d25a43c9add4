import { InvalidArgumentError } from 'commander';
import { EMPTY_OR_DOT_SEGMENT, endsInLoneBackslash, hasEmptyOrDotSegment, LONE_BACKSLASH } from '../glob-backslash.js';

/*
 * Parsers of `cronsafe requeue` options, for commander (a bad value: its message, exit 2).
 * Apart from requeue.ts, so the program can declare the options without loading it.
 */

/** Matched against item ids as the scan makes them (flags 's': `*` matches a newline too). */
export const GLOB_OPTIONS = { flags: 's', strictBrackets: true } as const;

/**
 * `--glob G` (repeatable): a glob over item ids, as `source.include` is. Refused rather
 * than matching nothing: an absolute one or one with a `..` segment (ids are relative and
 * never climb), one ending in `/` or in a lone `\` (ids name files), one with an empty or
 * `.` segment, and (checked by `badGlob` in requeue.ts, so that picomatch loads only for
 * `requeue`) an unbalanced bracket, brace or parenthesis (say `\[` for a literal).
 */
export function parseGlob(value: string, previous: string[] = []): string[] {
  if (value === '') throw new InvalidArgumentError('expected a glob over item ids, got an empty string');
  if (value.startsWith('/') || value.split('/').includes('..')) {
    throw new InvalidArgumentError('expected a glob relative to source.directory (item ids have no leading "/" and no ".." segment)');
  }
  // Ids name files and never end in "/": `--glob 'tmp/'` (as .gitignore writes a directory)
  // requeued 0 items, exit 0, as source.include refuses it (exit 78).
  if (value.endsWith('/')) {
    throw new InvalidArgumentError('expected a glob that can match an item: one ending in "/" matches none (ids name files); write "dir/**" for the items under a directory');
  }
  // Ids have no empty and no "." segment (`a//b`, `a/./b`), as source.include refuses them.
  if (hasEmptyOrDotSegment(value)) throw new InvalidArgumentError(EMPTY_OR_DOT_SEGMENT);
  if (endsInLoneBackslash(value)) throw new InvalidArgumentError(LONE_BACKSLASH);
  return [...previous, value];
}
