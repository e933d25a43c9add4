import { InvalidArgumentError } from 'commander';

/*
 * Parsers of `dead-letter list` options, for commander (a bad value: its message, exit 2).
 * Apart from dead-letter.ts, so the program can declare the options without loading it.
 */

/** `--limit N`: a positive integer (commander reports the problem, exit 2). */
export function parseLimit(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1 || !Number.isSafeInteger(Number(value))) {
    throw new InvalidArgumentError('expected a positive integer');
  }
  return Number(value);
}

const ISO_RE = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2}))?$/i;

/** `--since ISO`: a date (UTC midnight) or a timestamp with its zone (`Z` or `+01:00`). */
export function parseSince(value: string): Date {
  const at = ISO_RE.test(value) ? new Date(value) : undefined;
  if (!at || Number.isNaN(at.getTime())) {
    throw new InvalidArgumentError('expected an ISO 8601 date or timestamp with a zone, e.g. 2026-11-30 or 2026-11-30T08:00:00Z');
  }
  return at;
}
