import { InvalidArgumentError } from 'commander';

/*
 * A single-valued option given twice (`run -c a.yaml -c b.yaml`, `--limit 5 --limit 50`) is
 * refused, for commander (its message names the option, exit 2). Taken as the last one, as
 * commander does by default, the run used b.yaml's job while its author may have meant a.yaml's,
 * and nothing said which. Apart from program.ts's options, so it can be tested alone.
 */

/** `parse` for an option that may be given once: commander passes the value so far as `previous`. */
export function once<T>(parse: (value: string) => T): (value: string, previous: T | undefined) => T {
  return (value, previous) => {
    if (previous !== undefined) throw new InvalidArgumentError('the option is given more than once: give it once (which value was meant?)');
    return parse(value);
  };
}

/** The value as given, for an option that has no parser of its own. */
export const asGiven = (value: string): string => value;
