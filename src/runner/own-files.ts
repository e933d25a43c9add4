import type { Config } from '../config/types.js';
import { storeFiles } from '../ledger/store-files.js';

/**
 * Files and directories of cronsafe's own that may sit inside source.directory and are never
 * items. The config file too: in the source (`source.directory: .` beside it), or a link or
 * hard link there to it, it was handed to the handler, secrets (a PostgreSQL URL, handler.env)
 * and all, and a handler that removes its input deleted it, so that every later run failed.
 */
export function ownFiles(config: Config): string[] {
  return [config.output?.directory, ...storeFiles(config.state), config.lock.path, config.configPath].filter((p): p is string => !!p);
}
