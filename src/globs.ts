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

/**
 * source.include's matcher. Like `*`, a glob matches a name starting with "." only where
 * the glob writes that dot (as a shell does): picomatch lets a negated extglob match it
 * (`!(*.md)` took `.report.tmp`), and the dotfiles a producer is still writing
 * before its rename must not become items. A dot is "written" when the glob stops
 * matching once that one dot is replaced by a NUL, which no glob can name.
 */
export function includeMatcher(globs: string[]): (rel: string) => boolean {
  const matchers = globs.map((g) => picomatch(g, GLOB_OPTS));
  return (rel) => {
    // Most names have no segment starting with "." (one scan of the id, no array).
    if (rel[0] !== '.' && !rel.includes('/.')) return matchers.some((m) => m(rel));
    const dots = dotSegmentStarts(rel);
    return matchers.some((m) => m(rel) && dots.every((i) => !m(`${rel.slice(0, i)}\0${rel.slice(i + 1)}`)));
  };
}

/** Offsets of the "." that starts a path segment. */
function dotSegmentStarts(rel: string): number[] {
  const out: number[] = [];
  for (let i = rel.indexOf('.'); i !== -1; i = rel.indexOf('.', i + 1)) {
    if (i === 0 || rel[i - 1] === '/') out.push(i);
  }
  return out;
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
