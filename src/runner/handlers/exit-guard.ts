/**
 * A module handler runs inside cronsafe's process, so its code can end or break that
 * process: `process.exit(0)` would end the run with exit 0 and its claims still held, an
 * unhandled rejection or an uncaught exception would crash it. While a module handler is
 * loaded, this guard:
 *
 * - replaces `process.exit` with a function that throws a ModuleExit instead. Called from
 *   an attempt's own code, the throw rejects that attempt, which fails (the item's
 *   fault). Called anywhere else (a timer, code that caught the throw), no attempt
 *   receives it: once every attempt in flight at the call has settled without it, the
 *   call is "stray" and `fatal` aborts: the run stops claiming, hands claims back and
 *   fails (exit 1).
 * - turns an unhandled rejection or an uncaught exception into `fatal` at once (which
 *   item it came from is told only as below).
 *
 * Which item's code it was is told by the async context the breaking callback was made in:
 * a module handler's call runs inside runInAttempt(item id), so a timer, a promise or a
 * callback its code makes carries that id, and the listeners read it (ProcessBroken.itemId),
 * even when the attempt that made it has settled. AsyncLocalStorage enables promise hooks for
 * the whole process on Node 20 (~15% of a no-op module handler's rate), so it is used only in
 * runs after one that handler code broke (HandlerOptions.traceBreaks); in the first, no item
 * is told and none charged.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { TAIL_BYTES } from './capture.js';
import { noRedact, type Redact } from '../../redact.js';
import { escapeControls } from '../../terminal-safe.js';

/** What `process.exit(code)` throws while a module handler is loaded. */
export class ModuleExit extends Error {
  override name = 'ModuleExit';
  /** The item whose attempt's code made the call (runInAttempt), if any. */
  readonly itemId = attemptOf.getStore();
  constructor(readonly code: unknown) {
    // eslint-disable-next-line @typescript-eslint/no-base-to-string -- shown as process.exit itself would coerce it
    super(`handler code called process.exit(${code === undefined ? '' : String(code)})`);
    made.set(this, { message: this.message, itemId: this.itemId });
  }
}

/**
 * What each ModuleExit said and whose call it was, as made. Handler code that caught one may
 * redefine its `message` or `itemId` (a getter that throws): read there, thrown again from a
 * timer, the getter's throw in the uncaughtException listener ended the process with exit 7,
 * every claim of the run left behind.
 */
const made = new WeakMap<ModuleExit, { message: string; itemId: string | undefined }>();

/** A ModuleExit's message and item as made (a look-alike's: the call's words, no item). */
export const exitSaid = (err: ModuleExit): { message: string; itemId: string | undefined } => made.get(err) ?? { message: 'handler code called process.exit', itemId: undefined };

/**
 * What `fatal` aborts with: what broke the process, and the item whose attempt's code did it
 * (`itemId`: the async context of the callback that threw, or of the process.exit call), or
 * undefined when no attempt's code made it (module top-level code, a client made at import).
 */
export class ProcessBroken extends Error {
  constructor(
    message: string,
    readonly itemId: string | undefined,
  ) {
    super(message);
  }
}

/** The item whose module attempt the code running now belongs to (runInAttempt). */
const attemptOf = new AsyncLocalStorage<string>();

/** Run a module handler's call for `itemId`: what its code makes (timers, promises, callbacks) is told as that item's. */
export function runInAttempt<A extends unknown[], R>(itemId: string, call: (...args: A) => R, ...args: A): R {
  return attemptOf.run(itemId, call, ...args);
}

/** One exit call, waiting for one of the attempts in flight at the time to receive it. */
interface ExitCall {
  err: ModuleExit;
  waiting: Set<number>;
}

export interface ExitGuard {
  /** Aborted (reason: an Error saying what happened) when handler code broke the process. */
  readonly fatal: AbortSignal;
  /** An attempt starts; pass the token to end(). */
  begin(): number;
  /** The attempt settled; `rejection` is what its function rejected with, if anything. */
  end(token: number, rejection?: unknown): void;
  /** Uninstall (idempotent); process.exit and the listeners are restored with the last guard. */
  release(): void;
}

const guards = new Set<Guard>();
let realExit: typeof process.exit | undefined;

/**
 * What handler code writes to the process's stdout or stderr (console.log, console.error),
 * with the secrets each loaded handler's Redact knows as `***`: it is what the handler
 * prints, as a command handler's captured output is. Set on globalThis under REDACT_PRINTED
 * while a guard is held, for cli.ts's writes to stdout and stderr.
 */
function redactPrinted(text: string): string {
  for (const g of guards) text = g.redact(text);
  return text;
}
const REDACT_PRINTED = Symbol.for('cronsafe.redactPrinted');
const globals = globalThis as Record<symbol, unknown>;

/**
 * The guards told of a call: a loaded handler's. A daemon's guard for the time between its
 * passes (`between`) only while no handler is loaded: during a pass the pass's guard decides.
 */
function hearing(): Guard[] {
  const loaded = [...guards].filter((g) => !g.between);
  return loaded.length > 0 ? loaded : [...guards];
}

/**
 * The process events whose listeners cronsafe had when the first guard was taken, kept while
 * one is held: handler code (a module, or a library it imports) that removed them
 * (`process.removeAllListeners('SIGTERM')`, a shutdown helper's `process.off`) gave SIGTERM
 * its default action back, and the next stop killed the run at once (exit 143, no drain, the
 * attempts running left claimed and charged by the next run); without the guard's own
 * `unhandledRejection` listener a rejection crashed it the same way. One so removed is put
 * back at once, in the same call (Node starts the signal's watcher again with it). Not the
 * crash signals (SIGQUIT, SIGUSR2): cli.ts removes its own listener there to die of them.
 */
const KEPT_EVENTS = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGALRM', 'SIGUSR1', 'unhandledRejection', 'uncaughtException'] as const;
let kept: Map<string | symbol, unknown[]> | undefined;

function putBack(event: string | symbol, listener: unknown): void {
  const ours = kept?.get(event);
  if (ours === undefined || !ours.includes(listener)) return;
  const signal = event as NodeJS.Signals; // or one of the two exception events: process.on takes any
  const own = listener as NodeJS.SignalsListener;
  if (!process.listeners(signal).includes(own)) process.on(signal, own);
}

function interceptedExit(code?: unknown): never {
  const err = new ModuleExit(code);
  for (const g of hearing()) g.exitCalled(err);
  throw err;
}

/**
 * Whether an attempt's `rejection` is the `exit` call's throw, or carries it as its cause
 * (`throw new Error('convert failed', { cause: err })`, a few levels deep) or among an
 * AggregateError's errors. A handler that wraps what it catches (around a library written as
 * a CLI, which calls process.exit on bad input) failed with the call all the same: taken for
 * a swallowed call, it also stopped the run, exit 1, on every run until the item was dead.
 */
function carries(rejection: unknown, exit: ModuleExit, depth = 0, seen = new Set<object>()): boolean {
  if (rejection === exit) return true;
  if (depth >= 8 || typeof rejection !== 'object' || rejection === null) return false;
  // Each error looked into once, and at most MAX_LOOKED_INTO of them: an AggregateError among
  // its own errors (or errors shared down a few levels) was looked into 16^8 times, the
  // process frozen for minutes (no lease renewed, no signal heard) before the run went on.
  if (seen.has(rejection) || seen.size >= MAX_LOOKED_INTO) return false;
  seen.add(rejection);
  try {
    const { cause, errors } = rejection as { cause?: unknown; errors?: unknown };
    return carries(cause, exit, depth + 1, seen) || (Array.isArray(errors) && errors.slice(0, 16).some((e) => carries(e, exit, depth + 1, seen)));
  } catch {
    return false; // a getter that throws, a revoked Proxy: not looked into
  }
}

/** The most errors carries() looks into for one attempt's rejection. */
const MAX_LOOKED_INTO = 256;

/** What is said of an unhandled rejection and an uncaught exception, with `redact`'s secrets hidden. */
const rejectionWhy = (reason: unknown, redact: Redact): string => `handler code left a promise rejection unhandled: ${describeThrown(reason, redact)}`;
const exceptionWhy = (err: unknown, redact: Redact): string => `uncaught exception: ${describeThrown(err, redact)}`;

// Each guard describes what was thrown with its handler's Redact: the run logs and prints it.
function onRejection(reason: unknown): void {
  const itemId = attemptOf.getStore();
  for (const g of hearing()) g.stop(new Error(rejectionWhy(reason, g.redact)), itemId);
}

function onException(err: unknown): void {
  const exit = isModuleExit(err) ? exitSaid(err) : undefined;
  for (const g of hearing()) {
    const why = exit ? `${exit.message} outside an attempt (from a timer or callback)` : exceptionWhy(err, g.redact);
    g.stop(new Error(why), exit ? exit.itemId : attemptOf.getStore());
  }
}

/**
 * `value instanceof ModuleExit`, false for what instanceof cannot look at (a revoked Proxy,
 * one whose getPrototypeOf throws): asked in the uncaughtException listener, where a throw
 * ends the process at once (exit 7), every claim of the run left behind.
 */
export function isModuleExit(value: unknown): value is ModuleExit {
  try {
    return value instanceof ModuleExit;
  } catch {
    return false;
  }
}

class Guard implements ExitGuard {
  constructor(
    readonly redact: Redact,
    readonly between = false,
  ) {}
  readonly #fatal = new AbortController();
  readonly fatal = this.#fatal.signal;
  readonly #inFlight = new Set<number>();
  #calls: ExitCall[] = [];
  /** The last attempt's token: a count, so that no Symbol is made per attempt. */
  #tokens = 0;

  begin(): number {
    const token = ++this.#tokens;
    this.#inFlight.add(token);
    return token;
  }

  end(token: number, rejection?: unknown): void {
    this.#inFlight.delete(token);
    if (this.#calls.length === 0) return;
    // The calls made so far: looking into the rejection reads its getters (`cause`, `errors`),
    // and one that calls process.exit adds a call meanwhile. Added to the list being walked,
    // each such call was looked into in turn, and made another: the process spun there for
    // good, its memory growing. Such a call waits for the attempts still running, as any.
    const calls = this.#calls;
    this.#calls = [];
    const left: ExitCall[] = [];
    let stray: ExitCall | undefined;
    for (const c of calls) {
      if (carries(rejection, c.err)) continue; // received by the attempt that made it
      c.waiting.delete(token);
      if (c.waiting.size > 0) left.push(c);
      else stray ??= c;
    }
    this.#calls = [...left, ...this.#calls];
    if (stray === undefined) return;
    const said = exitSaid(stray.err);
    this.stop(new Error(`${said.message} and no attempt failed with it (the call was caught, or came from a timer)`), said.itemId);
  }

  exitCalled(err: ModuleExit): void {
    if (this.#inFlight.size === 0) this.stop(new Error(`${err.message} while no attempt was running`), err.itemId);
    else this.#calls.push({ err, waiting: new Set(this.#inFlight) });
  }

  /** `itemId`: the item whose attempt's code did it, if known (ProcessBroken). */
  stop(reason: Error, itemId?: string): void {
    if (!this.#fatal.signal.aborted) this.#fatal.abort(new ProcessBroken(reason.message, itemId));
  }

  release(): void {
    if (!guards.delete(this) || guards.size > 0) return;
    if (realExit) process.exit = realExit;
    realExit = undefined;
    process.off('removeListener', putBack);
    kept = undefined;
    process.off('unhandledRejection', onRejection);
    process.off('uncaughtException', onException);
    if (globals[REDACT_PRINTED] === redactPrinted) delete globals[REDACT_PRINTED];
    hearLate(this.redact);
  }
}

/**
 * Set on globalThis by cli.ts: how the process ends when handler code breaks it once its
 * guards are released (a timer or callback an attempt left, firing after the run ended and
 * before the process exits). Unheard, Node printed the thrown value raw with its stack, a
 * ledger password in it unredacted, and exited 1 after a run that said it ended with 0.
 */
const LATE_BREAK = Symbol.for('cronsafe.lateBreak');
let lateRedact: Redact = noRedact;

// What these say is one line on stderr, as `run failed:` is: its controls as JSON escapes
// (escapeControls). Raw, a message's newline broke the one line in two, and its ESC or
// U+009B drove the terminal of whoever ran cronsafe or read `kubectl logs`.
function onLateRejection(reason: unknown): void {
  (globals[LATE_BREAK] as (why: string) => void)(escapeControls(rejectionWhy(reason, lateRedact)));
}

function onLateException(err: unknown): void {
  (globals[LATE_BREAK] as (why: string) => void)(escapeControls(exceptionWhy(err, lateRedact)));
}

/**
 * Set on globalThis once a module handler is loaded, for cli.ts's exit: what an 'exit' listener
 * that handler code added threw as the process exited, with the secrets of the handlers
 * loaded (or last let go) hidden, on one line (its controls escaped, as above).
 */
const EXIT_LISTENER_THREW = Symbol.for('cronsafe.exitListenerThrew');
const exitListenerThrew = (err: unknown): string => escapeControls(`an 'exit' listener threw: ${describeThrown(err, (text) => lateRedact(redactPrinted(text)))}`);

/** Once the last guard is released, in the CLI only: what handler code throws then is told with `redact` (LATE_BREAK). */
function hearLate(redact: Redact): void {
  if (typeof globals[LATE_BREAK] !== 'function') return;
  lateRedact = redact;
  if (process.listeners('uncaughtException').includes(onLateException)) return;
  process.on('unhandledRejection', onLateRejection);
  process.on('uncaughtException', onLateException);
}

function unhearLate(): void {
  process.off('unhandledRejection', onLateRejection);
  process.off('uncaughtException', onLateException);
}

/**
 * Install the guard (process-wide, shared by every loaded module handler); `redact` hides
 * secrets in what it says handler code threw. `between`: `cronsafe daemon`'s, held for its
 * whole life: a module handler's code outlives the pass that loaded it (a timer, a pool's
 * event), and between passes, with no guard, its stray `process.exit(0)` ended the daemon
 * with exit 0 and not a word, and an unhandled rejection with Node's raw stack. It hears
 * only what comes while no handler is loaded (no attempt runs then: `fatal` aborts at once).
 */
export function acquireExitGuard(redact: Redact = noRedact, between = false): ExitGuard {
  const g = new Guard(redact, between);
  if (guards.size === 0) {
    unhearLate();
    // eslint-disable-next-line @typescript-eslint/unbound-method -- Node's exit reads the global process, not `this`
    realExit = process.exit;
    process.exit = interceptedExit;
    process.on('unhandledRejection', onRejection);
    process.on('uncaughtException', onException);
    kept = new Map(KEPT_EVENTS.map((event) => [event, process.listeners(event as NodeJS.Signals)]));
    process.on('removeListener', putBack);
    globals[REDACT_PRINTED] = redactPrinted;
    globals[EXIT_LISTENER_THREW] = exitListenerThrew;
  }
  guards.add(g);
  return g;
}

/**
 * An Error's message; an empty one is filled in from what else it carries: a system
 * error's `code` (ECONNRESET), an AggregateError's inner errors (Node's dual-stack connect
 * failures look like this), its `cause`. Else its name.
 */
function describeError(err: Error, depth = 0): string {
  const message = textOf(err.message);
  const name = textOf(err.name);
  const code = (err as { code?: unknown }).code;
  const codeText = (typeof code === 'string' || typeof code === 'number') && !message.includes(String(code)) ? String(code) : undefined;
  let inner: string | undefined;
  if (depth < 2 && err instanceof AggregateError && Array.isArray(err.errors) && err.errors.length > 0) {
    const shown = err.errors.slice(0, 5).map((e: unknown) => (e instanceof Error ? describeError(e, depth + 1) : describeThrown(e)));
    inner = `${shown.join('; ')}${err.errors.length > 5 ? `; and ${err.errors.length - 5} more` : ''}`;
  }
  if (message) return `${message}${codeText ? ` (${codeText})` : ''}${inner ? `: ${inner}` : ''}`;
  const cause = depth < 2 && err.cause !== undefined ? (err.cause instanceof Error ? describeError(err.cause, depth + 1) : describeThrown(err.cause)) : undefined;
  const what = [codeText, inner, cause === undefined ? undefined : `caused by ${cause}`].filter((w): w is string => w !== undefined);
  return what.length > 0 ? `${name}: ${what.join(': ')}` : name || 'an Error without a message';
}

/**
 * An Error's message or name as text. Handler code may set either to anything
 * (`Object.assign(new Error(), { message: 404, code: 'E_HTTP' })`): read as a string, such an
 * error failed its item with cronsafe's own TypeError (`err.message.includes is not a function`).
 */
function textOf(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined || value === null) return '';
  try {
    // eslint-disable-next-line @typescript-eslint/no-base-to-string -- what a template would show; a symbol as Symbol(x)
    return typeof value === 'symbol' ? value.toString() : String(value);
  } catch {
    return `a ${typeof value}`;
  }
}

/**
 * The most of a thrown message kept (bytes of UTF-8) is a command handler's stderr tail
 * (TAIL_BYTES): it becomes the item's `lastError` row and log line on every attempt, and a
 * message that quotes a whole input would otherwise put megabytes into each.
 */
const MAX_MESSAGE_BYTES = TAIL_BYTES;

/**
 * A useful message for anything a handler may throw: an Error's message (else its name),
 * a string as is, and other values as String(value) or, failing that, their type. The head
 * of it, at most MAX_MESSAGE_BYTES (messages say what went wrong first), with the secrets
 * `redact` knows hidden before the cut: hidden after it, a password the cut fell in kept its first part.
 */
export function describeThrown(value: unknown, redact: Redact = noRedact): string {
  const text = redact(describeSafely(value, redact));
  if (text.length <= MAX_MESSAGE_BYTES / 4) return text; // 4 bytes per character at most
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= MAX_MESSAGE_BYTES) return text;
  let end = MAX_MESSAGE_BYTES - 32; // room for the note
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--; // never inside a character
  return `${bytes.subarray(0, end).toString('utf8')}… (${bytes.length - end} more bytes)`;
}

/**
 * describeValue, or what reading the value threw when that throws (a getter on its `message`,
 * `name` or `cause` that throws, a revoked Proxy). Never throws: told in the
 * uncaughtException listener, such a value thrown from a timer ended the process there with
 * Node's exit 7 and its raw stack, every claim of the run left behind; in an attempt, what the
 * getter threw became the item's error whole, neither cut nor redacted.
 */
function describeSafely(value: unknown, redact: Redact): string {
  try {
    return describeValue(value, redact);
  } catch (err) {
    let why: string;
    try {
      why = describeValue(err, redact);
    } catch {
      why = 'that threw too';
    }
    return `threw a value that cannot be described (reading it threw: ${why})`;
  }
}

function describeValue(value: unknown, redact: Redact): string {
  if (value instanceof Error) return describeError(value);
  if (typeof value === 'string') return value === '' ? 'an empty string' : value;
  if (value === undefined || value === null) return `threw ${String(value)}`;
  if (typeof value === 'symbol') return `threw ${value.toString()}`;
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- a number, bigint or boolean here
  if (typeof value !== 'object' && typeof value !== 'function') return `threw ${String(value)} (a ${typeof value})`;
  const message = (value as { message?: unknown }).message;
  if (typeof message === 'string' && message !== '') return message;
  try {
    const json = JSON.stringify(value);
    // Secrets hidden before the cut, as in describeThrown.
    const shown = json === undefined ? json : redact(json);
    if (shown !== undefined && shown !== '{}') return `threw ${shown.length > 500 ? `${shown.slice(0, 499)}…` : shown}`;
  } catch {
    /* cyclic, or a BigInt inside: fall back to the type */
  }
  const ctor = (value as { constructor?: { name?: unknown } }).constructor?.name;
  return `threw ${typeof value === 'function' ? 'a function' : `an object (${typeof ctor === 'string' && ctor ? ctor : 'Object'})`}`;
}
