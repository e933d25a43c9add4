import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { inspect } from 'node:util';
import type { HandlerConfig } from '../../config/types.js';
import { ConfigError, coerceError } from '../../errors.js';
import { pino, type Logger } from 'pino';
import { noRedact, type Redact } from '../../redact.js';
import { HandlerFailure, interrupted, TimedOut, type Handler, type HandlerContext, type HandlerOptions, type WorkItem } from '../types.js';
import { killBudgetMs } from '../drain.js';
import { AttemptSignal } from '../attempt-signal.js';
import { acquireExitGuard, describeThrown, exitSaid, isModuleExit, runInAttempt, type ExitGuard } from './exit-guard.js';
import { itemLink } from './item-link.js';
import { isPlainId } from '../item-id.js';

/** The shape `handler.module`'s default export must have. */
export type ModuleHandlerFn = (item: WorkItem, ctx: HandlerContext) => unknown;

/**
 * Import `handler.module` and wrap its default export as a Handler. Each attempt gets
 * its own AbortSignal (the run's abort combined with the timeout; made only if read). In-process code
 * cannot be killed, so after a timeout or abort the function gets killAfterSeconds to
 * notice its signal, then the attempt fails whether or not it stopped.
 * While the handler is loaded (from import to close()), process.exit, unhandled rejections
 * and uncaught exceptions are guarded (exit-guard.ts): `fatal` aborts when handler code
 * broke the process in a way no single item can be charged for.
 * Throws a ConfigError (exit 78) when the module cannot be imported or exports no function.
 */
export async function createModuleHandler(cfg: HandlerConfig, opts: HandlerOptions): Promise<Handler> {
  const file = cfg.module;
  if (!file) throw new ConfigError('handler.module must be a path', undefined, 'handler.module');
  // Before the import: top-level code that calls process.exit fails the import instead.
  const redact = opts.redact ?? noRedact;
  const guard = acquireExitGuard(redact);
  let mod: Record<string, unknown>;
  try {
    mod = (await untilSettled(import(pathToFileURL(file).href), importBoundSeconds(cfg))) as Record<string, unknown>;
  } catch (err) {
    guard.release();
    throw new ConfigError(`${file}: cannot import: ${describeThrown(err, redact)}${syntaxErrorLine(file, err)}`, undefined, 'handler.module');
  }
  const fn = defaultExport(mod);
  if (typeof fn !== 'function' || notCallable(fn as ModuleHandlerFn) !== undefined) {
    guard.release();
    throw new ConfigError(
      `${file}: default export must be a function (item, ctx) => Promise<void>, found ${describe(fn)}`,
      undefined,
      'handler.module',
    );
  }
  // A promise its top-level code rejected and left (`Promise.reject(...)`, a client's failed
  // connect not awaited) is told after the import settles, once the microtasks have run: it
  // broke the import as a throw does, on every run. Waited for here, it is the config error
  // a throw is (78), not a run failed (1) or, for validate (whose guard was already gone),
  // Node's own crash with its stack.
  await new Promise<void>((resolve) => setImmediate(resolve));
  if (guard.fatal.aborted) {
    guard.release();
    throw new ConfigError(`${file}: cannot import: its top-level code ${coerceError(guard.fatal.reason).message.replace(/^handler code /, '')}`, undefined, 'handler.module');
  }
  const plain = fn as ModuleHandlerFn;
  // After a run broken by handler code: each call in an async context naming its item.
  const call: ModuleHandlerFn = opts.traceBreaks ? (item, ctx) => runInAttempt(item.id, plain, item, ctx) : plain;
  return {
    // An escaped id's text path may name no file (bytes that are not UTF-8): the function
    // gets a link to the real file instead, as a command handler's {path} is.
    run: (item, ctx) => (isPlainId(item.id) ? runAttempt(call, cfg, item, ctx, guard, redact) : runLinked(call, cfg, item, ctx, guard, opts.sourceDir, redact)),
    fatal: guard.fatal,
    close: async () => guard.release(),
  };
}

/**
 * Where in `file` a SyntaxError of its import is (` (line N)`), or ''. Node's error for an ES
 * module's bad syntax carries no place (its stack is Node's loader), so a 500-line handler
 * was refused with `Unexpected token '}'` alone. `node --check` reads the file as the import
 * did and says `FILE:LINE`; asked only when the import failed so (a failure in a module it
 * imports is not the file's: its check passes, and nothing is added).
 */
function syntaxErrorLine(file: string, err: unknown): string {
  if (!(err instanceof SyntaxError)) return '';
  // Only here: node:child_process costs ~5 ms to load, and validate imports this module.
  const { spawnSync } = createRequire(import.meta.url)('node:child_process') as typeof import('node:child_process');
  const check = spawnSync(process.execPath, ['--check', file], { encoding: 'utf8', timeout: 10_000, env: { ...process.env, NODE_OPTIONS: '' }, stdio: ['ignore', 'ignore', 'pipe'] });
  const first = check.status === 0 ? undefined : check.stderr?.split('\n', 1)[0];
  const line = first?.startsWith(`${file}:`) ? /^\d+$/.exec(first.slice(file.length + 1))?.[0] : undefined;
  return line === undefined ? '' : ` (line ${line})`;
}

/**
 * What to add to the message of a handler's own spawn refused with EAGAIN: its failure, and
 * charged, as any it throws, but "spawn sh EAGAIN" alone, the item's last error, did not say
 * that a process limit is why (a dead-lettered backlog then looked like bad items).
 */
function forkRefused(err: unknown): string {
  try {
    if (typeof err !== 'object' || err === null) return '';
    const { code, syscall } = err as NodeJS.ErrnoException;
    return code === 'EAGAIN' && typeof syscall === 'string' && syscall.startsWith('spawn') ? ' (its fork was refused: the process limit, pids.max of the pod / ulimit -u, is reached)' : '';
  } catch {
    return ''; // a getter that throws, a revoked Proxy: describeThrown has told what it could
  }
}

/** The least time a module's top-level code is given, whatever handler.timeoutSeconds (a per-item bound) says. */
const IMPORT_FLOOR_SECONDS = 60;

/**
 * How long the import of `handler.module` may take: handler.timeoutSeconds, the bound on
 * handler code, but at least a minute, as its top-level code runs once per run (a model
 * loaded, a pool connected) where an item's attempt may be bounded at seconds.
 */
const importBoundSeconds = (cfg: HandlerConfig): number => Math.max(cfg.timeoutSeconds, IMPORT_FLOOR_SECONDS);

/**
 * `loading`, or a rejection when the event loop empties first (the module's top-level
 * await waits on a promise nothing is left to settle: Node would end the process there
 * with exit 13 and no word, nor any exit code of ours) or when `seconds` pass first (it
 * waits on something still alive that never answers: a connect to a host that drops the
 * packets, an interval's promise never resolved). Without the bound, validate hung for
 * good and run until the pod's activeDeadlineSeconds; either is the config error it is.
 */
function untilSettled<T>(loading: Promise<T>, seconds: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const never = () => reject(new Error('its top-level await never settles (it waits on a promise that nothing is left to resolve)'));
    // unref: a module that keeps nothing alive is told by beforeExit, at once.
    const timer = setTimeout(
      () => reject(new Error(`its top-level code did not finish within ${seconds} s (handler.timeoutSeconds, at least ${IMPORT_FLOOR_SECONDS} s): a top-level await still waits (on a connection that never answers?)`)),
      seconds * 1000,
    ).unref();
    process.once('beforeExit', never);
    loading.then(resolve, reject).finally(() => {
      clearTimeout(timer);
      process.off('beforeExit', never);
    });
  });
}

/** runAttempt with item.path a link to the real file (itemLink), removed after the attempt. */
async function runLinked(fn: ModuleHandlerFn, cfg: HandlerConfig, item: WorkItem, ctx: HandlerContext, guard: ExitGuard, sourceDir: string, redact: Redact): Promise<void> {
  const link = await itemLink(sourceDir, item.id, ctx.outputPath);
  try {
    await runAttempt(fn, cfg, { id: item.id, path: link.path, rawPath: item.rawPath, attempt: item.attempt }, ctx, guard, redact);
  } finally {
    await link.remove();
  }
}

type Ending = { kind: 'ok' } | { kind: 'err'; err: unknown } | { kind: 'timeout' } | { kind: 'abort'; reason: unknown };
const OK: Ending = { kind: 'ok' };

/**
 * One attempt of an in-process handler. The hot path is a no-op handler over a big
 * backlog, so nothing is made per attempt that the attempt does not need: the function's
 * AbortSignal exists only if it reads `ctx.signal` (AttemptSignal), the run's abort is
 * heard through ctx.onAbort (no signal made for it), one promise waits for whichever comes
 * first (the function, its timeout, the run's abort), and a synchronous function costs
 * no promise at all.
 */
async function runAttempt(fn: ModuleHandlerFn, cfg: HandlerConfig, item: WorkItem, ctx: HandlerContext, guard: ExitGuard, redact: Redact): Promise<void> {
  const token = guard.begin();
  let rejection: unknown;
  const own = new AttemptSignal();
  const fnCtx = new ModuleContext(ctx, own, redact);
  let settle: ((e: Ending) => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  let offAbort: (() => void) | undefined;
  /** Set while a timed-out attempt has its grace: the run's abort (a drain) shortens it. */
  let hurry: ((reason: unknown) => void) | undefined;
  try {
    let result: unknown;
    let early: Ending | undefined;
    offAbort = listenAbort(ctx, (reason) => {
      own.abort(reason);
      const e: Ending = { kind: 'abort', reason };
      if (settle) settle(e);
      else early ??= e;
      hurry?.(reason);
    });
    if (early) throw interrupted((early as { reason: unknown }).reason);
    try {
      result = fn(item, fnCtx);
      // Asked here: a returned value whose `then` getter throws fails the attempt as a throw
      // does. Asked outside, what the getter threw left runAttempt raw, and one whose
      // toString throws too ended the runner's attempt in a rejection nobody heard: the run
      // failed and the item's claim was never handed back.
      if (!isThenable(result)) return; // synchronous success
    } catch (err) {
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- a handler may throw anything: describeThrown names it
      result = Promise.reject(err);
    }
    const work = Promise.resolve(result);
    // Most attempts over small items have settled already (no I/O left to wait for): one
    // microtask tells, and they cost no timeout timer and no race.
    let quick: Ending | undefined;
    work.then(
      () => (quick = OK),
      (err: unknown) => (quick = { kind: 'err', err }),
    );
    await Promise.resolve();
    const ending = (early as Ending | undefined) ?? quick ?? (await new Promise<Ending>((resolve) => {
      settle = resolve;
      if (early) resolve(early);
      work.then(
        () => resolve({ kind: 'ok' }),
        (err: unknown) => resolve({ kind: 'err', err }),
      );
      timer = setTimeout(() => {
        own.abort(new Error(`timed out after ${cfg.timeoutSeconds}s`));
        resolve({ kind: 'timeout' });
      }, cfg.timeoutSeconds * 1000);
    }));
    if (ending.kind === 'ok') return;
    if (ending.kind === 'err') {
      rejection = ending.err;
      if (isModuleExit(ending.err)) {
        throw new HandlerFailure(`${redact(exitSaid(ending.err).message)}: a module handler fails an item by throwing; cronsafe does not exit`);
      }
      if (own.aborted) throw interrupted(own.reason);
      // What it threw becomes the item's last error: a failed connect may quote cronsafe's own URL.
      throw new HandlerFailure(describeThrown(ending.err, redact) + forkRefused(ending.err));
    }
    // Timeout or abort: in-process code cannot be killed. Give a cooperative function its
    // grace to stop writing before the runner discards its output, then fail the attempt.
    clearTimeout(timer);
    const graceMs = ending.kind === 'abort' ? killBudgetMs(ending.reason, cfg.killAfterSeconds * 1000) : cfg.killAfterSeconds * 1000;
    let graceTimer: NodeJS.Timeout | undefined;
    const graceStart = performance.now();
    const late = await Promise.race([
      work.then(
        () => undefined,
        (err: unknown) => ({ err }),
      ),
      new Promise<undefined>((resolve) => {
        graceTimer = setTimeout(() => resolve(undefined), graceMs);
        // Timed out, then the drain aborts: its budget, not killAfterSeconds, is what is left,
        // as a command handler's SIGKILL is brought forward (exec.ts). Past it, the drain gave
        // up on the attempt and handed its claim back uncharged, though it had timed out.
        if (ending.kind === 'timeout') {
          hurry = (reason) => {
            hurry = undefined;
            const left = graceStart + graceMs - performance.now();
            const budget = killBudgetMs(reason, graceMs);
            if (budget >= left) return;
            clearTimeout(graceTimer);
            graceTimer = setTimeout(() => resolve(undefined), budget);
          };
        }
      }),
    ]);
    hurry = undefined;
    clearTimeout(graceTimer);
    if (late) rejection = late.err;
    if (ending.kind === 'abort') throw interrupted(ending.reason);
    throw new TimedOut(cfg.timeoutSeconds);
  } finally {
    clearTimeout(timer);
    offAbort?.();
    guard.end(token, rejection);
  }
}

/** ctx.onAbort when the runner offers it (no AbortSignal made), else a listener on ctx.signal. */
function listenAbort(ctx: HandlerContext, fn: (reason: unknown) => void): () => void {
  if (ctx.onAbort) return ctx.onAbort(fn);
  const signal = ctx.signal;
  if (signal.aborted) {
    fn(signal.reason);
    return () => undefined;
  }
  const on = () => fn(signal.reason);
  signal.addEventListener('abort', on, { once: true });
  return () => signal.removeEventListener('abort', on);
}

const isThenable = (v: unknown): v is PromiseLike<unknown> =>
  v !== null && (typeof v === 'object' || typeof v === 'function') && typeof (v as { then?: unknown }).then === 'function';

/** ModuleContext's state: a non-enumerable own property, so that the getters read it through a Proxy or Object.create(ctx) too. */
const STATE = Symbol('cronsafe.moduleContext');

/**
 * The context a module handler sees: the runner's, with the attempt's own (lazy) signal. Its
 * state is hidden (a non-enumerable symbol), so a handler logging or printing ctx
 * (`JSON.stringify(ctx)`, `console.log(ctx)`, `{...ctx}`) shows what it may use, never the
 * runner's claim (its owner token). Not in #private fields: a getter then failed ("Cannot
 * read private member") on anything but ctx itself, as a handler's `Object.create(ctx)` with
 * its own fields added, or a Proxy of it, and the attempt was charged.
 */
class ModuleContext implements HandlerContext {
  declare private readonly [STATE]: { outer: HandlerContext; own: AttemptSignal; redact: Redact; log?: Logger };
  constructor(outer: HandlerContext, own: AttemptSignal, redact: Redact) {
    Object.defineProperty(this, STATE, { value: { outer, own, redact } });
  }
  get signal(): AbortSignal {
    return this[STATE].own.signal;
  }
  /**
   * The attempt's logger, whose lines (message, fields, errors; its children's too) have the
   * known secrets replaced, as what a command handler prints has: it is the handler's text.
   */
  get log(): Logger {
    const s = this[STATE];
    if (s.redact === noRedact) return s.outer.log;
    return (s.log ??= redactingChild(s.outer.log, s.redact));
  }
  get outputPath(): string | undefined {
    return this[STATE].outer.outputPath;
  }
  get attempt(): number {
    return this[STATE].outer.attempt;
  }
  toJSON(): { attempt: number; outputPath?: string } {
    return { attempt: this.attempt, ...(this.outputPath !== undefined ? { outputPath: this.outputPath } : {}) };
  }
  [inspect.custom](): string {
    return `ModuleContext ${inspect(this.toJSON())}`;
  }
}

/**
 * A child of `log` whose every line is redacted once serialised (pino's streamWrite hook,
 * which its own children inherit), so no field or error escapes it.
 */
function redactingChild(log: Logger, redact: Redact): Logger {
  const child = log.child({});
  const hooks = (child as unknown as Record<symbol, Record<string, unknown> | undefined>)[pino.symbols.hooksSym];
  const outer = hooks?.streamWrite as ((s: string) => string) | undefined;
  Object.defineProperty(child, pino.symbols.hooksSym, {
    value: { ...hooks, streamWrite: (line: string) => redact(outer ? outer(line) : line) },
  });
  return child;
}

/**
 * The module's default export. A CommonJS module that says it was an ES module (`tsc` or
 * Babel output: `exports.__esModule = true; exports.default = fn`) has its `exports` as the
 * default when Node imports it: its own `default` is the one it means, as bundlers take it.
 */
function defaultExport(mod: Record<string, unknown>): unknown {
  const d = mod.default as { __esModule?: unknown; default?: unknown } | null | undefined;
  return typeof d === 'object' && d !== null && d.__esModule === true && typeof d.default === 'function' ? d.default : d;
}

/**
 * A function typeof cannot tell from a handler: calling a class throws (each item charged
 * until dead), and calling a generator function runs none of its body (each item recorded
 * done, its handler never run).
 */
function notCallable(fn: (...args: never[]) => unknown): string | undefined {
  const kind = fn.constructor?.name;
  if (kind === 'GeneratorFunction') return 'a generator function';
  if (kind === 'AsyncGeneratorFunction') return 'an async generator function';
  if (Function.prototype.toString.call(fn).startsWith('class')) return `a class (${fn.name || 'anonymous'})`;
  return undefined;
}

function describe(value: unknown): string {
  if (value === undefined) return 'no default export';
  if (typeof value === 'function') return notCallable(value as ModuleHandlerFn) ?? 'a function';
  if (value === null) return 'null';
  if (typeof value === 'object') {
    // A CommonJS module that sets exports.default but not exports.__esModule (hand-written,
    // or a compiler told not to) is imported as its exports object: said only "an object",
    // nothing pointed at the function right there in it.
    const inner: unknown = Reflect.get(value, 'default');
    const hint = typeof inner === 'function' ? ': its `default` is a function (a CommonJS module with exports.default but no exports.__esModule = true: set that, as tsc and Babel do, or assign module.exports = the function)' : '';
    return `an object (${value.constructor?.name ?? 'Object'})${hint}`;
  }
  // A primitive here (objects and null are named above, and describe() names what is not a function).
  // eslint-disable-next-line @typescript-eslint/no-base-to-string
  return `a ${typeof value} (${String(value).slice(0, 40)})`;
}
