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

/** Why slowExtglob's globs are refused (config and requeue --glob). */
export const SLOW_EXTGLOB =
  'expected no repeating extglob that can match a piece of a name in more than one way: a name built against it takes exponential time to match (hangs the run); write plain alternatives none of which starts another (`+(csv|tsv)`) or single characters (`+([0-9])`)';

/**
 * The first repeating extglob of `glob` (`*(...)`, `+(...)`) whose pattern can match a
 * piece of a name in more than one way, or undefined. Matching tries every way of cutting the
 * name into repetitions, exponentially many: `*(*)x` took 2.5 s against 25 characters and
 * doubles with about each one more, `*(a|[a-z])x` likewise. A pattern that cannot is taken:
 * plain text alternatives none of which starts another (`+(csv|tsv)`, `*(a|b)`), or one
 * sequence of single characters (`+([0-9])`, `*(?)`, `+(ab)`). Anything else (a `*`, a
 * group, a brace list, an escape, `?` or a bracket expression among alternatives) is refused.
 */
export function slowExtglob(glob: string): string | undefined {
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === '\\') i++;
    else if (c === '[') i = bracketEnd(glob, i);
    else if ((c === '*' || c === '+') && glob[i + 1] === '(' && glob[i + 2] !== '?') {
      const end = groupEnd(glob, i + 1);
      const body = glob.slice(i + 2, end === -1 ? glob.length : end);
      if (!unambiguousRepeat(body)) return glob.slice(i, end === -1 ? glob.length : end + 1);
    }
  }
  return undefined;
}

/** The offset of the `)` closing the `(` at `open` (escapes and bracket expressions skipped), or -1. */
function groupEnd(glob: string, open: number): number {
  let depth = 0;
  for (let i = open; i < glob.length; i++) {
    if (glob[i] === '\\') i++;
    else if (glob[i] === '[') i = bracketEnd(glob, i);
    else if (glob[i] === '(') depth++;
    else if (glob[i] === ')' && --depth === 0) return i;
  }
  return -1;
}

/** Whether a repeated `body` matches each text one way only (slowExtglob). */
function unambiguousRepeat(body: string): boolean {
  if (body.includes('|')) {
    const alternatives = body.split('|');
    return (
      alternatives.every((a) => a !== '' && !/[*?[\]{}()\\!@+]/.test(a)) &&
      alternatives.every((a, i) => alternatives.every((b, j) => i === j || !b.startsWith(a)))
    );
  }
  if (body === '') return false;
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (c === '[') {
      const end = bracketEnd(body, i);
      // A bracket expression also matches its own text (picomatch): one way only where the
      // class itself never takes the "[" that text starts with.
      if (end === i || picomatch.makeRe(body.slice(i, end + 1), GLOB_OPTS).test('[')) return false;
      i = end;
    } else if ('*{}()\\!@+'.includes(c)) return false;
  }
  return true;
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
  const whole = globs.map((g) => globMatcher(idGlob(g)));
  const alternatives = globs.flatMap(braceAlternatives).map((g) => globMatcher(idGlob(g)));
  // `**`, the default: picomatch's expression for it takes every name but the empty one
  // that has no segment starting with "." (its `.` matches any character with the `s` flag,
  // `/` and a newline too), so such an id is not run through it: the scan asked it of every file.
  const everything = globs.includes('**');
  return (rel) => {
    // Most names have no segment starting with "." (one scan of the id, no array): one
    // matcher per glob, as the alternatives match the same such names.
    if (rel[0] !== '.' && !rel.includes('/.')) return everything ? rel !== '' : whole.some((m) => m(rel));
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
    const compiled = alternatives.map((a) => a.split('/').map((seg) => globMatcher(seg, { ...GLOB_OPTS, nonegate: true })));
    // picomatch takes an id equal to the glob as it is written (`{a,b}/x` takes the id `{a,b}/x`).
    const literal = g.split('/');
    return (segments) =>
      (literal.length > segments.length && segments.every((s, i) => s === literal[i])) ||
      compiled.some((c) => c.length > segments.length && segments.every((s, i) => c[i]!(s)));
  });
  return (segments) => tests.some((t) => t(segments));
}

export function excludeMatcher(globs: string[]): (rel: string) => boolean {
  const matchers = globs.map((g) => globMatcher(idGlob(g)));
  return (rel) => matchers.some((m) => m(rel));
}

/**
 * picomatch's matcher for `glob` (what picomatch(glob, opts) answers: an empty name never,
 * the glob's own text always, else its regular expression; with `ownText` false, the regular
 * expression alone), in time linear in the name's
 * length where picomatch's is not (linearSource). picomatch turns each `*` into a lazy
 * `[^/]*?`, and the expression backtracks through every way of placing them: against a name
 * of 250 underscores `*_*_*_*_*.scc` ran for minutes, synchronously, so the run could not
 * even drain on SIGTERM.
 */
export function globMatcher(glob: string, opts: picomatch.PicomatchOptions = GLOB_OPTS, ownText = true): (name: string) => boolean {
  const re = picomatch.makeRe(glob, opts);
  // picomatch lets a bracket expression of plain characters also match its own text
  // (`*[ab]*` takes `x[ab]`): `(?:\[ab\]|[ab])`, two runs of different lengths, which
  // linearSource cannot make atomic. Alone between two stars of a segment, where the stars
  // can take the rest of that text, the class says the same (loneBrackets).
  const source = loneBrackets(re.source, re.flags);
  const linear = linearRegex(re, source);
  // Elsewhere, a name without a `[` never holds that text, so there the class alone says the same.
  const unbracketed = source.replace(BRACKET_TEXT, '$1');
  const plain = unbracketed === source ? linear : linearRegex(linear, unbracketed);
  const segments = globstarMatcher(glob, opts);
  const expression = (name: string): boolean => (name.includes('[') ? linear : plain).test(name);
  if (ownText === false) return expression;
  return (name) => {
    if (name === '' || name === glob) return name !== '';
    if (segments !== undefined && name[0] !== '/' && !name.endsWith('/') && !name.includes('//')) return segments(name);
    return expression(name);
  };
}

/**
 * `source` with each bracket expression that also matches its own text, `(?:\[ab\]|[ab])`,
 * standing alone between two stars of one segment (`*[ab]*`), made the class alone where that
 * says the same: where the text itself is a name `*[ab]*` takes (`[ab]` holds an `a`, and no
 * `/`), a star can take the text's characters around that one, so every name the text lets
 * match, the class lets match too. Against `[` and 250 underscores `*[_]*[_]*[_]*[_]*.x`
 * backtracked for 27 seconds, each more `*[_]` about 25 times longer.
 */
function loneBrackets(source: string, flags: string): string {
  return source.replace(LONE_BRACKET, (whole, text: string, cls: string) => {
    let plain: boolean;
    try {
      plain = new RegExp(`^${STAR}${cls}${STAR}$`, flags).test(text.replace(/\\(.)/gs, '$1'));
    } catch {
      plain = false;
    }
    return plain ? `${STAR}${cls}` : whole;
  });
}

/** `[^/]*?(?:\[ab\]|[ab])` followed by `[^/]*?`: the text and the class captured. */
const LONE_BRACKET = /\[\^\/\]\*\?\(\?:(\\\[(?:[^\\()|[\]]|\\.)*\\\])\|(\[(?:[^\\\]]|\\.)*\])\)(?=\[\^\/\]\*\?)/g;

/**
 * Whether `part`, a glob between two `/`, matches within one segment as it does in the whole
 * glob: not empty, `.` or `..`, no `**`, group or leading `!`, its brace lists and bracket
 * expressions closed within it, and none of these taking a `/` (`[.-0]`, `[[:punct:]]` do).
 */
function oneSegment(part: string, opts: picomatch.PicomatchOptions): boolean {
  if (part === '' || part === '.' || part === '..' || part.includes('**') || /[()|]/.test(part) || part[0] === '!' || part.endsWith('\\')) return false;
  let depth = 0;
  for (let i = 0; i < part.length; i++) {
    const c = part[i];
    if (c === '\\') i++;
    else if (c === '[') {
      const end = bracketEnd(part, i);
      if (end === i || picomatch.makeRe(part.slice(i, end + 1), opts).test('/')) return false;
      i = end;
    } else if (c === '{') depth++;
    else if (c === '}' && --depth < 0) return false;
  }
  return depth === 0;
}

/**
 * A matcher for `glob` segment by segment, where it has a `**` segment and its other
 * parts each match within one segment (oneSegment), for names without an empty segment (no leading, trailing or double
 * `/`, which ids never have): picomatch's expression tried every way of sharing a deep path
 * among several `**` (three `**` around two `a` segments against 2,000 levels of `a/` ran for 26
 * seconds, each more `**` far longer). A `**` takes any number of segments not starting with "." (as
 * picomatch's does), every other segment one segment its own matcher takes; the set of glob
 * segments reached is carried along the name's segments, so the time is linear in them.
 * undefined where this does not apply.
 */
function globstarMatcher(glob: string, opts: picomatch.PicomatchOptions): ((name: string) => boolean) | undefined {
  const parts = glob.split('/');
  if (parts.length < 2 || !parts.includes('**')) return undefined;
  if (parts.some((p) => p !== '**' && !oneSegment(p, opts))) return undefined;
  // picomatch's trailing `**` after a segment ending in `*` takes one segment at least
  // (`*/**` does not take `a`, though `a/**` and `a\\*/**` take `a`): that one is a `*` of its own.
  let last = parts.length;
  while (parts[last - 1] === '**') last--;
  if (last > 0 && last < parts.length && /(^|[^\\])(\\\\)*\*$/.test(parts[last - 1]!)) parts.splice(last, 0, '*');
  const star = parts.map((p) => p === '**');
  // Its expression alone: the whole glob's text matches as it is, not a part's (`{,a}` is no `{,a}`).
  const match = parts.map((p) => (p === '**' ? () => false : globMatcher(p, opts, false)));
  const m = parts.length;
  // Reaching a `**` reaches the glob segment after it too (it may take no segment).
  const close = (reached: boolean[]): boolean[] => {
    for (let i = 0; i < m; i++) if (reached[i] && star[i]) reached[i + 1] = true;
    return reached;
  };
  return (name) => {
    let reached = close([true, ...new Array<boolean>(m).fill(false)]);
    for (const seg of name.split('/')) {
      const next = new Array<boolean>(m + 1).fill(false);
      let any = false;
      for (let i = 0; i < m; i++) {
        if (!reached[i]) continue;
        if (star[i]) {
          if (seg[0] !== '.') next[i] = any = true;
        } else if (match[i]!(seg)) next[i + 1] = any = true;
      }
      if (!any) return false;
      reached = close(next);
    }
    return reached[m]!;
  };
}

/** `(?:\[ab\]|[ab])`: picomatch's bracket expression that also matches its own text. */
const BRACKET_TEXT = /\(\?:\\\[(?:[^\\()|[\]]|\\.)*\\\]\|(\[(?:[^\\\]]|\\.)*\])\)/g;

/** `source` made linear (linearSource) as a regular expression with `re`'s flags, or `re` if that fails. */
function linearRegex(re: RegExp, source: string): RegExp {
  try {
    return new RegExp(linearSource(source, re.flags), re.flags);
  } catch {
    // Never expected (linearSource only adds groups); the slow expression still answers right.
    return re;
  }
}

/** picomatch's `*` within a segment: any run of characters but `/`, shortest first. */
const STAR = '[^/]*?';

/**
 * `source` (a picomatch expression) matching exactly the same names without the backtracking
 * that makes it slow. Where a `*` is followed by a fixed run of characters that are never `/`
 * (literals, `?` and classes without `/`, as `_` in `*_*`) and then by another `*` of the
 * same segment, the run is matched at its first occurrence only, atomically (the `(?=(X))\1` idiom: a lookahead is
 * never backtracked into). That loses no match: were the run matched at a later occurrence,
 * the next `*` can take the characters in between as well (they are in one segment, so none is
 * `/`) and end where it ended. This is the classic greedy wildcard match, linear in the
 * segment. The last run of a segment (`*.scc` in `*_*.scc`) stays as it is: no `*` after it
 * could make up for a run matched too early.
 */
export function linearSource(source: string, flags = ''): string {
  const tokens = regexTokens(source, flags);
  let out = '';
  // Capturing groups opened so far in `out`: the number of the next one (a backreference).
  let groups = 0;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    let j = i + 1;
    while (t.text === STAR && j < tokens.length && tokens[j]!.fixed) j++;
    if (t.text === STAR && j > i + 1 && j < tokens.length && tokens[j]!.text === STAR) {
      groups++;
      const run = tokens.slice(i, j).map((x) => x.text).join('');
      out += `(?=(${run}))(?:\\${groups})`;
      i = j - 1;
    } else {
      if (t.capturing) groups++;
      out += t.text;
    }
  }
  return out;
}

/** Whether `atom`, a character class, is one that never matches `/` (`[^/]`, `[0-9]`; not `[^a]`, `[.-0]`). */
function classOmitsSlash(atom: string, flags: string): boolean {
  try {
    return !new RegExp(`^${atom}$`, flags).test('/');
  } catch {
    return false;
  }
}

interface RegexToken {
  text: string;
  /** Matches exactly one character, never `/`, with no quantifier: a literal or a class without `/`. */
  fixed: boolean;
  /** Opens a capturing group. */
  capturing: boolean;
}

/** A regular expression's atoms, each with its quantifier: just enough to find linearSource's runs. */
function regexTokens(source: string, flags: string): RegexToken[] {
  const tokens: RegexToken[] = [];
  for (let i = 0; i < source.length; ) {
    const c = source[i]!;
    let atom: string;
    let fixed = false;
    let capturing = false;
    if (c === '\\') {
      atom = source.slice(i, i + 2);
      // `\.`, `\*`: a punctuation character itself; `\d`, `\1`, `\/` are not run characters.
      fixed = atom.length === 2 && !/[A-Za-z0-9/]/.test(atom[1]!);
    } else if (c === '[') {
      let j = i + 1;
      while (j < source.length && source[j] !== ']') j += source[j] === '\\' ? 2 : 1;
      atom = source.slice(i, j + 1);
      fixed = classOmitsSlash(atom, flags);
    } else if (c === '(') {
      atom = /^\((\?(:|=|!|<=|<!|<[A-Za-z_$][\w$]*>))?/.exec(source.slice(i))![0];
      capturing = atom === '(' || atom.startsWith('(?<') && atom.endsWith('>');
    } else {
      atom = c;
      fixed = !'^$.|?*+()[]{}/'.includes(c);
    }
    i += atom.length;
    const quantifier = /^(?:[*+?]|\{\d+(?:,\d*)?\})\??/.exec(source.slice(i))?.[0] ?? '';
    i += quantifier.length;
    tokens.push({ text: atom + quantifier, fixed: fixed && quantifier === '', capturing });
  }
  return tokens;
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
