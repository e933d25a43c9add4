import type { Config } from '../config/types.js';

/** Files and directories of cronsafe's own that may sit inside source.directory and are never items. */
export function ownFiles(config: Config): string[] {
  const db = config.state.sqlite;
  return [
    config.output?.directory,
    db,
    db && `${db}-wal`,
    db && `${db}-shm`,
    db && `${db}-journal`,
    db && `${db}-starts`, // the start journal (ledger/sqlite/start-journal.ts)
    config.lock.path,
  ].filter((p): p is string => !!p);
}
