import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Process tests spawn real children and kill them; keep files isolated.
    pool: 'forks',
    // process.kill(0) (a pid read before it was written) would SIGKILL vitest's own group.
    setupFiles: ['test/helpers/no-group-kill.ts'],
    // Vitest's default is one worker fewer than the cores: one on a 2-core machine, where
    // the suite then ran file after file for 35 minutes (on CI's machine) while the
    // process tests mostly wait on their children, servers and timeouts. One worker per
    // core, at least two: the whole suite in about 14 minutes on 2 cores, all passing.
    maxWorkers: Math.max(2, availableParallelism()),
  },
});
