/**
 * Out of file descriptors (EMFILE: a low `ulimit -n`; ENFILE: the system's file table full)
 * while cronsafe opens what it needs at start-up. What the process met said nothing of it:
 * Node's module loader, unable to open a native module's files, says "Cannot find module
 * 'better-sqlite3'" (or 'fs-ext'), and SQLite, unable to open the ledger's -wal or -shm,
 * "unable to open database file". Said here as what it is, naming the limit and what was
 * being opened.
 */
import { closeSync, openSync, readdirSync } from 'node:fs';
import { StateUnavailable, coerceError, errorCode } from './errors.js';

type Exhausted = 'EMFILE' | 'ENFILE';

/**
 * The soft limit on this process's descriptors (RLIMIT_NOFILE), from Node's diagnostic
 * report, which asks getrlimit(2): it needs no descriptor, so it answers when none is left
 * (reading /proc/self/limits would not). Undefined when unlimited or unknown. Only on the
 * way to an error: the report takes some tens of milliseconds.
 */
export function descriptorLimit(): number | undefined {
  // excludeNetwork: in Node since 20.13 and 22.0, not in @types/node 20's ProcessReport.
  const report = process.report as (NodeJS.ProcessReport & { excludeNetwork?: boolean }) | undefined;
  if (report === undefined) return undefined;
  // Without its network section: that looks up the names of the process's sockets' peers.
  const excluded = report.excludeNetwork;
  try {
    report.excludeNetwork = true;
    const soft = (report.getReport() as { userLimits?: { open_files?: { soft?: unknown } } }).userLimits?.open_files?.soft;
    return typeof soft === 'number' && Number.isSafeInteger(soft) ? soft : undefined;
  } catch {
    return undefined;
  } finally {
    report.excludeNetwork = excluded;
  }
}

/** EMFILE or ENFILE when this process cannot open one more descriptor now. */
function exhaustedNow(): Exhausted | undefined {
  try {
    closeSync(openSync('/dev/null', 'r'));
    return undefined;
  } catch (err) {
    const code = errorCode(err);
    return code === 'EMFILE' || code === 'ENFILE' ? code : undefined;
  }
}

/**
 * How many descriptor numbers below the limit are free now (0 when not even /proc/self/fd
 * can be opened); undefined when that is unknown (no /proc, no limit).
 */
function descriptorsLeft(limit: number | undefined): number | undefined {
  if (limit === undefined) return undefined;
  let open: string[];
  try {
    open = readdirSync('/proc/self/fd');
  } catch (err) {
    const code = errorCode(err);
    return code === 'EMFILE' || code === 'ENFILE' ? 0 : undefined;
  }
  // The listing's own descriptor is among them, and is free again.
  return limit - (open.filter((fd) => Number(fd) < limit).length - 1);
}

/** What the limit is, said for the message: `ulimit -n 20`. */
const limitText = (limit: number | undefined): string => (limit === undefined ? 'ulimit -n' : `ulimit -n ${limit}`);

/**
 * Which table ran out, said for a message: the process's (EMFILE, with its limit: `limit`,
 * else asked now, descriptorLimit) or the system's (ENFILE). Every out-of-descriptors message
 * says it through here, so the pass's (runner/failure.ts) names the value as start-up's do.
 */
export const exhaustedWhich = (code: Exhausted, limit: number | undefined = code === 'EMFILE' ? descriptorLimit() : undefined): string =>
  code === 'EMFILE' ? `this process's limit (${limitText(limit)}, RLIMIT_NOFILE) is reached` : "the system's file table is full";

/**
 * The process ran out of descriptors while opening what it needs (exit 1, as any unusable
 * state store: the environment's, counted toward the Job's backoffLimit). One line: the
 * cause, the limit, what was being opened, and what the failing call itself said.
 */
export class OutOfDescriptors extends StateUnavailable {
  override name = 'OutOfDescriptors';
  readonly code: Exhausted;
  constructor(opening: string, code: Exhausted, said: string, limit: number | undefined, cause?: unknown) {
    super(`out of file descriptors (${code}: too many open files): ${exhaustedWhich(code, limit)}, ${opening}; raise the limit. ${said}`, { cause });
    this.code = code;
  }
}

/**
 * require(name) of a native module (better-sqlite3, fs-ext). Node's loader, when it cannot
 * open the module's files for want of a descriptor, says only "Cannot find module": then
 * OutOfDescriptors, naming the module and `what` it is for.
 */
export function requireNative<T>(req: NodeJS.Require, name: string, what: string): T {
  try {
    return req(name) as T;
  } catch (err) {
    // Right away: the loader holds nothing open once it failed, so what is used up stays so.
    const code = (err as { code?: unknown }).code === 'MODULE_NOT_FOUND' ? exhaustedNow() : undefined;
    if (code === undefined) throw err;
    throw new OutOfDescriptors(`loading ${name} (${what})`, code, `Node's loader said: Cannot find module '${name}'`, descriptorLimit(), err);
  }
}

/**
 * SQLite's descriptors at once for a ledger: the file, its -wal and its -shm, and a
 * rollback journal while it recovers one.
 */
const SQLITE_NEEDS = 4;

/**
 * SQLite's "unable to open database file" (SQLITE_CANTOPEN) for the ledger `file`, met with
 * fewer descriptors left than SQLite opens for it (SQLITE_NEEDS; SQLite closed what it had
 * opened before saying so): OutOfDescriptors. Undefined otherwise.
 */
export function sqliteOutOfDescriptors(file: string, err: unknown): OutOfDescriptors | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !code.startsWith('SQLITE_CANTOPEN')) return undefined;
  const limit = descriptorLimit();
  const left = descriptorsLeft(limit);
  if (left === undefined || left >= SQLITE_NEEDS) return undefined;
  return new OutOfDescriptors(
    `opening the ledger ${file} (SQLite opens up to ${SQLITE_NEEDS} at once for it, with its -wal and -shm; ${left} ${left === 1 ? 'was' : 'were'} left)`,
    'EMFILE',
    `SQLite said: ${coerceError(err).message}`,
    limit,
    err,
  );
}

/**
 * The one line for any other error that came of EMFILE or ENFILE (a start journal, a
 * directory of the pass): the cause and the limit before what failed. Undefined for others.
 */
export function outOfDescriptorsLine(err: Error): string | undefined {
  if (err instanceof OutOfDescriptors) return err.message;
  const code = errorCode(err);
  if (code !== 'EMFILE' && code !== 'ENFILE') return undefined;
  return `out of file descriptors: ${exhaustedWhich(code)}; raise the limit or lower concurrency: ${err.message}`;
}
