import { constants as fsConstants } from 'node:fs';
import { access } from 'node:fs/promises';
import { exhaustedWhich } from '../descriptors.js';
import { EnvironmentFault, NotStarted, OwnDirectoryGone } from './faults.js';
import { itemBehindLink, itemGone, itemMountDead, itemNotAFile, itemUnreachable, sourcePresent, type SourceId } from './scan.js';
import { HandlerFailure, KilledBySignal, ProgramNotFound, TimedOut } from './types.js';

/**
 * ENOSPC as strerror(3) words it (shell tools) and as Node's errors do; and EDQUOT, a user's
 * or project's quota used up, the same fault to an item (Node 20 names it "Unknown system
 * error -122", or UNKNOWN: errorCode).
 */
const NO_SPACE = /no space left on device|\bENOSPC\b|disk quota exceeded|\bEDQUOT\b|unknown system error -122\b/i;

/** The source root vanished or was replaced: the pass stops, the claims go back uncharged. */
export const sourceGone = (directory: string): EnvironmentFault =>
  new EnvironmentFault(`source.directory ${directory} is gone or is no longer the same directory (moved, unmounted or replaced); stopping, nothing charged`);
const SOURCE_GONE = 'not charged: source.directory is gone';

/** What a failed attempt costs: who is to blame decides it (judgeFailure). */
export type FailureVerdict =
  /** The item's fault: charged toward retry.maxAttempts. */
  | { kind: 'charge'; message: string }
  /**
   * Not the item's fault: handed back uncharged, with a warning when `warn` is set, once the
   * ledger answered the hand-back (`what` happened; the line then says whether the claim was
   * handed back, or had been taken over already: handBackLine).
   */
  | { kind: 'release'; reason: string; warn?: { what: string; fields: Record<string, unknown> } }
  /**
   * The environment cannot run items: handed back uncharged and the pass stops. `recurring`:
   * the item itself may cause it (a module handler that leaks descriptors on one input), so
   * an item handed back retry.maxAttempts times already is charged instead (settle).
   */
  | { kind: 'stop'; reason: string; fault: EnvironmentFault; outputFull?: true; recurring?: Recurring; unstarted?: true }
  /** The item's file was deleted since the scan: forgotten. */
  | { kind: 'gone' };

/**
 * The line said of a hand-back once the ledger answered it: applied, the claim went back
 * uncharged; fenced, the claim was no longer this attempt's (a pod paused or cut off past
 * its lease, whose sibling took the item over: that owner's attempt is the one that counts),
 * so nothing was handed back, and the line must not say it was.
 */
export function handBackLine(what: string, result: 'applied' | 'fenced'): string {
  return result === 'applied'
    ? `${what}; claim handed back (attempt not charged)`
    : `${what}; nothing handed back: the claim had been taken over by another owner (its lease expired)`;
}

/**
 * A stop that the item itself may cause: once the item was handed back retry.maxAttempts
 * times for it (attempt minus charged), it is charged instead (`message`), and the pass still
 * stops (`fault`, logged with `note`), so that one item cannot stop every run, never
 * dead-lettered. `moduleOnly`: only a module handler can cause it.
 */
export interface Recurring {
  message: string;
  fault: EnvironmentFault;
  note: string;
  moduleOnly: boolean;
}

export interface FailedAttempt {
  err: unknown;
  message: string;
  /** The attempt's signal had fired (a drain or a timeout of ours). */
  aborted: boolean;
  /** What the clean-up of the attempt's temp file found, if anything. */
  tempGone: OwnDirectoryGone | EnvironmentFault | undefined;
  /** output.directory's file system was (nearly) full when the attempt failed. */
  outputFull: boolean;
  /**
   * The attempt filled the output file system itself: no longer full once its own temp file
   * was removed, which took at least half of what is free then, most of what was free when the
   * attempt started, and no less than its siblings' temp files (OutputStore.filledBy).
   */
  filledOutput?: boolean;
  /** output.directory's file system was read-only when the attempt failed. */
  outputReadOnly?: boolean;
  /** Why this run's user could not create a file in its temp directory when the attempt failed (OutputStore.unwritable). */
  outputUnwritable?: string;
  /** The item's file (raw bytes for an escaped id). */
  itemPath: string | Buffer;
  /** The run was stopping (a drain) when the attempt failed. */
  stopping?: boolean;
  /** What stopped the run (its stop's reason): the signal's name when a signal did. */
  stoppedBy?: string;
}

/** Signals that stop a run: sent to the handlers too, they are the stop's, not the item's. */
const STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGALRM'];

/**
 * Whether a handler's death by `signal` in a drain is the stop's: the run was stopped by that
 * very signal, or by something that is no signal (a lost lease or lock: any stop signal, as before).
 */
function stoppedBySignal(stoppedBy: string | undefined, signal: NodeJS.Signals): boolean {
  if (stoppedBy === undefined || !(STOP_SIGNALS as readonly string[]).includes(stoppedBy)) return true;
  return stoppedBy === signal;
}

export interface FailureScene {
  /** An earlier attempt of this pass found the output file system full (the pass is stopping). */
  outputFullSeen: boolean;
  /** An attempt of this pass succeeded: the handler can run here. */
  succeeded: boolean;
  /** What the pass is stopping for, once an attempt found the environment at fault (PassState.stopForEnvironment). */
  environmentStop?: string;
  outputDir: string | undefined;
  /** The scanned source directory and its identity at the start; undefined when ids are not files (tests, embedders). */
  source: {
    directory: string;
    atStart: Promise<SourceId | null>;
    /** atStart once it has settled (undefined before): the checks around every attempt are synchronous. */
    startId?: SourceId | null;
    realDirectory?: Buffer;
    own?: SourceId[];
  } | undefined;
}

/**
 * A failed attempt is charged to the item only when the item is to blame. Checked in this
 * order, only on failure (failures are rare, so the checks cost nothing per item):
 * cronsafe's own interruption; an environment that cannot run anything (stop the pass); our
 * temp directory removed under the attempt; a full or read-only output file system (stop);
 * a source directory that is gone (stop); and the item's own file deleted since the scan
 * (forget it).
 *
 * A full file system is seen by the attempt's own check, or, once an earlier attempt of the
 * pass saw it, by a failure that says "no space left on device": an attempt that ran beside
 * the one that found it can come to its check a moment after a sibling's clean-up freed a
 * little space. Any other failure judged once the pass is stopping for the environment is
 * handed back uncharged too (last, below); before such a stop, it is the item's.
 */
export async function judgeFailure(a: FailedAttempt, scene: FailureScene): Promise<FailureVerdict> {
  let { err, message } = a;
  // The clean-up found output.directory gone: whatever the handler said, not its fault.
  if (a.tempGone instanceof EnvironmentFault) {
    err = a.tempGone;
    message = a.tempGone.message;
  }
  const ours = err instanceof HandlerFailure && err.interrupted && !(err instanceof EnvironmentFault);
  // Timed out before the drain's abort came (which only cut its kill short): the item's own doing.
  if (ours || (a.aborted && !(err instanceof TimedOut))) {
    // interrupted() (types.ts) already says "interrupted: ..."; another error of an aborted attempt does not.
    const reason = ours ? message : `interrupted: ${message}`;
    return { kind: 'release', reason, warn: { what: 'item interrupted', fields: { reason: message } } };
  }
  if (err instanceof EnvironmentFault) {
    return { kind: 'stop', reason: `not charged: ${message}`, fault: err, ...(err instanceof NotStarted ? { unstarted: true as const } : {}) };
  }
  const noDescriptor = outOfDescriptors(err, message);
  if (noDescriptor) return { kind: 'stop', reason: 'not charged: out of file descriptors', ...noDescriptor };
  // The stop signalled to every process at once (systemd's KillMode=control-group stops a
  // whole cgroup): the handler died of the signal that is draining the run (or caught it
  // and exited 128 + its number, as a JVM does).
  // Only that signal: a handler that died of another (its own alarm() fired in the drain, a
  // SIGALRM, while the run was stopped by SIGTERM) failed on its own, and is charged.
  if (a.stopping && err instanceof KilledBySignal && STOP_SIGNALS.includes(err.signal) && stoppedBySignal(a.stoppedBy, err.signal)) {
    return {
      kind: 'release',
      reason: `interrupted: ${message} while the run was stopping`,
      warn: { what: 'item interrupted by the stop signal', fields: { reason: message } },
    };
  }
  if (a.tempGone || err instanceof OwnDirectoryGone) {
    return {
      kind: 'release',
      reason: `not charged: cronsafe's temp directory vanished during the attempt: ${message}`,
      warn: { what: "cronsafe's temp directory vanished during the attempt (recreated)", fields: { reason: message } },
    };
  }
  if (scene.outputDir !== undefined && (a.outputFull || (scene.outputFullSeen && NO_SPACE.test(message)))) {
    const fault = new EnvironmentFault(`the file system of output.directory ${scene.outputDir} is full; stopping, nothing charged: ${message}`);
    // Filled by the item's own output, freed again by its clean-up: the item itself stops every
    // run (an output larger than the free space), so after retry.maxAttempts such hand-backs it
    // is charged; the pass still stops.
    const recurring: Recurring | undefined = a.filledOutput
      ? {
          message: `its output alone filled the file system of output.directory ${scene.outputDir} (freed again by its clean-up), after retry.maxAttempts uncharged hand-backs: charged: ${message}`,
          fault: new EnvironmentFault(`the file system of output.directory ${scene.outputDir} was filled by this item's output alone, again after retry.maxAttempts uncharged hand-backs: charged; stopping: ${message}`),
          note: "an item whose own output filled the output file system, handed back retry.maxAttempts times: charged; stopping the pass",
          moduleOnly: false,
        }
      : undefined;
    return { kind: 'stop', reason: 'not charged: the output file system is full', fault, outputFull: true, ...(recurring ? { recurring } : {}) };
  }
  if (scene.outputDir !== undefined && a.outputReadOnly) {
    const fault = new EnvironmentFault(`the file system of output.directory ${scene.outputDir} is read-only; stopping, nothing charged: ${message}`);
    return { kind: 'stop', reason: 'not charged: the output file system is read-only', fault };
  }
  if (scene.outputDir !== undefined && a.outputUnwritable) return outputUnwritable(scene.outputDir, a.outputUnwritable, message);
  const where = await whereItWent(a.itemPath, scene);
  if (where) return where;
  if (err instanceof ProgramNotFound && !scene.succeeded) return programNotFound(err, message);
  if (!scene.succeeded && scene.source !== undefined) {
    const denied = await unreadableInput(a.itemPath);
    if (denied) return unreadableItem(a.itemPath, denied, message);
  }
  // The pass is stopping for the environment's fault, found by an attempt beside this one:
  // this one most likely failed of the same cause, its own check a moment too late or blind
  // to it (a shell's "Cannot fork" beside cronsafe's own fork refused for the process limit;
  // a write refused in a directory whose rights were given back since). Charged, the items
  // in flight at each such fault came nearer to dead-lettering, good ones too. Only after
  // such a stop: an item that fails for its own reasons while nothing is wrong is charged,
  // and dead after retry.maxAttempts (a drain for SIGTERM is not the environment's fault).
  if (scene.environmentStop !== undefined) {
    return {
      kind: 'release',
      reason: `not charged: failed while the pass stopped for the environment (${scene.environmentStop}): ${message}`,
      warn: { what: 'item failed while the pass stops for the environment', fields: { reason: message, cause: scene.environmentStop } },
    };
  }
  return { kind: 'charge', message };
}

/**
 * An attempt that failed while output.directory (or cronsafe's temp directory in it) could not
 * be written by this user: the pass stops, nothing charged. Every attempt in flight when an
 * operator's chmod or chown took the rights away was charged for it. A handler that takes
 * them away itself (on one input) would stop every run once they are given back: after
 * retry.maxAttempts uncharged hand-backs its item is charged (settle's `recurring`).
 */
function outputUnwritable(outputDir: string, why: string, message: string): FailureVerdict {
  const what = `output.directory ${outputDir} ${why}`;
  return {
    kind: 'stop',
    reason: 'not charged: output.directory is not writable by this user',
    fault: new EnvironmentFault(`${what}; stopping, nothing charged: ${message}`),
    recurring: {
      message: `${what}, at this item's attempt after retry.maxAttempts uncharged hand-backs: charged: ${message}`,
      fault: new EnvironmentFault(`${what}; charged to the item after retry.maxAttempts uncharged hand-backs; stopping: ${message}`),
      note: 'output.directory not writable again at an item handed back retry.maxAttempts times: charged; stopping the pass',
      moduleOnly: false,
    },
  };
}

/** EACCES or EPERM when this process's user may not read the item's file, else null (access(2), R_OK). */
async function unreadableInput(itemPath: string | Buffer): Promise<string | null> {
  try {
    await access(itemPath, fsConstants.R_OK);
    return null;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'EACCES' || code === 'EPERM' ? code : null;
  }
}

/**
 * A failed attempt at an item whose file this user may not read, before any attempt of the
 * pass succeeded: the pod's user changed (a new `runAsUser`, a volume's owner changed by a
 * restore, an fsGroup dropped) makes every item fail, and charged, it dead-lettered the whole
 * backlog in retry.maxAttempts runs, each exiting 0. It stops the pass uncharged (exit 1)
 * instead, as a missing program does. Once an attempt has succeeded, or for an item handed
 * back retry.maxAttempts times like this (one file another user's umask made private), it is
 * the item's and charged.
 */
function unreadableItem(itemPath: string | Buffer, code: string, message: string): FailureVerdict {
  const uid = process.getuid?.() ?? '?';
  return stopBeforeAnySuccess({
    reason: `not charged: the item's file cannot be read by this user (${code}) before any attempt succeeded`,
    why: `the item's file ${shownPath(itemPath)} cannot be read by this user (uid ${uid}: ${code}) and no attempt of this pass has succeeded: the user or the files' owner or mode changed?`,
    charged: `its file cannot be read by this user (uid ${uid}: ${code}) at this item's attempt after retry.maxAttempts uncharged hand-backs: charged`,
    note: 'an item whose file this user cannot read, handed back retry.maxAttempts times: charged; stopping the pass',
    message,
  });
}

/**
 * A command handler's exit 127 or 126 (ProgramNotFound) before any attempt of the pass
 * succeeded: a program missing from the handler's environment (`sh -c 'qc-tool "$1"'` in an
 * image without qc-tool; validate checks the program itself, not what a shell runs) would fail
 * every item, and charged, it dead-lettered the whole backlog in retry.maxAttempts runs, each
 * exiting 0. It stops the pass uncharged (exit 1) instead. Once an attempt has succeeded, or
 * for an item handed back retry.maxAttempts times like this (one whose own input makes the
 * handler exit 127), it is the item's and charged.
 */
function programNotFound(err: ProgramNotFound, message: string): FailureVerdict {
  const what = err.exitCode === 127 ? 'the shell\'s "command not found"' : 'the shell\'s "cannot execute"';
  return stopBeforeAnySuccess({
    reason: `not charged: handler.command exited ${err.exitCode} before any attempt succeeded`,
    why: `handler.command exited ${err.exitCode} (${what}) and no attempt of this pass has succeeded: a program missing from the handler's environment?`,
    charged: `exit ${err.exitCode} at this item's attempt after retry.maxAttempts uncharged hand-backs: charged`,
    note: `handler.command exited ${err.exitCode} again at an item handed back retry.maxAttempts times: charged; stopping the pass`,
    message,
  });
}

/**
 * A failure before any attempt of the pass succeeded that says the environment cannot run
 * items (programNotFound, unreadableItem): the pass stops, nothing charged (`why`). The item
 * itself may cause it too, so once handed back retry.maxAttempts times it is charged
 * (`charged`, settle's `recurring`), and the pass still stops.
 */
function stopBeforeAnySuccess(o: { reason: string; why: string; charged: string; note: string; message: string }): FailureVerdict {
  return {
    kind: 'stop',
    reason: o.reason,
    fault: new EnvironmentFault(`${o.why} Stopping, nothing charged: ${o.message}`),
    recurring: {
      message: `${o.charged}: ${o.message}`,
      fault: new EnvironmentFault(`${o.charged}; stopping (${o.why}): ${o.message}`),
      note: o.note,
      moduleOnly: false,
    },
  };
}

/** An item's path as a message shows it (raw bytes of an escaped id as UTF-8). */
const shownPath = (itemPath: string | Buffer): string => (typeof itemPath === 'string' ? itemPath : itemPath.toString('utf8'));

/**
 * No file descriptor left (EMFILE: the process's `ulimit -n`; ENFILE: the system's table)
 * when a call of cronsafe's own (the fsync of a finished output, a temp file) or of a
 * module handler in its process failed: the descriptor table is the whole process's, not
 * the item's, so the attempt is handed back uncharged and the pass stops, rather than
 * dead-lettering whichever item met the limit. Null for any other failure.
 */
function outOfDescriptors(err: unknown, message: string): { fault: EnvironmentFault; recurring: Recurring } | null {
  const code = err instanceof Error ? (err as NodeJS.ErrnoException).code : undefined;
  if (code !== 'EMFILE' && code !== 'ENFILE') return null;
  const which = exhaustedWhich(code);
  const charged = `out of file descriptors (${which}) at this item's attempt after retry.maxAttempts uncharged hand-backs: charged (a module handler that leaks descriptors on this item would stop every run)`;
  return {
    fault: new EnvironmentFault(`out of file descriptors: ${which}; stopping, nothing charged (raise the limit or lower concurrency): ${message}`),
    recurring: {
      message: `${charged}: ${message}`,
      fault: new EnvironmentFault(`${charged}; stopping (raise the limit or lower concurrency): ${message}`),
      note: 'out of file descriptors again at an item handed back retry.maxAttempts times: charged; stopping the pass',
      moduleOnly: true,
    },
  };
}

/**
 * For an item that failed, or whose file is found missing before its attempt: the whole
 * source gone (stop, uncharged), the item's own file gone (forget it): deleted, or replaced
 * by a directory, a FIFO or another non-file that the scan would not take as an item, or
 * reached through a directory replaced by a link, or
 * null (it is there). Null when ids are not files (a source other than the directory scan).
 */
export async function whereItWent(itemPath: string | Buffer, scene: Pick<FailureScene, 'source'>): Promise<FailureVerdict | null> {
  if (scene.source === undefined) return null;
  const { directory, atStart, realDirectory } = scene.source;
  if (!(await sourcePresent(directory, await atStart))) return { kind: 'stop', reason: SOURCE_GONE, fault: sourceGone(directory) };
  // Its directory made unreadable since the scan: no item of it can run now, and handing
  // them back alone would have the sweep claim them again at once. The next scan skips it.
  // Or a file system mounted on its way died (a FUSE daemon gone): every item there fails.
  const unreachable = itemUnreachable(itemPath);
  const dead = unreachable === null ? await itemMountDead(itemPath) : null;
  if (unreachable || dead) {
    const where = shownPath(itemPath);
    const why = dead ? `${dead}): the file system mounted on its way is dead (its FUSE daemon gone, an NFS export removed?)` : `${unreachable}): a directory on its way became unreadable after the scan`;
    const fault = new EnvironmentFault(`item path ${where} cannot be reached now (${why}; stopping, nothing charged (its items wait until it is readable)`);
    return { kind: 'stop', reason: `not charged: its directory is unreadable (${unreachable ?? dead})`, fault };
  }
  // A directory on its way replaced by a link since the scan: the path leads out of the
  // source now, to a file the scan would not take as an item.
  const behindLink = realDirectory !== undefined && itemBehindLink(directory, realDirectory, itemPath);
  return behindLink || itemGone(itemPath) || itemNotAFile(itemPath) ? { kind: 'gone' } : null;
}
