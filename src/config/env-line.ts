import path from 'node:path';
import { accessProblem, crlf, DEFAULT_PATH, onPath, statOf } from './exec-path.js';

/** The script's own path, which the kernel gives env after the #! line's argument (no argument holds a NUL). */
const SCRIPT = '\0script';

/** GNU env's long options (coreutils 9.1), by the short one they mean; `=`: takes a value; `?`: may take one after `=`. */
const ENV_LONG: Record<string, string> = {
  'ignore-environment': 'i', null: '0', 'unset=': 'u', 'chdir=': 'C', 'split-string=': 'S', debug: 'v',
  help: 'help', version: 'help', 'block-signal?': '', 'default-signal?': '', 'ignore-signal?': '', 'list-signal-handling': '',
};

/**
 * Why env, given the #! line's argument (the kernel's one argument: `-i python3` is one) and
 * then the script's own path, cannot run the handler, or null. As GNU env reads its argv:
 * options (`-S STRING` split into more of them), `NAME=VALUE` settings, then the program. When
 * no program is left, the script's own path is the program: env runs the script again, which
 * runs env again (`#!/usr/bin/env -i`, `-S`, `FOO=1 python3`), execve after execve in one
 * process until handler.timeoutSeconds charges the item. A program not on the PATH env
 * searches (none after -i: execvp's default), or an option env refuses, fails every item.
 * What cannot be known before the run (`${VAR}` in -S) is left to it.
 */
export function envProblem(arg: string, cwd: string, PATH: string | undefined): string | null {
  let args = arg === '' ? [SCRIPT] : [arg, SCRIPT];
  let dir = cwd;
  let envPATH = PATH;
  let split = false;
  const said = (what: string): string => `has a #! line for env (${JSON.stringify(arg)}) ${what}${crlf(arg)}`;
  let i = 0;
  while (i < args.length) {
    const a = args[i]!;
    if (a === SCRIPT || a === '-' || !a.startsWith('-')) break;
    i++;
    if (a === '--') break;
    // One option: its letter, and its value when it takes one (the rest of a cluster, or the next argument).
    const options: Array<[string, string | undefined]> = [];
    if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      const name = eq === -1 ? a.slice(2) : a.slice(2, eq);
      const known = Object.keys(ENV_LONG).filter((k) => k.replace(/[=?]$/, '') === name);
      const matches = known.length > 0 ? known : Object.keys(ENV_LONG).filter((k) => k.startsWith(name));
      if (matches.length !== 1) return said(`that env refuses: ${matches.length === 0 ? 'unrecognized' : 'ambiguous'} option ${JSON.stringify(a)}${blankHint(a)}`);
      const long = matches[0]!;
      const letter = ENV_LONG[long]!;
      if (long.endsWith('=')) {
        const value = eq === -1 ? args[i++] : a.slice(eq + 1);
        options.push([letter, value]);
      } else if (eq !== -1 && !long.endsWith('?')) {
        return said(`that env refuses: option ${JSON.stringify(a)} takes no value`);
      } else options.push([letter, undefined]);
    } else {
      for (let j = 1; j < a.length; j++) {
        const c = a[j]!;
        if (c === 'u' || c === 'C' || c === 'S') {
          options.push([c, j + 1 < a.length ? a.slice(j + 1) : args[i++]]);
          break;
        }
        if (c === 'i' || c === 'v' || c === '0') options.push([c, undefined]);
        // -a (argv0) is newer than some envs: left to the run.
        else if (c === 'a') return null;
        else return said(`that env refuses: invalid option ${JSON.stringify(`-${c}`)}${blankHint(a)}`);
      }
    }
    for (const [letter, value] of options) {
      // -S given nothing splits the script's path: the script is the program again.
      if (letter === 'S' && value === SCRIPT) {
        args = [SCRIPT];
        i = 0;
        split = true;
        break;
      }
      if (value === SCRIPT) return said(`whose option -${letter} takes the script's own path as its value, leaving the handler's first argument as env's program`);
      if (letter === 'help') return said('that makes env print its help or version and exit 0 without running the script: every item would pass, unprocessed');
      if (letter === '0') return said('that env refuses: -0 (--null) cannot be given with a program, and the script is one');
      if (letter === 'i' || (letter === 'u' && value === 'PATH')) envPATH = undefined;
      if (letter === 'C') {
        dir = path.resolve(dir, value!);
        if (!statOf(dir)?.isDirectory()) return said(`whose -C directory ${JSON.stringify(value)} (${dir}) is not a directory: env cannot change to it`);
      }
      if (letter === 'S') {
        const words = splitString(value!);
        if (words === null) return null;
        split = true;
        args = [...words, ...args.slice(i)];
        i = 0;
      }
    }
  }
  if (args[i] === '-') {
    envPATH = undefined;
    i++;
  }
  for (; args[i] !== SCRIPT && args[i]!.includes('='); i++) {
    const [name, value] = args[i]!.split(/=([^]*)/);
    if (name === 'PATH') envPATH = value;
  }
  const program = args[i]!;
  if (program === SCRIPT) {
    const why = arg === '' ? '' : ` (${JSON.stringify(arg)} holds only env's options or NAME=VALUE settings)`;
    return `has a #! line for env that names no program${why}: env would run the script itself, again and again, until the timeout${arg === '' || split ? '' : blankHint(arg)}`;
  }
  if (program.includes('/')) {
    const problem = accessProblem(path.resolve(dir, program));
    return problem && said(`whose program ${JSON.stringify(program)} ${problem}${split ? '' : blankHint(program)}`);
  }
  // execvp with no PATH searches its default, as spawn does.
  if (onPath(program, dir, envPATH ?? DEFAULT_PATH)) return null;
  const where = envPATH === undefined ? (PATH === undefined ? 'PATH is not set' : `PATH is unset by env, so ${DEFAULT_PATH}`) : envPATH;
  return `has a #! line for env whose program ${JSON.stringify(program)} is not found on PATH (${where})${crlf(program)}${split ? '' : blankHint(program)}`;
}

/** env takes a #! line's whole rest as one argument: blanks in it are part of a name, not separators. */
const blankHint = (arg: string): string =>
  /[ \t]/.test(arg) ? ' (the kernel gives env the rest of the #! line as one argument, blanks included: use `#!/usr/bin/env -S ...` to give it several)' : '';

/**
 * env -S's splitting of its string into arguments (GNU coreutils): blanks separate,
 * '...' and "..." quote, a `#` starting an argument starts a comment, and the backslash
 * escapes it documents. null where the result depends on the environment (`${VAR}`) or
 * env would refuse the string (an unknown escape, an unterminated quote): left to the run.
 */
function splitString(s: string): string[] | null {
  const words: string[] = [];
  let word: string | null = null;
  let quote: "'" | '"' | null = null;
  for (let k = 0; k < s.length; k++) {
    const c = s[k]!;
    if (quote === "'" && c !== "'" && c !== '\\') word += c;
    else if (quote === null && /[ \t\n\v\f\r]/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else if (c === "'" || c === '"') {
      if (quote === null) quote = c;
      else if (quote === c) quote = null;
      else word = (word ?? '') + c;
      word ??= '';
    } else if (c === '#' && quote === null && word === null) break;
    else if (c === '$') return null;
    else if (c === '\\') {
      const e = s[++k];
      if (quote === "'" && e !== '\\' && e !== "'") word = `${word ?? ''}\\${e ?? ''}`;
      else if (e === 'c' && quote === null) break;
      else if (e === '_') {
        if (quote === null) {
          if (word !== null) words.push(word);
          word = null;
        } else word += ' ';
      } else {
        const ch = e === undefined ? undefined : ({ f: '\f', n: '\n', r: '\r', t: '\t', v: '\v', '"': '"', "'": "'", '\\': '\\', '#': '#', $: '$' } as Record<string, string>)[e];
        if (ch === undefined) return null;
        word = (word ?? '') + ch;
      }
    } else word = (word ?? '') + c;
  }
  if (quote !== null) return null;
  if (word !== null) words.push(word);
  return words;
}
