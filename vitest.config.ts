import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import LongestFirstSequencer from './test/helpers/sequencer.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Process tests spawn real children and kill them; keep files isolated.
    pool: 'forks',
    // One temporary directory per run (TMPDIR for the workers and what they spawn), removed
    // at its end: the tests' own directories no longer pile up in /tmp.
    globalSetup: ['test/helpers/tmp-root.ts'],
    // process.kill(0) (a pid read before it was written) would SIGKILL vitest's own group.
    setupFiles: ['test/helpers/no-group-kill.ts'],
    // Vitest's default is one worker fewer than the cores: one on a 2-core machine, where
    // the suite ran file after file for 35 minutes (on CI's machine). The process tests mostly
    // wait on their children, servers and the product's own timeouts (the longest PostgreSQL
    // files use 10-45% of a core over their run), so workers beyond the cores keep the
    // cores busier: on CI's 2-core machine, `npm test` took 1,742 s with 2 workers, 1,444 s
    // with 3 (~1,000 s once the files ran longest first) and 876 s with 4. Safe with 4: the
    // 24 longest files and heap-growth ran with 4 workers at a machine load average of 20-30
    // (other suites beside them), the CPU-bound files 3-10 times as long as in CI, all passing.
    maxWorkers: Math.max(2, availableParallelism() + 2),
    // The longest files first (by CI's times in .ci/test-times.json), so that no 90-second
    // file starts near the end and runs alone while the other workers idle.
    sequence: { sequencer: LongestFirstSequencer },
  },
});
