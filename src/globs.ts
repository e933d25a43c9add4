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
 * Why the scan could not compile `glob`, or undefined: picomatch refuses some (one over
 * 65,536 characters), which failed every run (exit 1) after validate said OK, and makes
 * others match nothing.
 */
export function globProblem(glob: string): string | undefined {
  try {
    includeMatcher([glob]);
    excludeMatcher([glob]);
    // picomatch makes a regular expression JavaScript refuses (a range out of order, `[z-a]`,
    // or between two characters outside the BMP, `[😀-😂]`) into one that matches nothing,
    // silently: an exclude so written left its files in the scan. `debug` has it throw.
    for (const g of [glob, ...braceAlternatives(glob)]) picomatch.makeRe(idGlob(g), { ...GLOB_OPTS, debug: true });
    return undefined;
  } catch (err) {
    return regexReason(err instanceof Error ? err.message : String(err));
  }
}

/** A JavaScript regular expression error without the expression picomatch made (`Range out of order in character class`). */
export function regexReason(message: string): string {
  return /^Invalid regular expression: \/.*\/[a-z]*: (.*)$/s.exec(message)?.[1] ?? message;
}

/**
 * source.include's matcher. Like `*`, a glob matches a name starting with "." only where
 * the glob writes that dot (as a shell does): picomatch lets a negated extglob match it
 * (`!(*.md)` took `.report.tmp`), and the dotfiles a producer is still writing
 * before its rename must not become items. A dot is "written" when the glob stops
 * matching once that one dot is replaced by a NUL, which no glob can name. Brace lists are
 * expanded first and each alternative checked on its own (picomatch's braces leak a leading
 * dot too): in `{*,.*}` the dot of `.env` is written by `.*`, though `*` matches the NUL name.
 */
export function includeMatcher(globs: string[]): (rel: string) => boolean {
  const whole = globs.map((g) => picomatch(idGlob(g), GLOB_OPTS));
  const alternatives = globs.flatMap(braceAlternatives).map((g) => picomatch(idGlob(g), GLOB_OPTS));
  return (rel) => {
    // Most names have no segment starting with "." (one scan of the id, no array): one
    // matcher per glob, as the alternatives match the same such names.
    if (rel[0] !== '.' && !rel.includes('/.')) return whole.some((m) => m(rel));
    const dots = dotSegmentStarts(rel);
    return alternatives.some((m) => m(rel) && dots.every((i) => !m(`${rel.slice(0, i)}\0${rel.slice(i + 1)}`)));
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

/**
 * The most path segments an id that one of `globs` matches can have, or Infinity: the scan
 * need not open a directory whose files would be deeper. `*`, `?` and a brace list never
 * match a `/` the glob does not write (a brace's alternatives write no more `/` than the
 * list does), so a glob without `**`, a bracket expression (`[!a]`, `[.-0]` and `[[:punct:]]`
 * match `/`) or a group (an extglob may repeat a `/`) matches ids of at most its own number
 * of segments: `*.csv` only files directly in source.directory. Anything else: Infinity.
 */
export function includeDepth(globs: string[]): number {
  let depth = 0;
  for (const g of globs) {
    if (g.includes('**') || g.includes('[') || g.includes('(')) return Infinity;
    depth = Math.max(depth, g.split('/').length);
  }
  return depth;
}

/**
 * Whether one of `globs` can match an id below a directory whose name starts with "." (a
 * `.git`, a NetApp `.snapshot`, another job's `.cronsafe-tmp`): includeMatcher matches a
 * segment starting with "." only where the glob writes that dot, and `*`, `?` and `**` never
 * do. So only a glob with a "." that may start a segment (first, after `/`, or beside a brace
 * list's `{`, `,` or `}`), or with what this does not look into (`[...]`, a group, an escape),
 * can.
 */
export function reachesDotDirectories(globs: string[]): boolean {
  // A `|` outside a group splits the whole glob in two for picomatch (`a|.b/*` takes `.b/x`).
  return globs.some((g) => /(^|[/{,}|])\./.test(g) || /[[(\\]/.test(g));
}

/**
 * Whether the scan may find an item below a directory (its id's segments): some include glob
 * can match an id deeper than it (includeDepth), into it if its name or a parent's starts
 * with "." (reachesDotDirectories), and, for a glob without `**`, `[...]`, a group or an
 * escape, whose segments up to the directory's depth each match the directory's (`in/*.csv`
 * enters `in` only). Conservative: what it cannot tell apart is entered.
 */
export function directoryFilter(globs: string[]): (segments: string[]) => boolean {
  const tests = globs.map((g): ((segments: string[]) => boolean) => {
    const depth = includeDepth([g]);
    const dots = reachesDotDirectories([g]);
    const fallback = (segments: string[]): boolean => segments.length < depth && (dots || !segments.some((s) => s[0] === '.'));
    // A `|` outside a group is picomatch's alternation of the whole glob, not of a segment:
    // `in/*.csv|*/deep/*.csv` takes `z/deep/a.csv`, which no segment-wise reading enters.
    if (depth === Infinity || g.includes('\\') || g.includes('|')) return fallback;
    const alternatives = braceAlternatives(g);
    // Unexpanded braces (too many alternatives), or a `.` or empty segment picomatch reads its own way (`./a/*.csv` matches `a/x.csv`).
    if (alternatives.some((a) => a.includes('{') || a.split('/').some((seg) => seg === '' || seg === '.'))) return fallback;
    // `nonegate`: a segment's leading "!" negates only at the start of the whole glob (refused
    // in an include); mid-glob it is a "!" of the name (`a/!*/x.csv` takes `a/!z/x.csv`).
    const compiled = alternatives.map((a) => a.split('/').map((seg) => picomatch(seg, { ...GLOB_OPTS, nonegate: true })));
    // picomatch takes an id equal to the glob as it is written (`{a,b}/x` takes the id `{a,b}/x`).
    const literal = g.split('/');
    return (segments) =>
      (literal.length > segments.length && segments.every((s, i) => s === literal[i])) ||
      compiled.some((c) => c.length > segments.length && segments.every((s, i) => c[i]!(s)));
  });
  return (segments) => tests.some((t) => t(segments));
}

export function excludeMatcher(globs: string[]): (rel: string) => boolean {
  return globs.length > 0 ? picomatch(globs.map(idGlob), GLOB_OPTS) : () => false;
}

/**
 * A glob over ids as picomatch should read it. Ids write a backslash in a name as `\\` and a
 * byte that is not UTF-8 as `\xHH` (runner/item-id.ts), so a glob written with an id's text
 * (`latin\xe9/**`, `back\\slash/*`) means those escapes as they are. picomatch cannot take
 * them so: it hands `\x`, `\d`, `\w` ... to the regular expression as they are (`\xe9`
 * matched the UTF-8 `é`, another file, and `\d` any digit), and no count of backslashes
 * matches the two of `\\` in a path of more than one segment. Outside a bracket
 * expression (bracketGlob reads those): `\\` and `\xHH` match that text of the id, `\`
 * before another letter or a digit is that character (as in a shell's glob), and `\`
 * before punctuation (`\*`, `\[`, `\{`) stays picomatch's escape.
 * Parentheses that are not an extglob's (`?(...)`, `*(...)`, `+(...)`, `@(...)`, `!(...)`)
 * and hold no `|` of their own are those characters of a name, as in a shell, fnmatch(3) or
 * .gitignore: picomatch read them as a regular expression's group, so `* (1).*`, meant for
 * the copies a browser names `photo (1).jpg`, matched `photo 1.jpg` and not them. (With a
 * `|`, `(a|b)`, they stay picomatch's alternation.)
 */
export function idGlob(glob: string): string {
  if (!glob.includes('\\') && !glob.includes('[!') && !glob.includes('(')) return glob;
  const literal = literalParentheses(glob);
  let out = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (literal.has(i)) out += `\\${c}`;
    else if (c === '[') {
      const end = bracketEnd(glob, i);
      out += bracketGlob(glob.slice(i, end + 1));
      i = end;
    } else if (c !== '\\' || i + 1 === glob.length) out += c;
    else if (glob[i + 1] === '\\') {
      out += '[\\\\][\\\\]';
      i++;
    } else if (/^x[0-9a-fA-F]{2}$/.test(glob.slice(i + 1, i + 4))) {
      // Ids write the byte in lowercase hex: `\xE9` is the same byte (it was the text `xE9`).
      out += `[\\\\]${glob.slice(i + 1, i + 4).toLowerCase()}`;
      i += 3;
    } else if (/[A-Za-z0-9]/.test(glob[i + 1]!)) {
      out += glob[i + 1];
      i++;
    } else {
      out += c + glob[i + 1];
      i++;
    }
  }
  return out;
}

/**
 * The offsets of the `(` and `)` in `glob` that are characters of a name (idGlob): a pair not
 * opened by an extglob's operator and without a `|` at its own level (escapes and bracket
 * expressions skipped, as picomatch reads them). An unbalanced one is left as it is.
 */
function literalParentheses(glob: string): Set<number> {
  const literal = new Set<number>();
  const open: Array<{ at: number; bare: boolean; alternation: boolean }> = [];
  // The character before was an extglob's operator, written unescaped (not `\*`).
  let operator = false;
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    const after = operator;
    operator = false;
    if (c === '\\') i++;
    else if (c === '[') i = bracketEnd(glob, i);
    else if ('?*+@!'.includes(c)) operator = true;
    else if (c === '(') open.push({ at: i, bare: !after, alternation: false });
    else if (c === '|' && open.length > 0) open.at(-1)!.alternation = true;
    else if (c === ')') {
      const group = open.pop();
      if (group?.bare && !group.alternation) literal.add(group.at).add(i);
    }
  }
  return literal;
}

/**
 * A bracket expression (`[...]`, one character of the id) as picomatch should read it: a
 * leading `!` negates it, as `^` does; `\` before a letter or a digit is that character
 * here too (picomatch handed `[\d]`, `[\s]` to the regular expression: any digit, any
 * blank); `\\` is a backslash, and before other punctuation it stays an escape.
 */
function bracketGlob(bracket: string): string {
  // `[!...]` is "any character but these" in a shell; picomatch reads that only from `[^...]`
  // (its `[!0-9]` took `!` and the digits, the opposite). `[!]` is no class: left as it is.
  if (bracket.startsWith('[!') && bracket.length > 3) bracket = `[^${bracket.slice(2)}`;
  if (!bracket.includes('\\')) return bracket;
  let out = '';
  for (let i = 0; i < bracket.length; i++) {
    const c = bracket[i]!;
    if (c !== '\\' || i + 1 === bracket.length) out += c;
    else {
      const next = bracket[i + 1]!;
      out += /[A-Za-z0-9]/.test(next) ? next : c + next;
      i++;
    }
  }
  return out;
}

/**
 * A glob that matches the id `id` alone: its glob characters escaped (`\\` in an id is
 * already the id's text, kept as it is). `out[1]` as a glob is `out1`, `q?` takes `qa` and
 * `res*` never takes `res*` itself; `out\\[1\\]`, `q\\?` and `res\\*` do, and nothing else.
 */
export function literalGlob(id: string): string {
  let out = '';
  for (let i = 0; i < id.length; i++) {
    const c = id[i]!;
    if (c === '\\') {
      out += id.slice(i, i + 2);
      i++;
    } else out += GLOB_SPECIAL.includes(c) ? `\\${c}` : c;
  }
  return out;
}

const GLOB_SPECIAL = '*?[]{}()!@+|,^$"';

/**
 * True when the scan never enters the directory at `rel` (`/`-separated, relative to the
 * scanned directory): `exclude` matches it or one of its parents, which is where the walk
 * prunes, or no `include` glob can match into it or a parent (directoryFilter). The config check uses it to prove that an output directory inside the source
 * is never scanned.
 */
export function scanSkipsDirectory(exclude: string[], rel: string, include: string[] = []): boolean {
  const match = excludeMatcher(exclude);
  // As the scan decides (runner/scan.ts): a directory no include glob can match into is not entered either.
  const enter = directoryFilter(include.length > 0 ? include : ['**']);
  const segs = rel.split('/');
  return segs.some((_, i) => match(segs.slice(0, i + 1).join('/')) || !enter(segs.slice(0, i + 1)));
}

/** Past this many brace alternatives a glob is matched as it is (a runaway `{a,b}{c,d}...`). */
const MAX_ALTERNATIVES = 256;

/**
 * The globs that `glob`'s brace lists stand for, as a shell expands them
 * (`a/{b,c{d,e}}` -> `a/b`, `a/cd`, `a/ce`). A brace with no comma of its own (a range
 * `{1..3}`, a literal) is left to picomatch, as is a `{` inside `[...]` or after a `\`.
 */
export function braceAlternatives(glob: string): string[] {
  const out: string[] = [];
  const expand = (g: string): boolean => {
    const list = firstList(g);
    if (list === undefined) {
      out.push(g);
      return out.length <= MAX_ALTERNATIVES;
    }
    return list.alternatives.every((alt) => expand(g.slice(0, list.start) + alt + g.slice(list.end + 1)));
  };
  return expand(glob) ? out : [glob];
}

/** The first `{...}` with a comma at its own depth: where it is and its alternatives. */
function firstList(g: string): { start: number; end: number; alternatives: string[] } | undefined {
  for (let i = 0; i < g.length; i++) {
    if (g[i] === '\\') i++;
    else if (g[i] === '[') i = bracketEnd(g, i);
    else if (g[i] === '{') {
      let depth = 0;
      let from = i + 1;
      const alternatives: string[] = [];
      for (let j = i; j < g.length; j++) {
        const c = g[j];
        if (c === '\\') j++;
        else if (c === '[') j = bracketEnd(g, j);
        else if (c === '{') depth++;
        else if (c === ',' && depth === 1) {
          alternatives.push(g.slice(from, j));
          from = j + 1;
        } else if (c === '}' && --depth === 0) {
          if (alternatives.length > 0) return { start: i, end: j, alternatives: [...alternatives, g.slice(from, j)] };
          break;
        }
      }
    }
  }
  return undefined;
}

/**
 * The offset of the `]` that closes the class opened at `i`, or `i` when none does (a literal
 * `[`). A `]` first in the class (after a `!` or `^`) is one of its characters, as in a shell:
 * `[!]]` is any character but `]` (read to its first `]`, it matched the text `!]`); an
 * escaped `\]` is one too, as picomatch reads it.
 */
function bracketEnd(g: string, i: number): number {
  let j = i + 1;
  if (g[j] === '!' || g[j] === '^') j++;
  if (g[j] === ']') j++;
  for (; j < g.length; j++) {
    if (g[j] === '\\') j++;
    else if (g[j] === ']') return j;
  }
  return i;
}
