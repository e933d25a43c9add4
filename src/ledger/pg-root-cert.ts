/**
 * True when the URL's last sslrootcert is `system`, libpq 16's name for the system's trusted
 * CAs (with sslmode verify-full, its default then). The pg driver reads it as a file path:
 * such a URL, pasted from a provider's page, failed every start with `ENOENT: open 'system'`.
 */
export function systemRootCert(url: string): boolean {
  const at = url.indexOf('?');
  if (at < 0) return false;
  const hash = url.indexOf('#', at);
  return new URLSearchParams(url.slice(at + 1, hash < 0 ? undefined : hash)).getAll('sslrootcert').at(-1) === 'system';
}
