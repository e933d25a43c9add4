/**
 * A postgres:// URL's query, read and rewritten as libpq and the pg driver read it: what comes
 * after the first `?`, up to a `#` (a fragment is no part of the query: pg's URL parse drops it).
 * Read without parsing the whole URL, which a password's raw `#`, `?` or `%` may break.
 */

/** The query's parameters, decoded (none when the URL has no query). */
export function queryParams(url: string): URLSearchParams {
  const q = queryParts(url);
  return new URLSearchParams(q?.parts.join('&') ?? '');
}

/** A query parameter (`key=value`, as written) decoded: its key and value. */
export const decodedParam = (part: string): [string, string] | undefined => [...new URLSearchParams(part)][0];

/**
 * The query's parameters as written (`key=value`, not decoded: pg encodes a URL with a raw
 * space or stray `%` once more, and a parameter re-encoded here would then be read encoded),
 * and `rebuild`, the URL with other parameters in their place (none: no `?`). Undefined when
 * the URL has no query.
 */
export function queryParts(url: string): { parts: string[]; rebuild(parts: string[]): string } | undefined {
  const at = url.indexOf('?');
  if (at < 0) return undefined;
  const hash = url.indexOf('#', at);
  const fragment = hash < 0 ? '' : url.slice(hash);
  return {
    parts: url.slice(at + 1, hash < 0 ? undefined : hash).split('&'),
    rebuild: (parts) => {
      const rest = parts.join('&');
      return `${url.slice(0, at)}${rest === '' ? '' : `?${rest}`}${fragment}`;
    },
  };
}

/**
 * True when the URL's last sslrootcert is `system`, libpq 16's name for the system's trusted
 * CAs (with sslmode verify-full, its default then). The pg driver reads it as a file path:
 * such a URL, pasted from a provider's page, failed every start with `ENOENT: open 'system'`.
 */
export function systemRootCert(url: string): boolean {
  return queryParams(url).getAll('sslrootcert').at(-1) === 'system';
}
