/**
 * The image built from the Dockerfile, run with podman as Kubernetes would run it:
 * non-root, read-only root filesystem, a volume for the work, a tmpfs /tmp. Then
 * `podman stop -t G` (SIGTERM, SIGKILL after G s: the kubelet's contract) during slow
 * items: cronsafe must drain and exit 75 before G.
 *
 * Needs podman, runc and debootstrap (.ci/setup-podman.sh installs them and builds the
 * local Node base image; no registry is reachable). Skipped, with the reason, without them.
 */
import { spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { IMAGE, UID, buildImage, must, sh, skipReason as skipReasonFor } from './podman.js';

const skipReason = skipReasonFor(['podman', 'runc', 'debootstrap']);
if (skipReason) console.log(`test/container${skipReason}`);

/** A work volume (queue/, config) owned by the image's user, as fsGroup makes it in a pod. */
function workDir(config: Record<string, unknown>, items: Record<string, string>): string {
  const dir = path.join(tmpdir(), `cronsafe-ctr-${process.pid}-${Math.random().toString(36).slice(2)}`);
  for (const d of ['queue', 'etc', 'started']) mkdirSync(path.join(dir, d), { recursive: true });
  for (const [name, text] of Object.entries(items)) writeFileSync(path.join(dir, 'queue', name), text);
  writeFileSync(path.join(dir, 'etc', 'cronsafe.yaml'), YAML.stringify({
    name: 'ctr-test',
    source: { directory: '/data/queue' },
    output: { directory: '/data/out' },
    state: { sqlite: '/data/state/cronsafe.db' },
    log: { level: 'info' },
    ...config,
  }));
  spawnSync('chown', ['-R', `${UID}:${UID}`, dir]);
  chownSync(dir, UID, UID);
  return dir;
}

/** `podman run` flags equivalent to the chart's pod: read-only root, non-root, no network. */
const runFlags = (dir: string, name: string) => [
  'run', '--name', name, '--read-only', '--user', `${UID}:${UID}`, '--network', 'none',
  '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges',
  '--tmpfs', '/tmp:rw,size=64m', '-v', `${dir}:/data`, '-v', `${path.join(dir, 'etc')}:/etc/cronsafe:ro`,
];

const names: string[] = [];
const containerName = () => {
  const n = `cronsafe-test-${process.pid}-${names.length}`;
  names.push(n);
  return n;
};

describe.skipIf(skipReason !== '')(`container image${skipReason}`, () => {
  // Both steps are cached: the base image by name, the build by podman's layer cache.
  beforeAll(buildImage, 1_800_000);

  afterAll(() => {
    for (const n of names) sh('podman', ['rm', '-f', '-t', '0', n], 30_000);
  });

  it('runs a pass as uid 65532 under tini with a read-only root filesystem', () => {
    // The handler records who and what runs it: uid, PID 1's name, whether / is writable.
    const probe = 'id -u; cat /proc/1/comm; touch /probe 2>/dev/null && echo rw || echo ro; cat "$CRONSAFE_ITEM_PATH"';
    const dir = workDir({ handler: { command: ['sh', '-c', `(${probe}) > "$CRONSAFE_OUTPUT_PATH"`] } },
      { 'a.txt': 'alpha', 'b.txt': 'beta', 'c.txt': 'gamma' });
    const r = sh('podman', [...runFlags(dir, containerName()), IMAGE], 120_000);
    expect(r.status, r.stderr).toBe(0);
    const outs = readdirSync(path.join(dir, 'out')).filter((f) => !f.startsWith('.')).sort();
    expect(outs).toEqual(['a.txt.out', 'b.txt.out', 'c.txt.out']);
    expect(readFileSync(path.join(dir, 'out', 'b.txt.out'), 'utf8')).toBe(`${UID}\ntini\nro\nbeta`);
    // The default CMD is `run`, and the logs are JSON lines on stdout.
    expect(r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { msg: string }).map((l) => l.msg)).toContain('run started');
    const status = sh('podman', [...runFlags(dir, containerName()), IMAGE, 'status', '--json'], 60_000);
    expect(status.status, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout).items).toMatchObject({ pending: 0, claimed: 0, done: 3, dead: 0 });
    // `cronsafe` is on the PATH for debug pods and `kubectl exec`.
    const onPath = sh('podman', [...runFlags(dir, containerName()), '--entrypoint', 'cronsafe', IMAGE, 'validate'], 60_000);
    expect(onPath.status, onPath.stderr).toBe(0);
    expect(onPath.stdout).toContain('/etc/cronsafe/cronsafe.yaml: OK');
    // The licences of the packages bundled into the chunks come with them (the Kubernetes
    // client's are in no node_modules of the image: devDependencies, pruned).
    const licences = sh('podman', [...runFlags(dir, containerName()), '--entrypoint', 'cat', IMAGE, '/app/dist/chunks/THIRD-PARTY-LICENSES.txt'], 60_000);
    expect(licences.status, licences.stderr).toBe(0);
    expect(licences.stdout).toMatch(/^@kubernetes\/client-node@[^ ]+ \(Apache-2\.0\)$/m);
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs the program from its V8 code cache, whose stack traces name the files in the image', () => {
    // The cache keeps the path the build compiled the program under: built in /src, every
    // stack trace in the logs named /src/dist/..., which the image does not have.
    const probe = `
      import { readFileSync } from 'node:fs';
      const m = await import('/app/dist/code-cache.js');
      const f = m.codeCacheFiles('/app/dist/chunks', 'bin');
      const { program, script } = m.runScript(f.script, readFileSync(f.cache));
      console.log('rejected', script.cachedDataRejected);
      const never = new AbortController().signal;
      await program.main(['node', 'cronsafe', 'validate', '-c', '/nonexistent.yaml'], {
        stop: never, force: never, drainBudget() {},
        commandStarts() { console.log(new Error('probe').stack); },
      });`;
    const dir = workDir({ handler: { command: ['true'] } }, {});
    const r = sh('podman', [...runFlags(dir, containerName()), '--entrypoint', 'node', IMAGE, '--v8-pool-size=1', '--heap-growing-percent=10', '--max-semi-space-size=2', '--input-type=module', '-e', probe], 60_000);
    expect(r.stdout, r.stderr).toContain('rejected false');
    expect(r.stdout).toContain('/app/dist/chunks/cronsafe.cjs:');
    expect(r.stdout).not.toContain('/src/');
    rmSync(dir, { recursive: true, force: true });
  });

  it('the image user has a passwd entry: a handler that looks itself up works where the runtime adds none', () => {
    // containerd (and so most Kubernetes nodes) adds no /etc/passwd line for the pod's uid;
    // podman does unless --passwd=false, which hid it. Without one, whoami, ssh, git's ident,
    // Python's getpass and Node's os.userInfo() fail in a handler.
    const probe = 'whoami; node -p "const u = require(\'os\').userInfo(); u.username + \' \' + u.homedir"';
    const dir = workDir({ handler: { command: ['sh', '-c', `(${probe}) > "$CRONSAFE_OUTPUT_PATH" 2>&1`] } }, { 'a.txt': 'alpha' });
    const flags = runFlags(dir, containerName());
    const r = sh('podman', [...flags.slice(0, 3), '--passwd=false', ...flags.slice(3), IMAGE], 120_000);
    expect(r.status, r.stderr).toBe(0);
    expect(readFileSync(path.join(dir, 'out', 'a.txt.out'), 'utf8')).toBe('nonroot\nnonroot /tmp\n');
    rmSync(dir, { recursive: true, force: true });
  });

  it('a bad config exits 78 naming the key', () => {
    const dir = workDir({ concurrency: 'eight', handler: { command: ['true'] } }, {});
    const r = sh('podman', [...runFlags(dir, containerName()), IMAGE], 60_000);
    expect(r.status).toBe(78);
    expect(r.stderr).toContain('concurrency');
    rmSync(dir, { recursive: true, force: true });
  });

  it('`podman stop -t G` during slow items: drains, hands claims back, exits 75 before G', () => {
    const G = 12;
    const margin = 4;
    // Slow while /data/slow exists: each item marks itself started, then outlasts the drain budget.
    const handler = 'touch "/data/started/$CRONSAFE_ITEM_ID"; if [ -e /data/slow ]; then sleep 120; fi; cp "$CRONSAFE_ITEM_PATH" "$CRONSAFE_OUTPUT_PATH"';
    const items = Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`item-${i}.txt`, `payload ${i}`]));
    const dir = workDir({ concurrency: 2, handler: { command: ['sh', '-c', handler], timeoutSeconds: 300 },
      drain: { gracePeriodSeconds: G, marginSeconds: margin } }, items);
    writeFileSync(path.join(dir, 'slow'), '');
    const name = containerName();
    must('podman', [...runFlags(dir, name), '-d', IMAGE]);

    const deadline = Date.now() + 60_000;
    while (readdirSync(path.join(dir, 'started')).length < 2) {
      if (Date.now() > deadline) throw new Error(`items never started:\n${sh('podman', ['logs', name], 10_000).stderr}`);
      spawnSync('sleep', ['0.2']);
    }
    const t0 = Date.now();
    sh('podman', ['stop', '-t', String(G), name], (G + 30) * 1000);
    const elapsed = (Date.now() - t0) / 1000;
    const code = Number(must('podman', ['inspect', name, '--format', '{{.State.ExitCode}}']).trim());
    const logs = sh('podman', ['logs', name], 10_000);
    console.log(`container drained: exit ${code} ${elapsed.toFixed(1)} s after SIGTERM (G=${G}, margin=${margin})`);
    expect(code, logs.stdout.slice(-3000) + logs.stderr.slice(-2000)).toBe(75);
    expect(elapsed).toBeLessThan(G);
    // In-flight items were aborted at G - margin, not earlier.
    expect(elapsed).toBeGreaterThan(G - margin - 1);

    const status = sh('podman', [...runFlags(dir, containerName()), IMAGE, 'status', '--json'], 60_000);
    expect(JSON.parse(status.stdout).items).toMatchObject({ claimed: 0, done: 0, dead: 0, pending: 6 });

    // The next pass (fast now) resumes and finishes everything.
    rmSync(path.join(dir, 'slow'));
    const again = sh('podman', [...runFlags(dir, containerName()), IMAGE], 120_000);
    expect(again.status, again.stderr).toBe(0);
    expect(readdirSync(path.join(dir, 'out')).filter((f) => f.endsWith('.out'))).toHaveLength(6);
    expect(existsSync(path.join(dir, 'out', 'item-3.txt.out'))).toBe(true);
    rmSync(dir, { recursive: true, force: true });
  });
});
