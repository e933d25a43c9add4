import { setTimeout as delay } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import type { HandlerConfig } from '../../config/types.js';
import { ConfigError } from '../../errors.js';
import { HandlerFailure, type Handler, type HandlerContext, type WorkItem } from '../types.js';
import { killBudgetMs } from '../drain.js';
import { acquireExitGuard, describeThrown, ModuleExit, type ExitGuard } from './exit-guard.js';

/** The shape `handler.module`'s default export must have. */
export type ModuleHandlerFn = (item: WorkItem, ctx: HandlerContext) => unknown;

/**
 * Import `handler.module` and wrap its default export as a Handler. Each attempt gets
 * its own AbortSignal (the run's signal combined with the timeout). In-process code
 * cannot be killed, so after a timeout or abort the function gets killAfterSeconds to
 * notice its signal, then the attempt fails whether or not it stopped.
 * While the handler is loaded (from import to close()), process.exit, unhandled rejections
 * and uncaught exceptions are guarded (exit-guard.ts): `fatal` aborts when handler code
 * broke the process in a way no single item can be charged for.
 * Throws a ConfigError (exit 78) when the module cannot be imported or exports no function.
 */
export async function createModuleHandler(cfg: HandlerConfig, _opts: { sourceDir: string }): Promise<Handler> {
  const file = cfg.module;
  if (!file) throw new ConfigError('handler.module must be a path', undefined, 'handler.module');
  // Before the import: top-level code that calls process.exit fails the import instead.
  const guard = acquireExitGuard();
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (err) {
    guard.release();
    throw new ConfigError(`handler.module ${file}: cannot import: ${describeThrown(err)}`, undefined, 'handler.module');
  }
  const fn = mod.default;
  if (typeof fn !== 'function') {
    guard.release();
    throw new ConfigError(
      `handler.module ${file}: default export must be a function (item, ctx) => Promise<void>, found ${describe(fn)}`,
      undefined,
      'handler.module',
    );
  }
  return {
    run: (item, ctx) => runAttempt(fn as ModuleHandlerFn, cfg, item, ctx, guard),
    fatal: guard.fatal,
    close: async () => guard.release(),
  };
}

async function runAttempt(fn: ModuleHandlerFn, cfg: HandlerConfig, item: WorkItem, ctx: HandlerContext, guard: ExitGuard): Promise<void> {
  if (ctx.signal.aborted) throw interrupted(ctx.signal.reason);
  const token = guard.begin();
  let rejection: unknown;
  // One controller per attempt, fed by the run's signal and the timeout. Not
  // AbortSignal.any: on Node 20 it costs ~3 KB and two signals per call and its composite
  // signals outlive the attempt, which showed up as heap growth over a million items.
  const attempt = new AbortController();

  // Settles as {ok} / {err}, never rejects: we may stop listening to it, and a late
  // rejection must not become an unhandledRejection that crashes the run.
  const work = (async () => fn(item, { ...ctx, signal: attempt.signal }))().then(
    () => ({ ok: true as const }),
    (err: unknown) => ({ ok: false as const, err }),
  );

  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const stopped = new Promise<'timeout' | 'abort'>((resolve) => {
    timer = setTimeout(() => {
      attempt.abort(new Error(`timed out after ${cfg.timeoutSeconds}s`));
      resolve('timeout');
    }, cfg.timeoutSeconds * 1000);
    onAbort = () => {
      attempt.abort(ctx.signal.reason);
      resolve('abort');
    };
    ctx.signal.addEventListener('abort', onAbort, { once: true });
  });

  try {
    const first = await Promise.race([work, stopped]);
    if (first === 'timeout' || first === 'abort') {
      // Grace for a cooperative function to stop writing before the runner discards its output.
      const grace = new AbortController();
      const graceMs = first === 'abort' ? killBudgetMs(ctx.signal.reason, cfg.killAfterSeconds * 1000) : cfg.killAfterSeconds * 1000;
      const late = await Promise.race([work, delay(graceMs, undefined, { signal: grace.signal }).catch(() => undefined)]);
      grace.abort();
      if (late && !late.ok) rejection = late.err;
      if (first === 'abort') throw interrupted(ctx.signal.reason);
      throw new HandlerFailure(`timed out after ${cfg.timeoutSeconds}s`);
    }
    if (first.ok) return;
    rejection = first.err;
    if (first.err instanceof ModuleExit) {
      throw new HandlerFailure(`${first.err.message}: a module handler fails an item by throwing; cronsafe does not exit`);
    }
    if (ctx.signal.aborted) throw interrupted(ctx.signal.reason);
    throw new HandlerFailure(describeThrown(first.err));
  } finally {
    clearTimeout(timer);
    if (onAbort) ctx.signal.removeEventListener('abort', onAbort);
    guard.end(token, rejection);
  }
}

function interrupted(reason: unknown): HandlerFailure {
  const text = reason instanceof Error ? reason.message : String(reason ?? 'aborted');
  return new HandlerFailure(`interrupted: ${text}`, true);
}

function describe(value: unknown): string {
  if (value === undefined) return 'no default export';
  if (value === null) return 'null';
  if (typeof value === 'object') return `an object (${(value as object).constructor?.name ?? 'Object'})`;
  return `a ${typeof value} (${String(value).slice(0, 40)})`;
}
