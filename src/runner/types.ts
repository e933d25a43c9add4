import type { Logger } from 'pino';
import { coerceError } from '../errors.js';
import type { Redact } from '../redact.js';

/** One unit of work handed to a handler. */
export interface WorkItem {
  /** Path relative to source.directory, `/`-separated. Never absolute, never contains `..`. */
  id: string;
  /**
   * Absolute path of the item file, as text. Text cannot name a file whose name is not
   * UTF-8 (an id with `\\xHH` escapes, src/runner/item-id.ts): a module handler then gets a
   * symbolic link to the file, with the escaped name, for the attempt (handlers/item-link.ts).
   */
  path: string;
  /** The item file's absolute path as bytes (itemPaths(sourceDir, id).raw): always opens the real file. */
  rawPath?: Buffer;
  /** 1-based; counts every claim of this item. */
  attempt: number;
}

export interface HandlerContext {
  /** Aborted when the run must give the item up (drain deadline, second signal, timeout). */
  signal: AbortSignal;
  /**
   * For cronsafe's own handler wrappers: be told when `signal` aborts (at once if it has)
   * without reading `signal`, which the runner makes only on demand (an AbortSignal costs
   * ~8 us on Node 20). Returns the unsubscribe. Absent: listen on `signal`.
   */
  onAbort?(fn: (reason: unknown) => void): () => void;
  /** Temp path to write the output to; renamed into place only after success. Absent without output.directory. */
  outputPath?: string;
  log: Logger;
  attempt: number;
}

/** Thrown (or rejected) by a handler to fail an attempt. */
export class HandlerFailure extends Error {
  override name = 'HandlerFailure';
  constructor(
    message: string,
    /** True when the attempt was cut short by cronsafe itself (drain), not by the item. */
    readonly interrupted = false,
  ) {
    super(message);
  }
}

/**
 * An attempt that ran past handler.timeoutSeconds: the item's own doing, charged even when a
 * drain's abort came while it was being stopped (the abort is not what ended it).
 */
export class TimedOut extends HandlerFailure {
  override name = 'TimedOut';
  constructor(seconds: number) {
    super(`timed out after ${seconds}s`);
  }
}

/**
 * A command handler's child that exited 127 or 126: what a shell (`sh -c`), `env`, `xargs`,
 * `timeout` or `nice` exit with when the program they were to run is not there (127) or
 * cannot be run (126). Before any attempt of the pass succeeded, that is the handler's
 * environment (a tool missing from the image), not the item: judgeFailure.
 */
export class ProgramNotFound extends HandlerFailure {
  override name = 'ProgramNotFound';
  constructor(
    message: string,
    readonly exitCode: 126 | 127,
  ) {
    super(message);
  }
}

/**
 * A command handler's child that died of a signal cronsafe did not send (no timeout, no abort),
 * or exited 128 + its number (it caught the signal: a JVM's exit 143 on SIGTERM).
 */
export class KilledBySignal extends HandlerFailure {
  override name = 'KilledBySignal';
  constructor(
    message: string,
    readonly signal: NodeJS.Signals,
  ) {
    super(message);
  }
}

/** The failure of an attempt cronsafe cut short (drain, second signal, timeout): not the item's, never charged. */
export function interrupted(reason: unknown): HandlerFailure {
  return new HandlerFailure(`interrupted: ${coerceError(reason ?? 'aborted').message}`, true);
}

/** What a handler is made with besides handler.*. */
export interface HandlerOptions {
  /** Working directory of command handlers; what escaped ids' links are made under. */
  sourceDir: string;
  /** Hides cronsafe's secrets in what the handler says (config/secrets.ts). Default: nothing hidden. */
  redact?: Redact;
  /** Whether a value holds the ledger's password (config/secrets.ts holdsLedgerSecret): inherited variables that do are not a command handler's. */
  holdsLedgerSecret?: (value: string) => boolean;
  /**
   * Why a command handler's program that is there cannot be run (config/program.ts
   * whyProgramNotRun: its #! interpreter or ELF loader missing), or null: said when a spawn
   * fails with ENOENT, which the kernel gives for those as for a missing program.
   */
  whyNotRun?: (file: string, cwd: string, PATH: string | undefined) => string | null;
  /**
   * A module handler's calls run in an async context naming their item (exit-guard.ts
   * runInAttempt), so that code breaking the process is charged to its item. It costs every
   * promise of the process a hook (~15% of a no-op handler's rate), so it is on only after a
   * recent run was broken so (HANDLER_BROKE_PROCESS in its counts).
   */
  traceBreaks?: boolean;
}

/** The key a run's recorded counts carry when handler code broke the process during it. */
export const HANDLER_BROKE_PROCESS = 'handlerBrokeProcess';

/** A handler runs one attempt; resolves on success, rejects on failure. */
export interface Handler {
  run(item: WorkItem, ctx: HandlerContext): Promise<void>;
  close?(): Promise<void>;
  /**
   * Aborted (reason: an Error) when the handler broke the process in a way no item can be
   * charged for (module handlers: a stray process.exit, an unhandled rejection): the run
   * must stop claiming, hand its claims back and fail.
   */
  readonly fatal?: AbortSignal;
}
