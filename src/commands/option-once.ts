import { InvalidArgumentError } from 'commander';

/*
 * A single-valued option given twice with different values (`run -c a.yaml -c b.yaml`,
 * `--limit 5 --limit 50`) is refused, for commander (its message names the option, exit 2).
 * Taken as the last one, as commander does by default, the run used b.yaml's job while its
 * author may have meant a.yaml's, and nothing said which. The same value again (`--limit 5
 * --limit 5`, a wrapper script that adds the option its caller also gave) is taken, as a
 * flag given twice (`--json --json`) is: there is no doubt which was meant. Apart from
 * program.ts's options, so it can be tested alone.
 */

/** The same value: equal, or the same instant (`--since 2026-01-01 --since 2026-01-01T00:00:00Z`). */
const same = (a: unknown, b: unknown): boolean => a === b || (a instanceof Date && b instanceof Date && a.getTime() === b.getTime());

/** `parse` for an option that may be given once: commander passes the value so far as `previous`. */
export function once<T>(parse: (value: string) => T): (value: string, previous: T | undefined) => T {
  return (value, previous) => {
    const parsed = parse(value);
    if (previous !== undefined && !same(previous, parsed)) {
      throw new InvalidArgumentError('the option is given more than once, with different values: give it once (which value was meant?)');
    }
    return parsed;
  };
}

/** The value as given, for an option that has no parser of its own. */
export const asGiven = (value: string): string => value;
