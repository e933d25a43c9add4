import { InvalidArgumentError } from 'commander';

/*
 * Parsers of `dead-letter list` options, for commander (a bad value: its message, exit 2).
 * Apart from dead-letter.ts, so the program can declare the options without loading it.
 */

/** The greatest `--limit`: past it a number is no longer exact in JavaScript (Number.MAX_SAFE_INTEGER). */
export const LIMIT_MAX = Number.MAX_SAFE_INTEGER;

/**
 * `--limit N`: a whole number from 1 to LIMIT_MAX (commander reports the problem, with the
 * option and the value, exit 2). A huge one (`99999999999999999999`) was told "expected a
 * positive integer", which it is: the message now gives the range it is outside of.
 */
export function parseLimit(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError(`expected a whole number from 1 to ${LIMIT_MAX}, in digits only (no sign, point or exponent)`);
  const n = Number(value);
  if (n < 1 || !Number.isSafeInteger(n)) throw new InvalidArgumentError(`out of range: the allowed range is 1 to ${LIMIT_MAX}`);
  return n;
}

const ISO_RE = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:Z|[+-](\d{2}):(\d{2})))?$/i;

/** `--since ISO`: a date (UTC midnight) or a timestamp with its zone (`Z` or `+01:00`). */
export function parseSince(value: string): Date {
  const m = ISO_RE.exec(value);
  // `new Date` rolls impossible fields over (2025-02-30 is 2025-03-02, T24:00 the next
  // day): a date that does not exist is refused, not silently moved.
  const [year, month, day, hour, minute, second, offH, offM] = (m?.slice(1) ?? []).map((f) => (f === undefined ? 0 : Number(f)));
  const daysInMonth = new Date(Date.UTC(year ?? 0, month ?? 0, 0)).getUTCDate();
  const real =
    m !== null && month! >= 1 && month! <= 12 && day! >= 1 && day! <= daysInMonth && hour! <= 23 && minute! <= 59 && second! <= 59 && offH! <= 23 && offM! <= 59;
  const at = real ? new Date(value) : undefined;
  if (!at || Number.isNaN(at.getTime())) {
    throw new InvalidArgumentError('expected an ISO 8601 date or timestamp with a zone that exists, e.g. 2026-11-30 or 2026-11-30T08:00:00Z');
  }
  return at;
}
