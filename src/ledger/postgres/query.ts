import { wellFormed } from '../well-formed.js';

/**
 * SQL builders for the PostgreSQL ledger are pure functions returning a `Query`
 * (pg-boss style): the text and its positional values. Only the adapter executes them,
 * so every statement can be checked without a database.
 */
export interface Query {
  text: string;
  values: unknown[];
}

/**
 * A statement prepared once per session under `name` (node-postgres does it on first use).
 * Only for statements whose text is fixed for a session: the claim session's.
 */
export interface NamedQuery extends Query {
  name: string;
}

/** The schema the ledger lives in when `state.schema` is not set. */
export const DEFAULT_SCHEMA = 'cronsafe';

/** What `state.schema` may be: a plain lowercase SQL identifier (PostgreSQL's limit is 63 bytes). */
export const SCHEMA_RE = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * A schema name as it appears in SQL text. Identifiers cannot be bound as parameters,
 * so the name is checked against SCHEMA_RE (config validation already did) and quoted.
 */
export function ident(schema: string): string {
  if (!SCHEMA_RE.test(schema)) {
    throw new TypeError(`schema name must match ${String(SCHEMA_RE)}, got ${JSON.stringify(schema)}`);
  }
  return `"${schema}"`;
}

/**
 * Ids an operator gave (`dead-letter retry`, `requeue`), as keys to look up: made
 * well-formed, duplicates dropped, and without those holding NUL. PostgreSQL's text holds
 * no NUL (22021, "invalid byte sequence for encoding UTF8: 0x00") and no file name does,
 * so no row has one; bound raw, one such id (`"a\u0000b"`, pasted JSON) failed the whole
 * command as `state store unavailable` (exit 1), the other ids given with it left dead.
 * Left out, it is reported as not in the ledger, as on SQLite.
 */
export function lookupIds(ids: string[]): string[] {
  return [...new Set(ids.map(wellFormed))].filter((id) => !id.includes('\u0000'));
}

/** `q(text, ...values)`: a Query, for builders that read better inline. */
export const q = (text: string, ...values: unknown[]): Query => ({ text, values });

const NEEDS_ESCAPE = /["\\]/;

/**
 * `values` as the text of a PostgreSQL array (`{"a","b"}`), what node-postgres sends for a JS
 * array, built with less work: its escaping runs two regular-expression replaces per element,
 * here only for an element holding `"` or `\`. For the claim statements, whose id arrays go
 * out for every 8 items (docs/benchmarks.md, 2026-12-06 12:20-12:52). No element may be null.
 */
export function textArray(values: readonly string[]): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    out += `${i > 0 ? ',"' : '"'}${NEEDS_ESCAPE.test(v) ? v.replace(/["\\]/g, '\\$&') : v}"`;
  }
  return `${out}}`;
}

/** `values` (finite numbers or null) as the text of a PostgreSQL array: `{1,NULL,2.5}`. */
export function numberArray(values: readonly (number | null)[]): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    out += `${i > 0 ? ',' : ''}${v === null || v === undefined ? 'NULL' : String(v)}`;
  }
  return `${out}}`;
}
