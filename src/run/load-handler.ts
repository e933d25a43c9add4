import { statSync } from 'node:fs';
import type { Logger } from 'pino';
import { scriptProblem, whyProgramNotRun } from '../config/program.js';
import { configRedactor, holdsLedgerSecret } from '../config/secrets.js';
import type { Config } from '../config/types.js';
import { ConfigError, coerceError } from '../errors.js';
import { createModuleHandler } from '../runner/handlers/module.js';
import type { Handler } from '../runner/types.js';

/** `<file>: <key>: <problem>`, as every config error reads (the message names the module). */
function asConfigError(config: Config, err: unknown): ConfigError {
  const e = coerceError(err);
  const key = e instanceof ConfigError && e.key ? e.key : 'handler.module';
  return new ConfigError(`${config.configPath}: ${key}: ${e.message}`, config.configPath, key);
}

/**
 * handler.module's file (device, inode, size, mtime) when this process first imported it.
 * Node imports a module once per process: a daemon's later passes run that code, whatever
 * the file holds now. An edit (a fixed handler deployed) was not seen, and said nowhere.
 */
const imported = new Map<string, string | undefined>();

function moduleIdentity(file: string): string | undefined {
  try {
    const s = statSync(file);
    return `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}`;
  } catch {
    return undefined;
  }
}

/** The run's handler. A module that cannot be imported or exports no function: 78. */
export async function loadHandler(config: Config, log?: Logger, traceBreaks = false): Promise<Handler> {
  // As config loading checks it (check-paths.ts), again for each of a daemon's passes: it
  // loads the config once, and a script removed since would fail, and charge, every item.
  const script = config.handler.command && scriptProblem(config.handler.command, config.source.directory);
  if (script) throw asConfigError(config, new ConfigError(`cannot run the script: ${script}`, undefined, 'handler.command'));
  const file = config.handler.module;
  if (file !== undefined) {
    const now = moduleIdentity(file);
    if (!imported.has(file)) imported.set(file, now);
    else if (imported.get(file) !== now)
      log?.warn({ module: file }, 'handler.module has changed since this daemon imported it: its passes run the code imported then; restart the daemon to run the new code');
  }
  // The command handler's modules (node:child_process, node:crypto, the spawn helper) only
  // for a run: `cronsafe validate` checks a module handler through this module too.
  const { createHandler } = await import('../runner/handlers/index.js');
  return createHandler(config.handler, { sourceDir: config.source.directory, redact: configRedactor(config), holdsLedgerSecret: holdsLedgerSecret(config), whyNotRun: whyProgramNotRun, traceBreaks }).catch((err: unknown) => {
    throw asConfigError(config, err);
  });
}

/**
 * `cronsafe validate`: import `handler.module` as a run would and let it go, so that a
 * config validate passes does not fail the run's start with 78 (a module with no default
 * function, a syntax error, a throw at import). Its top-level code runs, as it does at
 * every run's start. (A command handler's program is checked with the config.)
 */
export async function checkModuleHandler(config: Config): Promise<void> {
  const handler = await createModuleHandler(config.handler, { sourceDir: config.source.directory, redact: configRedactor(config) }).catch((err: unknown) => {
    throw asConfigError(config, err);
  });
  await handler.close?.();
}
