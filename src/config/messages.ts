/**
 * Turns zod issues into one line each: `<key>: <what was expected>, got <what was found>`.
 * The key is the dotted path a user would search the YAML for (`lease.renewSeconds`,
 * `handler.command[2]`). Values are shown redacted: a config error is logged, and a
 * postgres URL in it must not carry its password into the logs.
 */
import * as path from 'node:path';
import type * as z from 'zod';
import { ConfigError } from '../errors.js';
import { redactUrl } from '../redact.js';

/** One problem with one key. `key` is '' for the top level. */
export interface KeyProblem {
  key: string;
  message: string;
}

/** `['handler', 'command', 2]` -> `handler.command[2]`. */
export function keyPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else out += out === '' ? String(seg) : `.${String(seg)}`;
  }
  return out;
}

/** Keys whose values may hold a secret, never shown: handler.env's values, the two URLs (their passwords). */
const SECRET_KEYS = new Set(['state.postgres', 'metrics.pushgateway']);
export const mayHoldSecret = (path: readonly PropertyKey[]): boolean =>
  (path[0] === 'handler' && path[1] === 'env' && path.length === 3) || SECRET_KEYS.has(keyPath(path));

/** How a found value is shown after `got`. */
export function describeValue(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  if (typeof v === 'string') {
    const s = redactUrl(v);
    return JSON.stringify(s.length > 80 ? `${s.slice(0, 77)}...` : s);
  }
  // What YAML leaves: a number or a boolean (never a function or symbol).
  return typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint' ? String(v) : typeof v;
}

const TYPE_WORDS: Record<string, string> = {
  object: 'a mapping',
  array: 'a list',
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  boolean: 'true or false',
};

/**
 * Per-parse error map: the wording for leaves whose schema gave none. Returning
 * undefined lets zod fall back to its default text.
 */
export function fallbackMessage(issue: { code?: string; expected?: string }): string | undefined {
  if (issue.code === 'invalid_type' && issue.expected) {
    return `expected ${TYPE_WORDS[issue.expected] ?? issue.expected}`;
  }
  return undefined;
}

/** What YAML 1.2 reads as a number or a boolean when it is not quoted. */
const YAML_NUMBER = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^0x[0-9a-fA-F]+$|^0o[0-7]+$/;
const YAML_BOOLEAN = /^(true|True|TRUE|false|False|FALSE)$/;

/**
 * ` (in quotes, ...)` for a number or a boolean written in quotes where one is expected
 * (`concurrency: "8"`, as a Kubernetes manifest's env values are written): "expected an
 * integer, got "8"" read as if 8 were refused. Else ''. A value a `${...}` made with text
 * around it (`concurrency: ${N}0`) is a string whether quoted or not: said so, since
 * "remove the quotes" was said of a value that had none and would have changed nothing.
 */
function quotedHint(issue: z.core.$ZodIssue, interpolated: boolean): string {
  if (issue.code !== 'invalid_type' || typeof issue.input !== 'string') return '';
  // As written: a space inside the quotes is not undone by removing them.
  const text = issue.input;
  const fits = issue.expected === 'boolean' ? YAML_BOOLEAN.test(text) : (issue.expected === 'number' || issue.expected === 'int') && YAML_NUMBER.test(text);
  if (!fits) return '';
  if (!interpolated) return ' (in quotes, so a string: remove the quotes)';
  const what = issue.expected === 'boolean' ? 'true or false' : 'a number';
  return ` (made by \${...} with text around it, so a string: a value becomes ${what} only when it is exactly one \${NAME} or \${NAME:-default})`;
}

/** Small Levenshtein distance; config keys are short, so O(n*m) is nothing. */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      const sub = (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      cur.push(Math.min((prev[j] ?? 0) + 1, (cur[j - 1] ?? 0) + 1, sub));
    }
    prev = cur;
  }
  return prev[b.length] ?? 0;
}

/** Ranks a prefix match ahead of every edit-distance match. */
const PREFIX_BONUS = 1000;

/** The closest known key to a misspelt one, if it is close enough to be a typo. */
export function suggestKey(unknown: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  let bestShared = -1;
  const u = unknown.toLowerCase();
  for (const k of known) {
    const lk = k.toLowerCase();
    // A key cut short ("timeout" for timeoutSeconds) is the likeliest meaning, however far
    // by edit distance; between equally near keys, the one sharing the longer start.
    const prefix = u.length >= 3 && lk.startsWith(u);
    const d = distance(u, lk) - (prefix ? PREFIX_BONUS : 0);
    let shared = 0;
    while (shared < u.length && u[shared] === lk[shared]) shared++;
    if (d < bestD || (d === bestD && shared > bestShared)) [best, bestD, bestShared] = [k, d, shared];
  }
  return bestD <= Math.max(2, Math.floor(unknown.length / 3)) ? best : undefined;
}

/** `a: {b: {c: ...}}` for the segments a, b, c of a dotted key. */
const nested = (segments: readonly string[]): string => segments.reduceRight((inner, seg, i) => (i === segments.length - 1 ? `${seg}: ...` : `${seg}: {${inner}}`), '');

/**
 * One KeyProblem per issue (an unknown-keys issue yields one per key), in zod's order.
 * `knownKeys(path)` lists the keys allowed at a path, for "did you mean" hints;
 * `interpolated`, the keys whose value a `${...}` made a string (interpolate.ts).
 */
export function formatIssues(
  issues: readonly z.core.$ZodIssue[],
  knownKeys: (path: readonly PropertyKey[]) => readonly string[] = () => [],
  interpolated: ReadonlySet<string> = new Set(),
): KeyProblem[] {
  const out: KeyProblem[] = [];
  for (const issue of issues) {
    const key = keyPath(issue.path);
    switch (issue.code) {
      case 'unrecognized_keys':
        for (const k of issue.keys) {
          // Suggestions cost an edit distance per known key: only for the ones shown.
          const hint = out.length < 50 ? suggestKey(k, knownKeys(issue.path)) : undefined;
          // A key with a "." (or none at all) is quoted: `drain.gracePeriodSeconds: unknown
          // key` read as if the documented key did not exist.
          const shown = k === '' || k.includes('.') ? JSON.stringify(k) : k;
          out.push({
            key: keyPath([...issue.path, shown]),
            message:
              k === '<<'
                ? // YAML 1.1's merge key, which YAML 1.2 (what is read here) does not have.
                  'unknown key (YAML merge keys "<<" are not supported: write the keys out)'
                : hint !== undefined
                  ? `unknown key (did you mean ${JSON.stringify(hint)}?)`
                  : k.includes('.') && !k.split('.').includes('')
                    ? `unknown key (a "." in a key does not nest mappings: write ${nested(k.split('.'))})`
                    : 'unknown key',
          });
        }
        break;
      case 'invalid_key':
        // The record key itself is wrong; the path already ends with it.
        out.push({ key, message: issue.issues[0]?.message ?? issue.message });
        break;
      case 'custom':
        out.push({ key, message: issue.message });
        break;
      default:
        if (issue.code === 'invalid_type' && issue.input === undefined) {
          out.push({ key, message: `is required (${issue.message})` });
        } else {
          // A number where a secret goes is a PIN or password left unquoted; a URL's text is redacted.
          const secretNumber = mayHoldSecret(issue.path) && (typeof issue.input === 'number' || typeof issue.input === 'bigint');
          const found = secretNumber ? 'a number (not shown: it may be a secret)' : describeValue(issue.input);
          out.push({ key, message: `${issue.message}, got ${found}${quotedHint(issue, interpolated.has(key))}` });
        }
    }
  }
  // One value can fail two checks with one text (1e23 is neither a safe integer nor <= 1024):
  // the user has one thing to fix, so it is said once.
  const seen = new Set<string>();
  return out.filter((p) => {
    const line = `${p.key}\0${p.message}`;
    if (seen.has(line)) return false;
    seen.add(line);
    return true;
  });
}

/** `file: key: message`, or `file: message` at the top level. */
export function problemLine(file: string, p: KeyProblem): string {
  return p.key === '' ? `${file}: ${p.message}` : `${file}: ${p.key}: ${p.message}`;
}

/** More problems than this are summed up in one line: nobody reads the 100,000th. */
const MAX_PROBLEMS_SHOWN = 50;

/** Throws the ConfigError for `problems` in `file`: one line each, the first key named. */
export function fail(file: string, problems: KeyProblem[]): never {
  const lines = problems.slice(0, MAX_PROBLEMS_SHOWN).map((p) => problemLine(file, p));
  if (problems.length > MAX_PROBLEMS_SHOWN) lines.push(`${file}: ... and ${problems.length - MAX_PROBLEMS_SHOWN} more problems`);
  throw new ConfigError(lines.join('\n'), path.resolve(file), problems[0]?.key);
}

/**
 * handler.env beside handler.module: accepted and never set (a module handler runs inside
 * cronsafe's process and reads its environment), so a module reading them got undefined on
 * every attempt, each item charged until dead, with nothing said. Warned by `validate` and at
 * each run's start (not refused: a config that sets them unused keeps working).
 */
export function moduleEnvUnused(handler: { module?: string; env: Record<string, string> }): string | undefined {
  const names = Object.keys(handler.env);
  if (handler.module === undefined || names.length === 0) return undefined;
  return `handler.env (${names.join(', ')}) is for command handlers and is not set for a module handler, which runs inside cronsafe's process and reads cronsafe's own environment (process.env): set these variables there (the container's env, the chart's extraEnv), or remove handler.env`;
}
