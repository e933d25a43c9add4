import picomatch from 'picomatch';

// How source.include and source.exclude match item ids: one place for the scan (runner/)
// and the config check (config/), which must agree on what the scan never enters.

// flags 's': a file name may contain a newline, and `*` must match it like any other byte.
export const GLOB_OPTS = { flags: 's' };

/**
 * True when `glob` is negated as a whole ("every file but these"), as picomatch reads it:
 * a leading "!", but not an extglob "!(...)", which matches what its pattern does not.
 */
export function negatesWhole(glob: string): boolean {
  return picomatch.scan(glob).negated;
}

export function excludeMatcher(globs: string[]): (rel: string) => boolean {
  return globs.length > 0 ? picomatch(globs, GLOB_OPTS) : () => false;
}

/**
 * True when the scan never enters the directory at `rel` (`/`-separated, relative to the
 * scanned directory): `exclude` matches it or one of its parents, which is where the walk
 * prunes. The config check uses it to prove that an output directory inside the source
 * is never scanned.
 */
export function scanSkipsDirectory(exclude: string[], rel: string): boolean {
  const match = excludeMatcher(exclude);
  const segs = rel.split('/');
  return segs.some((_, i) => match(segs.slice(0, i + 1).join('/')));
}
