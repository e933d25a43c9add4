import type { Logger } from 'pino';
import type { Drain } from './drain.js';

/**
 * Wait for in-flight items. Once aborting, wait at most until the children's kill budget
 * has passed: a module handler that ignores its AbortSignal must not keep us past the
 * kubelet's SIGKILL. True when it gave up on some (the caller hands their claims back).
 */
export async function waitForTasks(tasks: Set<Promise<void>>, drain: Drain, log: Logger): Promise<boolean> {
  const all = Promise.all(tasks);
  const aborted = new Promise<void>((resolve) => {
    if (drain.aborting.aborted) resolve();
    else drain.aborting.addEventListener('abort', () => resolve(), { once: true });
  });
  await Promise.race([all, aborted]);
  if (!drain.aborting.aborted) return false;
  const budget = drain.killAfterMs() * 2 + 250;
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = await Promise.race([
    all.then(() => false),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), budget))),
  ]);
  if (timer) clearTimeout(timer);
  if (gaveUp) log.warn({ stillRunning: tasks.size }, 'drain: some handlers did not stop in time; handing their claims back (not charged)');
  return gaveUp;
}
