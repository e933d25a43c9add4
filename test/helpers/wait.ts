import path from 'node:path';
import { existsSync, readdirSync } from 'node:fs';

/**
 * Poll a condition until it holds (a readiness check, not a sleep): resolves as soon as
 * `cond()` is true (or resolves true), rejects with `what` after timeoutMs.
 */
export async function until(cond: () => boolean | Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export const filesIn = (dir: string): string[] => (existsSync(dir) ? readdirSync(dir) : []);

/** True while a process with this pid exists. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Every file (not directory) under `dir`, relative, recursively; [] when it does not exist. */
export function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((d) => !d.isDirectory())
    .map((d) => path.relative(dir, path.join(d.parentPath, d.name)));
}
