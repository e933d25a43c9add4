/**
 * Shared by the container tests: the opt-in and tool checks, podman with this sandbox's
 * containers.conf, and the image built from the Dockerfile (once per run: the build is
 * cached by podman's layers, and .ci/run runs these files one after the other).
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const IMAGE = 'localhost/cronsafe:test';
export const UID = 65532;

/**
 * Why the container tests are skipped here ('' when they run), given the tools they need.
 * Opt-in (`npm run test:container`): building the image takes minutes of both cores and
 * would starve the timing-sensitive process tests that run beside it in `npm test`.
 */
export function skipReason(tools: string[]): string {
  if (process.env.CRONSAFE_CONTAINER_TESTS !== '1') return ' (skipped: opt in with `npm run test:container`)';
  const missing = tools.filter((t) => spawnSync('sh', ['-c', `command -v ${t}`]).status !== 0);
  return missing.length > 0 ? ` (skipped: ${missing.join(', ')} not installed; run .ci/setup-podman.sh)` : '';
}

const env = { ...process.env, CONTAINERS_CONF: path.join(ROOT, '.tmp/podman/containers.conf') };

export function sh(cmd: string, args: string[], timeoutMs: number): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(cmd, args, { encoding: 'utf8', env, timeout: timeoutMs, maxBuffer: 64 << 20 });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

export function must(cmd: string, args: string[], timeoutMs = 60_000): string {
  const r = sh(cmd, args, timeoutMs);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}):\n${r.stderr.slice(-4000)}`);
  return r.stdout;
}

/** The local Node base image (.ci/setup-podman.sh), then the Dockerfile's image on it. */
export function buildImage(): void {
  const base = must('bash', [path.join(ROOT, '.ci/setup-podman.sh')], 900_000).trim().split('\n').pop() ?? '';
  must('podman', ['build', '--network', 'host', '--build-arg', `NODE_IMAGE=${base}`, '-t', IMAGE, ROOT], 900_000);
}
