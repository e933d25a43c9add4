/** Exit codes (DESIGN.md): the chart maps them with podFailurePolicy. */
export const EXIT = {
  OK: 0,
  FATAL: 1,
  USAGE: 2,
  TEMPFAIL: 75,
  CONFIG: 78,
} as const;

/** A configuration problem: always names the file and the key. Exit 78. */
export class ConfigError extends Error {
  override name = 'ConfigError';
  constructor(
    message: string,
    readonly file?: string,
    readonly key?: string,
  ) {
    super(message);
  }
}

/** Normalise anything thrown into an Error, once, at the boundary (graphile-worker's coerceError). */
export function coerceError(err: unknown): Error {
  if (err instanceof Error) return err;
  if (typeof err === 'string') return new Error(err);
  try {
    return new Error(JSON.stringify(err));
  } catch {
    return new Error(String(err));
  }
}
