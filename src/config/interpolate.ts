/**
 * `${VAR}` / `${VAR:-default}` in string values, from an environment map. Runs on the
 * parsed YAML before validation, so a substituted value is validated like a literal.
 *
 * Rules (docs/configuration.md): `${VAR}` needs VAR set (empty is allowed);
 * `${VAR:-text}` uses text when VAR is unset or empty; `$${` is a literal `${`; any
 * other `${` is an error, so a typo never passes through silently. A value that is
 * exactly one `${...}` where the schema expects a number becomes that number, so
 * `concurrency: ${CONCURRENCY:-4}` works; everything else stays a string.
 */
import type { KeyProblem } from './messages.js';
import { keyPath } from './messages.js';

const TOKEN_RE = /\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}|\$\{[^}]*\}?/g;
const NUMBER_RE = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;

export interface InterpolateResult {
  value: unknown;
  problems: KeyProblem[];
}

/**
 * Interpolate every string in `value` (keys are left alone). `isNumberAt(path)` says
 * whether the schema wants a number there.
 */
export function interpolate(
  value: unknown,
  env: NodeJS.ProcessEnv,
  isNumberAt: (path: readonly PropertyKey[]) => boolean,
): InterpolateResult {
  const problems: KeyProblem[] = [];

  const str = (s: string, path: PropertyKey[]): unknown => {
    if (!s.includes('${')) return s;
    let whole = false;
    const out = s.replace(TOKEN_RE, (tok: string, name?: string, hasDefault?: string, def?: string) => {
      if (tok === '$${') return '${';
      if (name === undefined) {
        problems.push({
          key: keyPath(path),
          message: `invalid interpolation ${JSON.stringify(tok)} (use \${NAME} or \${NAME:-default}; write $\${ for a literal \${)`,
        });
        return tok;
      }
      whole = tok === s;
      const v = env[name];
      if (hasDefault !== undefined) return v === undefined || v === '' ? (def ?? '') : v;
      if (v === undefined) {
        problems.push({ key: keyPath(path), message: `environment variable ${name} is not set` });
        return '';
      }
      return v;
    });
    return whole && NUMBER_RE.test(out.trim()) && isNumberAt(path) ? Number(out) : out;
  };

  const walk = (v: unknown, path: PropertyKey[]): unknown => {
    if (typeof v === 'string') return str(v, path);
    if (Array.isArray(v)) return v.map((x, i) => walk(x, [...path, i]));
    if (v !== null && typeof v === 'object') {
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, [...path, k])]));
    }
    return v;
  };

  return { value: walk(value, []), problems };
}
