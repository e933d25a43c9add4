/**
 * `${VAR}` / `${VAR:-default}` in string values, from an environment map. Runs on the
 * parsed YAML before validation, so a substituted value is validated like a literal.
 *
 * Rules (docs/configuration.md): `${VAR}` needs VAR set (empty is allowed);
 * `${VAR:-text}` uses text when VAR is unset or empty; the text may itself hold
 * references (`${A:-${B:-4}}`, up to MAX_DEPTH levels), expanded only when the default is
 * used, as a shell does; `$${` is a literal `${`; any other `${` is an error, so a typo
 * never passes through silently. A value that is exactly one `${...}` where the schema
 * expects a number becomes that number, so `concurrency: ${CONCURRENCY:-4}` works; where
 * it expects a boolean, `true` or `false` (as YAML writes them) becomes that boolean;
 * everything else stays a string.
 */
import type { KeyProblem } from './messages.js';
import { keyPath, mayHoldSecret } from './messages.js';
import { envNotUtf8 } from './env-bytes.js';

const NAME_RE = /[A-Za-z_][A-Za-z0-9_]*/y;
/** YAML 1.2's numbers (the core schema the config is read with): `0x10` from a variable is 16, as written in the file. */
const NUMBER_RE = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^0x[0-9a-fA-F]+$|^0o[0-7]+$/;
/** YAML 1.2's booleans (the core schema the config is read with). */
const BOOLEAN_RE = /^(true|True|TRUE|false|False|FALSE)$/;
/** Defaults nested deeper than this are an error (a runaway string, not a config). */
export const MAX_DEPTH = 8;

const USAGE = '(use ${NAME} or ${NAME:-default}; write $${ for a literal ${)';

export interface InterpolateResult {
  value: unknown;
  problems: KeyProblem[];
  /**
   * The keys (`keyPath`) whose value a `${...}` made and left a string: their quotes are not
   * what made them one (the message for a number refused says so, not "remove the quotes").
   */
  interpolated: Set<string>;
}

/** A scan of `s` from one position: the expanded text and where the scan stopped. */
interface Scanned {
  out: string;
  end: number;
  /** A default's text reached the end of the string without its `}`. */
  unclosed?: boolean;
}

/** Expand one string; problems are reported through `problem`. */
function expand(s: string, env: NodeJS.ProcessEnv, problem: (message: string) => void, secret = false): { out: string; whole: boolean } {
  // A value that may hold a secret (SECRET_KEYS) is not quoted: a password written with a
  // "${" in it would be shown from there on.
  const quote = (from: number, token: string): string =>
    secret ? `at character ${from + 1} (not shown: the value may hold a secret)` : JSON.stringify(token);
  // `evaluate` is false inside a default that is not used: still parsed (a typo is an
  // error either way), but an unset variable there is no problem.
  const text = (from: number, depth: number, evaluate: boolean, inDefault: boolean): Scanned => {
    let out = '';
    let i = from;
    // A literal `$${x}` inside a default keeps its own `}`: it does not end the default.
    let literal = 0;
    while (i < s.length) {
      if (inDefault && s[i] === '}') {
        if (literal === 0) return { out, end: i + 1 };
        literal--;
        out += '}';
        i++;
      } else if (s.startsWith('$${', i)) {
        out += '${';
        i += 3;
        literal++;
      } else if (s.startsWith('${', i)) {
        const r = reference(i, depth, evaluate);
        out += r.out;
        i = r.end;
        if (r.unclosed) return r;
      } else {
        out += s[i];
        i++;
      }
    }
    return { out, end: i, unclosed: inDefault };
  };

  const invalid = (start: number): Scanned => {
    const close = s.indexOf('}', start);
    const end = close < 0 ? s.length : close + 1;
    const tok = s.slice(start, end);
    problem(`invalid interpolation ${quote(start, tok)} ${USAGE}`);
    return { out: tok, end };
  };

  const reference = (start: number, depth: number, evaluate: boolean): Scanned => {
    NAME_RE.lastIndex = start + 2;
    const name = NAME_RE.exec(s)?.[0];
    if (name === undefined) return invalid(start);
    const after = start + 2 + name.length;
    // Own variables only: `${constructor}` is not set, whatever an object inherits by that name.
    const v = Object.hasOwn(env, name) ? env[name] : undefined;
    if (evaluate && v !== undefined && envNotUtf8(name, v, env)) {
      problem(`environment variable ${name} holds bytes that are not UTF-8, which would be read as another text (U+FFFD): set it as UTF-8; a file name that is not UTF-8 is written as its id, with \\xHH escapes (caf\\xe9.txt)`);
    }
    if (s[after] === '}') {
      if (evaluate && v === undefined) problem(`environment variable ${name} is not set`);
      return { out: v ?? '', end: after + 1 };
    }
    if (!s.startsWith(':-', after)) return invalid(start);
    if (depth >= MAX_DEPTH) throw new TooDeep();
    const useDefault = v === undefined || v === '';
    const def = text(after + 2, depth + 1, evaluate && useDefault, true);
    if (def.unclosed) {
      // Reported once, by the outermost reference, with the whole of it.
      if (depth === 0) problem(`invalid interpolation ${quote(start, s.slice(start))}: no closing } ${USAGE}`);
      return { out: '', end: s.length, unclosed: depth > 0 };
    }
    return { out: useDefault ? def.out : v, end: def.end };
  };

  try {
    let out = '';
    let from = 0;
    if (s.startsWith('${')) {
      const r = reference(0, 0, true);
      if (r.end === s.length) return { out: r.out, whole: true };
      out = r.out;
      from = r.end;
    }
    return { out: out + text(from, 0, true, false).out, whole: false };
  } catch (err) {
    if (!(err instanceof TooDeep)) throw err;
    problem(`defaults nested more than ${MAX_DEPTH} levels deep`);
    return { out: s, whole: false };
  }
}

class TooDeep extends Error {}


/**
 * Interpolate every string in `value` (keys are left alone). `typeAt(path)` says what the
 * schema wants there ('number', 'boolean', ...).
 */
export function interpolate(
  value: unknown,
  env: NodeJS.ProcessEnv,
  typeAt: (path: readonly PropertyKey[]) => string | undefined,
): InterpolateResult {
  const problems: KeyProblem[] = [];
  const interpolated = new Set<string>();

  const str = (s: string, path: PropertyKey[]): unknown => {
    if (!s.includes('${')) return s;
    const key = keyPath(path);
    const { out, whole } = expand(s, env, (message) => problems.push({ key, message }), mayHoldSecret(path));
    const text = out.trim();
    if (whole && NUMBER_RE.test(text) && typeAt(path) === 'number') return Number(text);
    if (whole && BOOLEAN_RE.test(text) && typeAt(path) === 'boolean') return text.toLowerCase() === 'true';
    interpolated.add(key);
    return out;
  };

  const walk = (v: unknown, path: PropertyKey[]): unknown => {
    if (typeof v === 'string') return str(v, path);
    if (Array.isArray(v)) return v.map((x, i) => walk(x, [...path, i]));
    if (v !== null && typeof v === 'object') {
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, [...path, k])]));
    }
    return v;
  };

  return { value: walk(value, []), problems, interpolated };
}
