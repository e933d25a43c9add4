import type { Config } from '../config/types.js';
import { storeFiles } from '../ledger/store-files.js';

/** Files and directories of cronsafe's own that may sit inside source.directory and are never items. */
export function ownFiles(config: Config): string[] {
  return [config.output?.directory, ...storeFiles(config.state), config.lock.path].filter((p): p is string => !!p);
}
