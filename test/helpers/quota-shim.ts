import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const SHIM_SOURCE = fileURLToPath(new URL('../fixtures/process/quota-shim.c', import.meta.url));

/**
 * A disk quota of `bytes` over `dir` (fixtures/process/quota-shim.c): the environment for a
 * CLI run and all it spawns, the shim built by gcc into `buildDir` (gcc is one of the CI's
 * packages: .ci/setup-apt.sh). This kernel's tmpfs and ext4 have no quota support here.
 */
export function quotaEnv(buildDir: string, dir: string, bytes: number): NodeJS.ProcessEnv {
  const so = path.join(buildDir, 'quota.so');
  const r = spawnSync('gcc', ['-shared', '-fPIC', '-O1', '-o', so, SHIM_SOURCE, '-ldl'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`cannot build the quota shim: ${r.error?.message ?? r.stderr}`);
  // libuv's io_uring (off by default in Node 20 since 20.11) would write past the shim.
  return { LD_PRELOAD: so, QUOTA_DIR: dir, QUOTA_BYTES: String(bytes), UV_USE_IO_URING: '0' };
}
