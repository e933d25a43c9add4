/**
 * Loaded before every test file (vitest.config.ts setupFiles). A pid read from a file a
 * fixture had created but not yet written is `Number('')`, 0, and `process.kill(0, sig)`
 * signals the caller's own process group: vitest, its workers and whatever started them
 * (`.ci/run`), all SIGKILLed at once, with nothing said. Seen once on a loaded machine. A
 * test asking for pid 0 (or a NaN, or the group of 0) gets an error (ESRCH, as for a process
 * already gone) instead.
 */
const kill = process.kill.bind(process);
process.kill = ((pid: number, signal?: string | number) => {
  if (!Number.isInteger(pid) || pid === 0 || pid === -1) {
    throw Object.assign(new Error(`refusing to signal pid ${pid}: it is the test's own process group (or every process); a pid read before it was written?`), { code: 'ESRCH' });
  }
  return kill(pid, signal);
});
