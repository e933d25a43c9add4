import path from 'node:path';
import { abstractLockName, takeAbstractLock } from '../../abstract-lock.js';
import { whereItIs } from '../../real-path.js';

/**
 * The third part of the SQLite run lock, beside the two flocks (flock.ts): a Linux
 * abstract unix socket whose name is derived from the ledger's path. A flock lives on a
 * file, and removing the state directory takes the file away: a start in between (while
 * the holder is paused, or before its recheck) would lock a new file and run beside it. An
 * abstract socket has no file: nothing but the holder's exit (the kernel closes it, even on
 * SIGKILL) frees the name. It is one more lock, never the only one: it holds only within a
 * network namespace (a pod, a host), where the flocks already hold whenever the files stay.
 *
 * The name also carries the mount namespace, so two containers that each have their own
 * volume at the same path (host networking) do not lock each other out; two that share
 * one volume are kept apart by the flocks. Another process that binds the name first
 * (it must know the ledger's path) makes the run skip, as a held lock file would.
 *
 * Returns the release, null when another process holds the name, or a no-op release where
 * abstract sockets do not exist (not Linux) or cannot be bound (a sandbox that refuses
 * sockets): the flocks alone then, as before.
 */
export async function takeNameLock(ledgerFile: string): Promise<(() => void) | null> {
  return takeAbstractLock(lockName(ledgerFile));
}

/** `cronsafe-run/` and a hash of the mount namespace and the ledger's real path. */
export function lockName(ledgerFile: string): string {
  // The file exists by now (the ledger's flock created it): a link to it, or to its
  // directory, names the same ledger. Only the directory was resolved, and a config naming
  // the ledger through a link to the file took another name lock than one naming the file:
  // with the state directory removed under a run of one, a start of the other ran beside it.
  return abstractLockName('cronsafe-run', whereItIs(path.resolve(ledgerFile)));
}
