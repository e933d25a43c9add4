import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { LedgerUnwritable } from '../no-ledger.js';

/**
 * SQLite opens a ledger this user may not write read-only, and then makes its `-wal` and
 * `-shm` owned by this user with the ledger's mode: the ledger's owner could not write them,
 * and every run after failed ("attempt to write a readonly database"). Say so first, naming
 * the owner, and make nothing. A ledger not made yet, or one on a read-only file system
 * (where nothing can be made), is left to the open.
 */
export function refuseUnwritable(file: string): void {
  const why = noAccess(file, 'write');
  if (why !== undefined) throw new LedgerUnwritable(`${why.text}; ${why.mine ? `give its owner write permission (chmod u+w ${file})` : 'run this as that user'}`);
}

/**
 * SQLite's "attempt to write a readonly database" when the ledger's `-wal` or `-shm` is
 * what this user may not write (another user's open left it, before refuseUnwritable):
 * name the file and its owner instead.
 */
export function unwritableCompanion(file: string, err: unknown): Error | undefined {
  if (!String((err as { code?: unknown }).code).startsWith('SQLITE_READONLY')) return undefined;
  for (const f of [`${file}-wal`, `${file}-shm`]) {
    const why = noAccess(f, 'write');
    if (why !== undefined) return new Error(`${why.text}, so SQLite cannot write the ledger; ${why.mine ? `give its owner write permission (chmod u+w ${f})` : 'give it to this user (chown)'}`, { cause: err });
  }
  // Neither there, and the directory this user may not write (a state directory made
  // read-only): SQLite cannot make them, and said only that the (writable) ledger was read-only.
  const dir = dirname(file);
  const why = [`${file}-wal`, `${file}-shm`].some((f) => !existsSync(f)) ? noAccess(dir, 'write') : undefined;
  if (why !== undefined) {
    return new Error(`${why.text}, so SQLite cannot make ${file}-wal and ${file}-shm beside the ledger; ${why.mine ? `give its owner write permission (chmod u+w ${dir})` : 'run this as its owner, or give this user write permission there'}`, { cause: err });
  }
  return undefined;
}

/**
 * Why this user may not read or write `file` (EACCES), naming its owner and mode; undefined
 * when it may, or the file is not there. `mine`: this user owns it (a mode without u+r or
 * u+w, as a backup restored read-only leaves it): no other user to run as, nothing to chown.
 */
export function noAccess(file: string, want: 'read' | 'write'): { text: string; mine: boolean; cause: unknown } | undefined {
  try {
    accessSync(file, want === 'read' ? constants.R_OK : constants.W_OK);
    return undefined;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EACCES') return undefined;
    const st = statSync(file);
    const uid = process.getuid?.();
    const mode = (st.mode & 0o777).toString(8);
    const not = `${file} is not ${want === 'read' ? 'readable' : 'writable'} by this user (uid ${uid})`;
    if (st.uid === uid) return { text: `${not}, its owner: its mode is ${mode}`, mine: true, cause: err };
    return { text: `${not}: it is owned by uid ${st.uid} with mode ${mode}`, mine: false, cause: err };
  }
}
