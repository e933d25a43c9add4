const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * An id as the ledger stores it. A string with a lone surrogate (never produced by
 * node:fs, possible from other sources) would be stored as bytes that read back as
 * a different string, so its claim could never match again; the ledger stores and
 * looks it up with U+FFFD instead, on every path.
 */
export function wellFormed(id: string): string {
  return id.replace(LONE_SURROGATE, '\ufffd');
}

/**
 * A batch as one JSON parameter, ids made well-formed (see wellFormed). JSON.stringify
 * escapes a lone surrogate as `\udXXX`, so the common case costs one `includes`.
 */
export function batchJson(rows: unknown[]): string {
  const json = JSON.stringify(rows);
  if (!json.includes('\\ud')) return json;
  return JSON.stringify(rows, (_key, v: unknown) => (typeof v === 'string' ? wellFormed(v) : v));
}
