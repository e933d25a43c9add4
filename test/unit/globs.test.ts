import picomatch from 'picomatch';
import { describe, expect, it } from 'vitest';
import {
  braceAlternatives,
  directoryFilter,
  excludeMatcher,
  GLOB_OPTS,
  globMatcher,
  idGlob,
  includeDepth,
  includeMatcher,
  linearSource,
  literalGlob,
  reachesDotDirectories,
  slowExtglob,
} from '../../src/globs.js';

// CPU-bound comparisons with picomatch (hundreds of thousands): a loaded machine (CI's 3
// workers on 2 cores beside process tests) has run them past the default 60 s.
const FUZZ_TIMEOUT_MS = 240_000;

describe('braceAlternatives', () => {
  it('expands brace lists as a shell does, nested ones too', () => {
    expect(braceAlternatives('**/{*,.*}')).toEqual(['**/*', '**/.*']);
    expect(braceAlternatives('a/{b,c{d,e}}/f')).toEqual(['a/b/f', 'a/cd/f', 'a/ce/f']);
    expect(braceAlternatives('{a,b}{c,d}')).toEqual(['ac', 'ad', 'bc', 'bd']);
    expect(braceAlternatives('*.{txt,}')).toEqual(['*.txt', '*.']);
  });

  it('leaves to picomatch what is no list: ranges, literals, escaped or bracketed braces', () => {
    for (const g of ['x{1..3}', '{a}', 'a\\{b,c}', '[{,]x', '**/*.txt', '{a,b']) expect(braceAlternatives(g)).toEqual([g]);
    expect(braceAlternatives('{a{b,c}}')).toEqual(['{ab}', '{ac}']);
    expect(braceAlternatives('{a\\,b,c}')).toEqual(['a\\,b', 'c']);
  });

  it('matches a runaway glob as it is', () => {
    const g = '{a,b}'.repeat(9); // 512 alternatives
    expect(braceAlternatives(g)).toEqual([g]);
  });
});

describe('globs over escaped ids (\\xHH for a byte that is not UTF-8, \\\\ for a backslash)', () => {
  const both = (g: string, id: string) => [includeMatcher([g])(id), excludeMatcher([g])(id)];
  it('an escape written in a glob is that text of the id, in any segment', () => {
    expect(both('latin\\xe9/**', 'latin\\xe9/a.txt')).toEqual([true, true]);
    expect(both('caf\\xe9*', 'caf\\xe9.txt')).toEqual([true, true]);
    expect(both('back\\\\slash/*', 'back\\\\slash/b.txt')).toEqual([true, true]);
    expect(both('{x,latin\\xe9/*}', 'latin\\xe9/a.txt')).toEqual([true, true]);
    // Ids write the byte in lowercase hex; `\\xE9` (it was the text `xE9`, matching nothing) is that byte too.
    expect(both('caf\\xE9*', 'caf\\xe9.txt')).toEqual([true, true]);
    expect(both('caf\\xE9*', 'cafxE9.txt')).toEqual([false, false]);
  });
  it('and never another file: not the UTF-8 é, not a regular expression class', () => {
    // picomatch passed `\xe9` and `\d` to its regular expression: é, and any digit.
    expect(both('latin\\xe9/**', 'latiné/a.txt')).toEqual([false, false]);
    expect(both('a\\d*', 'a5')).toEqual([false, false]);
    expect(both('a\\d*', 'ad')).toEqual([true, true]);
  });
  it('inside a bracket expression too, \\ before a letter or a digit is that character, never a regular expression class', () => {
    // picomatch passed `[\d]`, `[\s]` to its regular expression: any digit, any blank.
    expect(both('file[\\d].txt', 'filed.txt')).toEqual([true, true]);
    expect(both('file[\\d].txt', 'file5.txt')).toEqual([false, false]);
    expect(both('a[\\s]b', 'a b')).toEqual([false, false]);
    expect(both('a[\\s]b', 'asb')).toEqual([true, true]);
    expect(both('x[\\]]', 'x]')).toEqual([true, true]);
    expect(both('x[^\\d]', 'x5')).toEqual([true, true]);
    expect(both('x[^\\d]', 'xd')).toEqual([false, false]);
  });
  it('a bracket expression starting with ! is any character but those, as in a shell (as [^...])', () => {
    // picomatch reads `[!0-9]` as `!` or a digit (negation only from `[^...]`): the opposite.
    expect(both('*[!0-9].csv', 'a.csv')).toEqual([true, true]);
    expect(both('*[!0-9].csv', 'a1.csv')).toEqual([false, false]);
    expect(both('[!a]/**', 'a/x')).toEqual([false, false]);
    expect(both('[!a]/**', 'b/x')).toEqual([true, true]);
    expect(both('\\[!a]', '[!a]')).toEqual([true, true]);
    // A dot at the start of a name is still only where the glob writes it.
    expect(includeMatcher(['[!x]*'])('.env')).toBe(false);
  });
  it('a "]" first in a bracket expression is one of its characters, as in a shell: [!]] is any character but "]"', () => {
    // Read to its first `]`, `[!]]` was the text `[!]` or `!`, then `]`: it matched `!]`.
    expect(both('x[!]]', 'xa')).toEqual([true, true]);
    expect(both('x[!]]', 'x]')).toEqual([false, false]);
    expect(both('x[!]]', 'x!]')).toEqual([false, false]);
    expect(both('x[^]]', 'x]')).toEqual([false, false]);
    expect(both('x[]]', 'x]')).toEqual([true, true]);
    // An escaped `]` does not close it: `\\` inside is still one backslash, not an id's `\\`.
    expect(both('x[\\]\\\\]', 'x]')).toEqual([true, true]);
    expect(both('x[\\]\\\\]', 'x\\\\')).toEqual([false, false]);
    // `[!]` closes nothing: its `[` is a literal, as before.
    expect(both('x[!]y', 'x[!]y')).toEqual([true, true]);
  });
  it('an escaped glob character stays literal', () => {
    expect(both('a\\*b', 'a*b')).toEqual([true, true]);
    expect(both('a\\*b', 'axb')).toEqual([false, false]);
    expect(both('x\\[1\\]', 'x[1]')).toEqual([true, true]);
  });
});

describe('literalGlob', () => {
  it('matches the id it is made of, and no other', () => {
    for (const id of ['q?', 'res*', 'out[1]', 'o{a,b}', '!x', 'a(b)', '@(z)', '+(a)', 'a|b', 'back\\\\slash', '"q"', '.hid']) {
      const m = excludeMatcher([`${literalGlob(id)}/**`]);
      expect([m(id), m(`${id}/x`)], id).toEqual([true, true]);
      for (const other of ['qa', 'resX', 'out1', 'oa', 'x', 'ab', 'z', 'a']) expect(m(`${other}/x`), `${id} vs ${other}`).toBe(false);
    }
  });
});

describe('includeDepth', () => {
  it('is the most segments a matched id can have, or Infinity where a glob can match deeper', () => {
    expect(includeDepth(['*.csv'])).toBe(1);
    expect(includeDepth(['*.csv', 'in/*.csv'])).toBe(2);
    expect(includeDepth(['{a,b/c}/*.txt'])).toBe(3);
    for (const g of ['**', '**/*.csv', 'a/**', '**.csv', 'a[/]b', 'a[.-0]b', 'a[[:punct:]]b', '+(a|b/c)', '*(a/)x']) expect(includeDepth([g]), g).toBe(Infinity);
  });

  it('never says less than the matcher matches: every id it matches has at most that many segments', () => {
    const cases: [string, string][] = [
      ['*.csv', 'a.csv'],
      ['?/x', 'a/x'],
      ['{a,b/c}/*.txt', 'b/c/d.txt'],
      ['in/*.{csv,tsv}', 'in/a.tsv'],
      ['a\\*b', 'a\\*b'],
    ];
    for (const [glob, id] of cases) {
      expect(includeMatcher([glob])(id), `${glob} matches ${id}`).toBe(true);
      expect(id.split('/').length, glob).toBeLessThanOrEqual(includeDepth([glob]));
    }
    for (const [glob, id] of [['*', 'a/b'], ['?', 'a/b'], ['a?b', 'a/b'], ['*.csv', 'd/a.csv']] as const) expect(includeMatcher([glob])(id), `${glob} vs ${id}`).toBe(false);
  });
});

describe('reachesDotDirectories', () => {
  it('is false only for globs that match nothing below a directory named with a leading dot', () => {
    const below = ['.snapshot/hourly.0/a.csv', '.git/config', 'x/.cronsafe-tmp/job-a/1.tmp', '.x/y/z.csv', 'a/.cache/k.csv'];
    for (const g of ['**', '**/*', '**/*.csv', '*/*', '*.csv', '?x/*', 'a/*/k.csv', '**/!(*.md)', '**/+(*)/*', '{a,b}/*']) {
      const m = includeMatcher([g]);
      expect(below.filter((id) => m(id)), g).toEqual([]);
      if (!/[[(\\]/.test(g)) expect(reachesDotDirectories([g]), g).toBe(false);
    }
    for (const [g, id] of [
      ['**/.cache/*', 'a/.cache/k.csv'],
      ['.x/**', '.x/y/z.csv'],
      ['{a,.git}/*', '.git/config'],
      ['{,.}x/**', '.x/y/z.csv'],
      ['**/[.]cache/*', 'a/.cache/k.csv'],
      ['**/@(.cache)/*', 'a/.cache/k.csv'],
    ] as const) {
      expect(includeMatcher([g])(id), `${g} matches ${id}`).toBe(true);
      expect(reachesDotDirectories([g]), g).toBe(true);
    }
  });
});

describe('directoryFilter', () => {
  it('lets the scan into every directory on the way to an id the include globs match', () => {
    const globs = ['*.csv', 'in/*.csv', '{in,out}/*/x.csv', 'a*/b/*.csv', '**/*.txt', '**/.cache/*', '.x/*', './d/*.csv', 'lat\\xe9/*', 'q?/[a-z].csv', '+(p|r)/*'];
    const ids = ['a.csv', 'in/a.csv', 'out/k/x.csv', 'in/k/x.csv', 'abc/b/z.csv', 'a/b/z.csv', 'p/q/r/s.txt', '.snapshot/h/s.txt', 'p/.cache/z', '.cache/z', '.x/y', 'd/e.csv', 'lat\\xe9/z', 'q1/a.csv', 'p/z', 'pp/z', 'lost+found/a.csv'];
    for (const g of globs) {
      const m = includeMatcher([g]);
      const enter = directoryFilter([g]);
      for (const id of ids) {
        if (!m(id)) continue;
        const segs = id.split('/');
        for (let k = 1; k < segs.length; k++) expect(enter(segs.slice(0, k)), `${g}: ${id} needs ${segs.slice(0, k).join('/')}`).toBe(true);
      }
    }
  });

  it('keeps the scan out of directories no include glob can match into', () => {
    const f = (globs: string[], dir: string): boolean => directoryFilter(globs)(dir.split('/'));
    expect(f(['*.csv'], 'in')).toBe(false);
    expect(f(['in/*.csv'], 'lost+found')).toBe(false);
    expect(f(['in/*.csv'], 'in')).toBe(true);
    expect(f(['in/*.csv'], 'in/x')).toBe(false);
    expect(f(['{in,out}/*.csv'], 'out')).toBe(true);
    expect(f(['a*/b/*.csv'], 'abc/b')).toBe(true);
    expect(f(['a*/b/*.csv'], 'b')).toBe(false);
    expect(f(['**'], '.snapshot')).toBe(false);
    expect(f(['**'], 'a/.git')).toBe(false);
    expect(f(['**'], 'a/b')).toBe(true);
    expect(f(['**/.cache/*'], 'a/.cache')).toBe(true);
    expect(f(['in/*.csv', '**/*.txt'], 'lost+found')).toBe(true);
  });

  it('reads a mid-glob "!", a `|` and an id written as the glob as the matcher does', () => {
    for (const [g, id] of [
      ['a/!*/x.csv', 'a/!z/x.csv'],
      ['in/*.csv|*/deep/*.csv', 'z/deep/x.csv'],
      ['a|.b/*', '.b/x'],
      ['{a,b}/x', '{a,b}/x'],
    ] as const) {
      expect(includeMatcher([g])(id), `${g} matches ${id}`).toBe(true);
      const segs = id.split('/');
      for (let k = 1; k < segs.length; k++) expect(directoryFilter([g])(segs.slice(0, k)), `${g}: ${id} needs ${segs.slice(0, k).join('/')}`).toBe(true);
    }
  });
});

describe('parentheses outside an extglob', () => {
  it('are characters of the name unless they hold a "|"', () => {
    const m = (g: string, id: string): boolean => includeMatcher([g])(id);
    expect(m('* (1).*', 'photo (1).jpg')).toBe(true);
    expect(m('* (1).*', 'photo 1.jpg')).toBe(false);
    expect(m('photo (1).jpg', 'photo 1.jpg')).toBe(false);
    expect(m('* (?).jpg', 'photo (2).jpg')).toBe(true);
    expect(m('\\*(1)', '*(1)')).toBe(true);
    expect(m('*(1)', '11')).toBe(true);
    expect(m('(a|b)/*', 'b/x')).toBe(true);
    expect(m('@(a|(b))', '(b)')).toBe(true);
    expect(excludeMatcher(['r (final)/**'])('r (final)/x')).toBe(true);
    expect(excludeMatcher(['r (final)/**'])('r final/x')).toBe(false);
  });
});

describe('matching time linear in the name (globMatcher)', () => {
  // includeMatcher and excludeMatcher as they were, with picomatch's own matchers: what the
  // linear ones must answer, name for name.
  const dotStarts = (rel: string) => [...rel].flatMap((c, i) => (c === '.' && (i === 0 || rel[i - 1] === '/') ? [i] : []));
  const oldInclude = (globs: string[]) => {
    const whole = globs.map((g) => picomatch(idGlob(g), GLOB_OPTS));
    const alternatives = globs.flatMap(braceAlternatives).map((g) => picomatch(idGlob(g), GLOB_OPTS));
    return (rel: string) => {
      if (rel[0] !== '.' && !rel.includes('/.')) return whole.some((m) => m(rel));
      return alternatives.some((m) => m(rel) && dotStarts(rel).every((i) => !m(`${rel.slice(0, i)}\0${rel.slice(i + 1)}`)));
    };
  };
  const oldExclude = (globs: string[]) => picomatch(globs.map(idGlob), GLOB_OPTS);

  // A fixed seed: a failure names its glob and name, and stays reproducible.
  let seed = 27;
  const random = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return Math.floor((seed / 2147483648) * n);
  };
  const pick = <T>(xs: T[]): T => xs[random(xs.length)]!;
  const globParts = ['*', '*', '*', '?', '_', '_', 'a', '.', '/', '**', '**/', '{a,_}', '{*,.*}', '{_,}', '[a_]', '[!a]', '[^_]', '[.-0]', '[0-9_]', '[_]', '[a/]', '\\*', '\\_', '!', '+(a|_)', '@(a)', '*(_)', '?(a|.)', '!(a)', '(', ')', '|', '\\\\', '\\x5f', 'ab', '\n'];
  const nameChars = ['a', '_', '_', '.', '/', '*', 'b', '\n', '[', ']', '\\'];
  const randomGlob = () => Array.from({ length: 1 + random(7) }, () => pick(globParts)).join('');
  const randomName = () => Array.from({ length: random(9) }, () => pick(nameChars)).join('');
  // Mostly the globs linearSource rewrites: several `*` in a segment, runs of literals, `?` and classes between them.
  const starParts = ['*', '*', '*', '_', '_', 'a', '?', '[_]', '[a_]', '[!a]', '[0-9_]', '[.-0]', '.', '/', '**/', '{_,a}', '\\*'];
  const starGlob = () => Array.from({ length: 2 + random(8) }, () => pick(starParts)).join('');
  const starName = () => Array.from({ length: random(13) }, () => pick(['_', '_', 'a', '.', '/', '[', ']', '*', '1'])).join('');

  it('answers exactly what picomatch did, for random globs and names, dot rules included', () => {
    let compared = 0;
    for (let g = 0; g < 6000; g++) {
      const make = g % 2 === 0 ? randomGlob : starGlob;
      const globs = [make(), ...(random(4) === 0 ? [make()] : [])];
      let before: (rel: string) => boolean, beforeExclude: (rel: string) => boolean;
      try {
        before = oldInclude(globs);
        beforeExclude = oldExclude(globs);
      } catch {
        // picomatch refuses it: so must the new matchers (config validation reports it).
        expect(() => [includeMatcher(globs), excludeMatcher(globs)]).toThrow();
        continue;
      }
      const include = includeMatcher(globs);
      const exclude = excludeMatcher(globs);
      for (let n = 0; n < 40; n++) {
        const name = make === randomGlob ? randomName() : starName();
        expect([globs, name, include(name), exclude(name)]).toEqual([globs, name, before(name), beforeExclude(name)]);
        compared++;
      }
      // The glob's own text (picomatch matches it as it is) and long runs of one character.
      for (const name of [globs[0]!, '_'.repeat(20 + random(20)), `${'_'.repeat(random(30))}.${pick(['a', '_', 'scc'])}`, `a/${'_'.repeat(random(30))}`]) {
        expect([globs, name, include(name), exclude(name)]).toEqual([globs, name, before(name), beforeExclude(name)]);
      }
    }
    expect(compared).toBeGreaterThan(200000);
  }, FUZZ_TIMEOUT_MS);

  it('answers what picomatch did for `**` (the default include, not run through its expression) with any name', () => {
    const before = oldInclude(['**']);
    const include = includeMatcher(['**']);
    const withOther = includeMatcher(['*.csv', '**']);
    const withOtherBefore = oldInclude(['*.csv', '**']);
    const chars = ['a', '.', '/', '\n', '\r', '\\', '*', '[', ' ', '\0', '\u2028', '\ud800', '\udc00', 'é', '😀'];
    const names = ['', '**', '/', '//', 'a/', '/a', 'a//b', '.', '..', 'a/.', 'a/..', '\n', 'x\xe9', 'a\\b'];
    for (let n = 0; n < 20000; n++) names.push(Array.from({ length: random(10) }, () => pick(chars)).join(''));
    for (const name of names) {
      expect([name, include(name), withOther(name)]).toEqual([name, before(name), withOtherBefore(name)]);
    }
    // Not vacuous: both answers come up.
    expect(names.filter((name) => include(name)).length).toBeGreaterThan(1000);
    expect(names.filter((name) => !include(name)).length).toBeGreaterThan(1000);
  });

  // Several `**` among plain segments (matched segment by segment) and bracket expressions alone
  // between stars (`*[_]*`, matched as their class), against names with `[`, dots, empty segments.
  const deepParts = ['**', '**', '**', 'a', '*', '?', 'a*', '*a*', '.a', '.*', '_', '*_*', 'a?', 'b', '[a]', '*[_]*', '{a,b}', '!a', 'a**', '.', '..', '', '[a-c]', '[!a]', '[.-0]', '[[:alpha:]]', '{a,.b}', '{,a}', 'a{b,c}', '\\*', 'a\\*', 'a\\\\*', '[a', 'b}', '$a', '@a', 'x\\\\y', 'q\\x5f', '\n'];
  const deepGlob = () => Array.from({ length: 1 + random(6) }, () => pick(deepParts)).join('/');
  const deepName = () => Array.from({ length: random(8) }, () => pick(['a', 'a', 'b', '_', '.a', '.', '..', 'a_b', '*', 'a*', '[a]', '', 'ab', '{a,b}', '{,a}', 'c', '$a', 'x\\\\y', 'q_', '\n'])).join('/');
  const bracketParts = ['*', '*', '*', '[_]', '[_]', '[a_]', '[!a]', '[^_]', '[[]', '[]_]', '[_/]', '[.-0]', '[\\]]', '[*]', '_', '.', '/', '**/', 'a', '?'];
  const bracketGlob = () => Array.from({ length: 2 + random(8) }, () => pick(bracketParts)).join('');
  const bracketName = () => Array.from({ length: random(12) }, () => pick(['_', '_', '[', ']', '[_]', 'a', '!', '^', '.', '/', '*', '\\'])).join('');

  it('answers what picomatch did for globs with several `**` and for bracket expressions between stars', () => {
    let compared = 0;
    for (let g = 0; g < 4000; g++) {
      const [make, name] = g % 2 === 0 ? [deepGlob, deepName] : [bracketGlob, bracketName];
      const globs = [make()];
      let before: (rel: string) => boolean, beforeExclude: (rel: string) => boolean;
      try {
        before = oldInclude(globs);
        beforeExclude = oldExclude(globs);
      } catch {
        continue;
      }
      const include = includeMatcher(globs);
      const exclude = excludeMatcher(globs);
      for (const n of [...Array.from({ length: 40 }, name), globs[0]!]) {
        expect([globs, n, include(n), exclude(n)]).toEqual([globs, n, before(n), beforeExclude(n)]);
        compared++;
      }
    }
    expect(compared).toBeGreaterThan(150000);
  }, FUZZ_TIMEOUT_MS);

  it('a segment pattern (directoryFilter, nonegate) answers what picomatch did', () => {
    for (let g = 0; g < 3000; g++) {
      const glob = randomGlob();
      const opts = { ...GLOB_OPTS, nonegate: true };
      let before: (s: string) => boolean;
      try {
        before = picomatch(glob, opts);
      } catch {
        continue;
      }
      const after = globMatcher(glob, opts);
      for (let n = 0; n < 30; n++) {
        const name = randomName();
        expect([glob, name, after(name)]).toEqual([glob, name, before(name)]);
      }
    }
  });

  it('makes the run of a `*` followed by another `*` of its segment atomic, and nothing else', () => {
    expect(linearSource(picomatch.makeRe('*_*_*.scc', GLOB_OPTS).source)).toBe('^(?:(?!\\.)(?=.)(?=([^/]*?_))(?:\\1)(?=([^/]*?_))(?:\\2)[^/]*?\\.scc)$');
    // No `*` after the run in its segment, or a run of what may be `/` or of varying length: as it was.
    for (const g of ['*_/*', '*.scc', '*[a/]*', '*[.-0]*', '*+(a)*', 'a/**/b']) {
      const source = picomatch.makeRe(g, GLOB_OPTS).source;
      expect(linearSource(source, 's')).toBe(source);
    }
    // A class that takes `/` would lose a match so made atomic: `a./x` is `a.` `/` `` `x`.
    expect(globMatcher('*[.-0]*x*')('a./x')).toBe(true);
  });
});

describe('slowExtglob', () => {
  it('names a repeating extglob whose pattern can match a text in more than one way', () => {
    for (const [g, slow] of [['*(*).csv', '*(*)'], ['**/+(*)/*', '+(*)'], ['*(a*)x', '*(a*)'], ['*(ab|a|b)', '*(ab|a|b)'], ['+(a|[a-z])', '+(a|[a-z])'], ['*(+(a))', '*(+(a))'], ['*(**)', '*(**)']]) expect(slowExtglob(g!), g).toBe(slow);
  });
  it('takes plain alternatives none of which starts another, single characters, and what is no repeating extglob', () => {
    for (const g of ['+(csv|tsv)', '*.+(csv|tsv)', '*(a|b)', '+([0-9]).csv', '+(?)x', '+(ab)', '!(*.tmp)', '@(a|*)', '?(a*)', '\\*(*)', '[*(]*)', '*_*.scc']) expect(slowExtglob(g), g).toBeUndefined();
  });
});
