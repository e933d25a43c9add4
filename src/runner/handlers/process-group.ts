import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';

/**
 * Helpers for the process group a command handler runs in. The child is spawned
 * `detached`, so it leads a new session and group whose id is its pid; signalling
 * `-pgid` reaches every grandchild that did not leave the group on purpose.
 */

/**
 * Send `signal` to the whole group; false when nobody got it. Never throws: it runs
 * from timers, where a throw (ESRCH: already gone; EPERM: every member is setuid)
 * would crash the whole run over one item.
 */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * Send `signal` to the child's group and to every other group of its session (the child leads
 * both: spawned `detached`, its pid is their id). A process that changes only its group stays
 * in the session: coreutils `timeout` run by a shell (setpgid), a shell's job control (`set -m`),
 * Go's `Setpgid`, Python's `process_group=0`. Signalled by group alone, they ran on after a
 * timeout, a drain or cronsafe's death. Only setsid leaves the session. Reads /proc (a kill is
 * rare: timeouts, drains, leftovers); without it, the group alone. True when anyone got it.
 */
export function signalSession(sid: number, signal: NodeJS.Signals): boolean {
  let sent = signalGroup(sid, signal);
  for (const pgrp of new Set(sessionMembers(sid)?.map((m) => m.pgrp))) {
    if (pgrp !== sid && pgrp > 1) sent = signalGroup(pgrp, signal) || sent;
  }
  return sent;
}

/**
 * True when process `pid` has exited: a zombie its parent has not reaped yet, or gone. For a
 * child whose exit its helper has not reported yet (a loaded machine, a stopped helper): an
 * abort that comes after its exit must not take it for interrupted. A pid reaped and reused
 * since reads as running: the abort then ends it as before.
 */
export function exitedAlready(pid: number): boolean {
  try {
    return statFields(readFileSync(`/proc/${pid}/stat`, 'utf8'))[0] === 'Z';
  } catch {
    // Reaped, or no /proc: signal 0 tells gone (ESRCH) from there (a zombie is there too).
    try {
      process.kill(pid, 0);
      return false;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'ESRCH';
    }
  }
}

/**
 * True while the child's session (led by `sid`, its group's id too) has a member that can
 * still run, in its group or in another group of the session. Reads /proc: asked only where a
 * kill is under way; without /proc, the group alone.
 */
export function sessionAlive(sid: number): boolean {
  const members = sessionMembers(sid);
  return members === undefined ? groupAlive(sid) : members.some((m) => m.state !== 'Z');
}

/** The members of session `sid` (state, group) from /proc, zombies included; undefined without /proc. */
function sessionMembers(sid: number): Array<{ state: string; pgrp: number }> | undefined {
  return procStates((m) => m.session === sid);
}

/**
 * State and group of each process `keep` takes, from /proc/<pid>/stat; undefined without
 * /proc. A process that exits while we look is left out.
 */
function procStates(keep: (m: { pgrp: number; session: number }) => boolean): Array<{ state: string; pgrp: number }> | undefined {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return undefined;
  }
  const members: Array<{ state: string; pgrp: number }> = [];
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // exited while we looked
    }
    const [state, , pgrp, session] = statFields(stat);
    const m = { pgrp: Number(pgrp), session: Number(session) };
    if (state && keep(m)) members.push({ state, pgrp: m.pgrp });
  }
  return members;
}

/**
 * True while the group has a member that can still run. Signal 0 alone also counts
 * zombies: orphans are re-parented to PID 1, and a PID 1 that reaps late (or never,
 * like a bare `node` in a container) would make a dead group look alive. On Linux,
 * /proc tells the two apart; elsewhere we trust signal 0.
 */
export function groupAlive(pgid: number): boolean {
  // Asked once per attempt, and the usual answer is ESRCH: an exception without a stack
  // trace costs a third (docs/benchmarks.md, command handlers).
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    process.kill(-pgid, 0);
  } catch (err) {
    // EPERM: a member exists but changed credentials; it still exists.
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  } finally {
    Error.stackTraceLimit = limit;
  }
  const members = procGroupStates(pgid);
  return members === undefined || members.some((state) => state !== 'Z');
}

/**
 * The fields of a /proc/<pid>/stat line after the command name: `state ppid pgrp session ...`
 * (the 22nd field of the line, the start time, is [19]). The name (comm) may hold spaces and
 * ')', so the line is cut at its last ')'.
 */
function statFields(stat: string): string[] {
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** States (`R`, `S`, `Z`, ...) of the group's processes from /proc, or undefined without /proc. */
function procGroupStates(pgid: number): string[] | undefined {
  return procStates((m) => m.pgrp === pgid)?.map((m) => m.state);
}

/**
 * Poll until the session (the group, and any group of its own inside it) is empty or
 * `timeoutMs` passed; resolves true when empty.
 * Bounded: a process stuck in uninterruptible sleep (D state) ignores even SIGKILL.
 */
export async function waitGroupGone(pgid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  // The session: a group of its own inside it is ended with the rest (signalSession).
  while (sessionAlive(pgid)) {
    if (Date.now() >= deadline) return false;
    await delay(20);
  }
  return true;
}

/**
 * The process group of a child whose pid never reached cronsafe: the helper that forked it
 * died before it sent the pid (a child that kills its parent at once, `kill -9 $PPID`). It
 * leads its own session (spawned `detached`), so its group id is its pid; it is told apart by
 * the variables it was started with (`/proc/<pid>/environ`: the environment given to exec,
 * whatever the child set since), started once `requestedAt` (process.uptime() when the request
 * was sent) had passed. Undefined when none is found (it exited, exec'd with another
 * environment, or no /proc): then nothing more can be done for it.
 */
export function findSessionLeader(env: Readonly<Record<string, string>>, requestedAt: number): number | undefined {
  let entries: string[];
  let earliest: number;
  try {
    entries = readdirSync('/proc');
    earliest = startedAfter(requestedAt);
  } catch {
    return undefined;
  }
  const wanted = Object.entries(env).map(([k, v]) => Buffer.from(`${k}=${v}`).toString('latin1'));
  // The first started of those that match: a process the child started in a session of its
  // own (setsid) inherits the same variables, and left the child's group on purpose.
  let found: { pid: number; started: number } | undefined;
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue;
    let fields: string[];
    let environ: Buffer;
    try {
      // A session leader's pgrp and session are its pid.
      fields = statFields(readFileSync(`/proc/${name}/stat`, 'utf8'));
      const [state, ppid, pgrp, session] = fields;
      if (state === 'Z' || pgrp !== name || session !== name) continue;
      // A live helper's child is that helper's to report (another job's run, same item and attempt).
      if (isHelper(Number(ppid))) continue;
      environ = readFileSync(`/proc/${name}/environ`);
    } catch {
      continue; // exited while we looked, or not ours to read (EACCES)
    }
    const vars = new Set<string>();
    let start = 0;
    for (let end = environ.indexOf(0); end !== -1; start = end + 1, end = environ.indexOf(0, start)) vars.add(environ.subarray(start, end).toString('latin1'));
    if (!wanted.every((w) => vars.has(w))) continue;
    const started = Number(fields[19]);
    // Started before the request was sent: not this attempt's child, whatever its variables
    // say (an operator's shell with them exported to debug, an earlier run's leftover).
    if (started < earliest) continue;
    if (!found || started < found.started) found = { pid: Number(name), started };
  }
  return found?.pid;
}

/**
 * The earliest start time (/proc/<pid>/stat's 22nd field, clock ticks since boot) of a process
 * started at or after `uptime` (process.uptime() then): cronsafe's own start time plus that
 * many ticks. process.uptime() counts from a moment after the kernel started cronsafe, and
 * the ticks are truncated, so the bound errs early, never late. Ticks are USER_HZ, 100 on
 * every architecture Node runs on Linux.
 */
function startedAfter(uptime: number): number {
  return Number(statFields(readFileSync('/proc/self/stat', 'utf8'))[19]) + Math.floor(uptime * USER_HZ) - 1;
}

const USER_HZ = 100;

/** The flag that marks the helper processes that fork handlers (`node --max-semi-space-size=1 -e ...`). */
export const HELPER_FLAG = '--max-semi-space-size=1';

/** Whether `pid` is a live helper that forks handlers (of this run or another's). */
function isHelper(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0')[1] === HELPER_FLAG;
  } catch {
    return false;
  }
}
