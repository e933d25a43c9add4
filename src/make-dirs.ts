import { mkdirSync, statSync } from 'node:fs';
import path from 'node:path';

/**
 * The mode of every directory cronsafe makes (state, lock, output and its subdirectories,
 * its temp directory), less the umask: never writable by group or others, whatever the
 * umask. mkdir's default (0777) under `umask 000` (a container entrypoint, a systemd unit
 * with UMask=0000) made them world-writable: another local user could plant files and
 * links in them (a link at the ledger's `-wal`, a file among the outputs). Their files are
 * written 0644 (the ledger, the lock, the start journal) or by the handler.
 */
export const DIR_MODE = 0o755;

/**
 * `mkdir -p` that ends. Node's recursive mkdir (sync and async) never returns when a
 * directory cannot be made for a reason it reads as "the parent is missing" (ENOENT, as
 * under /proc): it makes the parent (EEXIST) and tries again, forever, at full CPU, and a
 * CronJob with `concurrencyPolicy: Forbid` never fires again. Here each missing component
 * is made in turn, and the first refusal is thrown.
 */
export function makeDirs(dir: string): void {
  const missing: string[] = [];
  let d = path.resolve(dir);
  let st = statSync(d, { throwIfNoEntry: false });
  while (st === undefined) {
    missing.push(d);
    const up = path.dirname(d);
    if (up === d) break;
    d = up;
    st = statSync(d, { throwIfNoEntry: false });
  }
  // There already, but not a directory: mkdir's own error (EEXIST) names it.
  if (missing.length === 0 && !st?.isDirectory()) mkdirSync(d, DIR_MODE);
  for (const m of missing.reverse()) {
    try {
      mkdirSync(m, DIR_MODE);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}
