import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const SHIM_SOURCE = fileURLToPath(new URL('../fixtures/process/quota-shim.c', import.meta.url));

/**
 * A disk quota over `dir` (fixtures/process/quota-shim.c): the environment for a CLI run and
 * all it spawns, the shim built by gcc into `buildDir` (gcc is one of the CI's packages:
 * .ci/setup-apt.sh). This kernel's tmpfs and ext4 have no quota support here. `bytes`: a
 * fixed quota; `{ file }`: the number of bytes written in that file, read at each write, so a
 * test can lower it under a running process (no file: no limit).
 */
export function quotaEnv(buildDir: string, dir: string, bytes: number | { file: string }): NodeJS.ProcessEnv {
  const so = path.join(buildDir, 'quota.so');
  const r = spawnSync('gcc', ['-shared', '-fPIC', '-O1', '-o', so, SHIM_SOURCE, '-ldl'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`cannot build the quota shim: ${r.error?.message ?? r.stderr}`);
  const limit = typeof bytes === 'number' ? { QUOTA_BYTES: String(bytes) } : { QUOTA_BYTES_FILE: bytes.file };
  // libuv's io_uring (off by default in Node 20 since 20.11) would write past the shim.
  return { LD_PRELOAD: so, QUOTA_DIR: dir, ...limit, UV_USE_IO_URING: '0' };
}
