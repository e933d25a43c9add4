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

/** States (`R`, `S`, `Z`, ...) of the group's processes from /proc, or undefined without /proc. */
function procGroupStates(pgid: number): string[] | undefined {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return undefined;
  }
  const states: string[] = [];
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // exited while we looked
    }
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and ')', so cut at the last ')'.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(pgrp) === pgid && state) states.push(state);
  }
  return states;
}

/**
 * Poll until the group is empty or `timeoutMs` passed; resolves true when empty.
 * Bounded: a process stuck in uninterruptible sleep (D state) ignores even SIGKILL.
 */
export async function waitGroupGone(pgid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (groupAlive(pgid)) {
    if (Date.now() >= deadline) return false;
    await delay(20);
  }
  return true;
}
