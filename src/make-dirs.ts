import { mkdirSync, statSync } from 'node:fs';
import path from 'node:path';

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
  if (missing.length === 0 && !st?.isDirectory()) mkdirSync(d);
  for (const m of missing.reverse()) {
    try {
      mkdirSync(m);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}
