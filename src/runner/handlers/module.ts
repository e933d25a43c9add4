import { setTimeout as delay } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import type { HandlerConfig } from '../../config/types.js';
import { ConfigError, coerceError } from '../../errors.js';
import { HandlerFailure, type Handler, type HandlerContext, type WorkItem } from '../types.js';
import { killBudgetMs } from '../drain.js';

/** The shape `handler.module`'s default export must have. */
export type ModuleHandlerFn = (item: WorkItem, ctx: HandlerContext) => unknown;

/**
 * Import `handler.module` and wrap its default export as a Handler. Each attempt gets
 * its own AbortSignal (the run's signal combined with the timeout). In-process code
 * cannot be killed, so after a timeout or abort the function gets killAfterSeconds to
 * notice its signal, then the attempt fails whether or not it stopped.
 * Throws a ConfigError (exit 78) when the module cannot be imported or exports no function.
 */
export async function createModuleHandler(cfg: HandlerConfig, _opts: { sourceDir: string }): Promise<Handler> {
  const file = cfg.module;
  if (!file) throw new ConfigError('handler.module must be a path', undefined, 'handler.module');
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (err) {
    throw new ConfigError(`handler.module ${file}: cannot import: ${coerceError(err).message}`, undefined, 'handler.module');
  }
  const fn = mod.default;
  if (typeof fn !== 'function') {
    throw new ConfigError(
      `handler.module ${file}: default export must be a function (item, ctx) => Promise<void>, found ${describe(fn)}`,
      undefined,
      'handler.module',
    );
  }
  return { run: (item, ctx) => runAttempt(fn as ModuleHandlerFn, cfg, item, ctx) };
}

async function runAttempt(fn: ModuleHandlerFn, cfg: HandlerConfig, item: WorkItem, ctx: HandlerContext): Promise<void> {
  if (ctx.signal.aborted) throw interrupted(ctx.signal.reason);
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
      await Promise.race([work, delay(graceMs, undefined, { signal: grace.signal }).catch(() => {})]);
      grace.abort();
      if (first === 'abort') throw interrupted(ctx.signal.reason);
      throw new HandlerFailure(`timed out after ${cfg.timeoutSeconds}s`);
    }
    if (first.ok) return;
    if (ctx.signal.aborted) throw interrupted(ctx.signal.reason);
    throw new HandlerFailure(messageOf(first.err));
  } finally {
    clearTimeout(timer);
    if (onAbort) ctx.signal.removeEventListener('abort', onAbort);
  }
}

function interrupted(reason: unknown): HandlerFailure {
  const text = reason instanceof Error ? reason.message : String(reason ?? 'aborted');
  return new HandlerFailure(`interrupted: ${text}`, true);
}

function messageOf(err: unknown): string {
  const e = coerceError(err);
  return e.message || e.name || 'handler failed without a message';
}

function describe(value: unknown): string {
  if (value === undefined) return 'no default export';
  if (value === null) return 'null';
  if (typeof value === 'object') return `an object (${(value as object).constructor?.name ?? 'Object'})`;
  return `a ${typeof value} (${String(value).slice(0, 40)})`;
}
