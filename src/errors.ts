import { constants as osConstants } from 'node:os';

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

/**
 * A ConfigError raised below the config loader (the ledger, the state directory), which
 * knows the key but not the file: `<file>: <key>: <problem>`, as every config error reads.
 * One that names its file already is returned as it is.
 */
export function inConfigFile(file: string, err: ConfigError): ConfigError {
  if (err.file !== undefined) return err;
  return new ConfigError(`${file}: ${err.message}`, file, err.key);
}

/**
 * An error met at the edge of the program whose message says it all (an unusable
 * environment, a bad flag value): the CLI prints that one line, no stack, and exits with
 * `exitCode`. Declared here, a leaf, so that program.ts can test `instanceof` without
 * importing the module that throws it (the runner, the schedule, the ledger adapters).
 */
export abstract class EdgeError extends Error {
  abstract readonly exitCode: number;
}

/** The state store cannot be reached or opened: exit 1 (counts toward the Job's backoffLimit). */
export class StateUnavailable extends EdgeError {
  override name = 'StateUnavailable';
  readonly exitCode = EXIT.FATAL;
  /**
   * The store could not be reached at all (PostgreSQL refused the connection, timed out or
   * is starting up or shutting down), as opposed to answering with a refusal (a password,
   * a permission, a damaged file): worth waiting for, where something can wait (the daemon).
   */
  unreachable = false;
}

/**
 * The ledger's schema is newer than this cronsafe knows: exit 1 as any unusable store, but
 * no outage that waiting ends (the daemon waited for it tick after tick, saying each time
 * that the store was available again): only an upgrade of cronsafe helps.
 */
export class StateTooNew extends StateUnavailable {
  override name = 'StateTooNew';
}

/**
 * `cronsafe daemon` started while its PostgreSQL was down, then refused by it once it was up
 * (a password, no such database): the refusal its start ends on (exit 1), not an outage to
 * wait out. It waited for ever, its log naming only the refused connection of its start.
 */
export class StateRefused extends StateUnavailable {
  override name = 'StateRefused';
}

/** A --scheduled-time (or --at, CRONSAFE_SCHEDULED_TIME) value that is not an RFC 3339 instant: a usage error. */
export class ScheduledTimeError extends EdgeError {
  override name = 'ScheduledTimeError';
  readonly exitCode = EXIT.USAGE;
}

/** The reader of our output went away (EPIPE) or the stream failed: the output is incomplete. */
export class OutputClosed extends EdgeError {
  override name = 'OutputClosed';
  readonly exitCode = EXIT.FATAL;
  constructor(cause: Error) {
    const code = errorCode(cause);
    super(`output incomplete: ${whyOutputFailed(code)} (${code ?? cause.message})`, { cause });
  }
}

/** What a write error on stdout means to the user: a reader gone is not a full disk (`> file` on a full volume). */
function whyOutputFailed(code: string | undefined): string {
  if (code === 'ENOSPC') return 'stdout could not be written: no space left on its device';
  if (code === 'EDQUOT') return "stdout could not be written: this user's disk quota is used up";
  if (code === 'EFBIG') return 'stdout could not be written: the file it goes to reached its size limit';
  if (code === 'EIO') return 'stdout could not be written: an I/O error on its device';
  return 'stdout was closed before everything was written';
}

/** EDQUOT's errno on this platform (122 on Linux), as Node's errors carry it: negative. */
const EDQUOT_ERRNO = osConstants.errno.EDQUOT === undefined ? undefined : -osConstants.errno.EDQUOT;

/**
 * The errno name of a system error. Node 20's libuv has no name for EDQUOT (a user's or a
 * project's disk quota used up): its error says code 'UNKNOWN' (a write) or 'Unknown system
 * error -122' (an open), errno -122, so a check for code 'EDQUOT' never matched, and a full
 * quota was taken for some other error. Named from its errno here; any other code as it is.
 */
export function errorCode(err: unknown): string | undefined {
  const e = err as { code?: unknown; errno?: unknown } | null;
  if (EDQUOT_ERRNO !== undefined && e?.errno === EDQUOT_ERRNO) return 'EDQUOT';
  return typeof e?.code === 'string' ? e.code : undefined;
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
