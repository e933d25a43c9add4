import type { HandlerConfig } from '../../config/types.js';
import { ConfigError } from '../../errors.js';
import type { Handler, HandlerOptions } from '../types.js';
import { createExecHandler } from './exec.js';
import { startHelpers } from './spawn-server.js';
import { createModuleHandler } from './module.js';

export { createExecHandler, expandArg } from './exec.js';
export { createModuleHandler } from './module.js';

/**
 * Build the configured handler: `handler.command` (a child process per attempt) or
 * `handler.module` (an imported function). Exactly one must be set; the config loader
 * checks that too, this is the last line of defence for programmatic callers.
 */
export async function createHandler(cfg: HandlerConfig, opts: HandlerOptions): Promise<Handler> {
  if (cfg.command && cfg.module) {
    throw new ConfigError('handler: set exactly one of handler.command and handler.module, not both', undefined, 'handler');
  }
  if (cfg.command) {
    const handler = createExecHandler(cfg, opts);
    await startHelpers();
    return handler;
  }
  if (cfg.module) return createModuleHandler(cfg, opts);
  throw new ConfigError('handler: one of handler.command or handler.module is required', undefined, 'handler');
}
