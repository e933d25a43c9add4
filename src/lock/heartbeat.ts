import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { Ledger, RunHeartbeat } from '../ledger/types.js';

/**
 * The run lock's second line of defence (SQLite; PostgreSQL reclaims only expired leases
 * anyway). The flock proves no other run is alive only while its lock file stays: a tmp
 * cleaner or an operator "removing a stale lock" unlinks it, and the next start locks a
 * new file. So a live run also beats in the ledger's `runs` row, and a start that holds
 * the lock checks for another run still beating before it reclaims anything.
 */

/** `host:pid:runId` (executeRun's owner) split; null when it has another shape. */
function ownerParts(owner: string): { host: string; pid: number } | null {
  const parts = owner.split(':');
  if (parts.length < 3) return null;
  const pid = Number(parts[parts.length - 2]);
  return Number.isSafeInteger(pid) && pid > 0 ? { host: parts.slice(0, -2).join(':'), pid } : null;
}

/** The host `run` beat from, when it is not this one (a pod on another node); undefined when it is this one or unknown. */
export function otherHost(run: Pick<RunHeartbeat, 'owner'>, here = hostname()): string | undefined {
  const who = ownerParts(run.owner);
  return who && who.host !== here ? who.host : undefined;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // alive, someone else's
  }
}

/**
 * Another run of this job that is alive: it beat within `staleMs`, it is not the lock
 * file's previous holder (`previousHolder`, which our flock proves gone) and, when it ran on
 * this host, its process still exists and is not this one (a container restarted in its
 * pod gets the same hostname and often the same pid: that earlier life is over). On
 * another host the heartbeat alone decides, so a run killed there holds starts off for at
 * most `staleMs`. Null when none is. `startedBefore`: only runs started before it count (the
 * others took the flock on the ledger file that the caller holds: they are gone).
 */
export async function findLiveRun(
  ledger: Ledger,
  self: string,
  now: number,
  staleMs: number,
  previousHolder: string | null = null,
  startedBefore = Infinity,
): Promise<RunHeartbeat | null> {
  const here = hostname();
  for (const run of await ledger.beatingRuns(now - staleMs)) {
    if (run.owner === self || run.startedAt >= startedBefore) continue;
    // We hold the flock on the very file it wrote its name into: it let go, so it is gone
    // (e.g. an evicted pod, whose replacement runs on another host with the same volume).
    if (previousHolder !== null && run.owner === previousHolder) continue;
    const who = ownerParts(run.owner);
    if (who && who.host === here && (who.pid === process.pid || !pidAlive(who.pid))) continue;
    return run;
  }
  return null;
}

/**
 * Beat every `everyMs` until stopped; a failed beat is logged (the next one may work). Each
 * beat also asks whether the SQLite ledger's write-ahead log is held back by a reader
 * (Ledger.pinnedLog), and warns the first time and again each time it has doubled since:
 * it grows with every write until that reader ends its transaction.
 */
export function startHeartbeat(ledger: Ledger, runId: string, everyMs: number, log: Logger): () => void {
  let warnedAt = 0;
  const timer = setInterval(() => {
    ledger.heartbeat(runId, Date.now()).catch((err: unknown) => log.warn({ err }, 'could not record the run heartbeat'));
    ledger
      .pinnedLog?.()
      .then((bytes) => {
        if (bytes === null || bytes < 2 * warnedAt) return;
        warnedAt = bytes;
        log.warn(
          { walBytes: bytes },
          `the ledger's write-ahead log has grown to ${Math.round(bytes / 1048576)} MiB: another connection has held a read transaction open on the ledger (a sqlite3 shell left inside BEGIN, a backup or a reader that does not finish), so SQLite cannot copy the log back into it; it grows with every write until that transaction ends, and can fill the state volume: end it (COMMIT, or quit that tool)`,
        );
      })
      .catch(() => {
        /* a failed look is no reason to stop: the next beat asks again */
      });
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
