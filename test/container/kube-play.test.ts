/**
 * The chart's own Pod spec on a real container runtime: `helm template` (the real helm),
 * the runner CronJob's pod template and its ConfigMap turned into a Pod, and
 * `podman kube play` of it against the image the container test builds. As a new user's
 * node would run it: uid 65532, read-only root, no capabilities, NoNewPrivs, the
 * init container, the /tmp emptyDir, the ConfigMap volume.
 *
 * What podman does not do, and how the Pod makes up for it (MACHINE-NOTES):
 *  - no fsGroup: the data volume is a hostPath directory owned by 65532 (what fsGroup
 *    gives); one test leaves it root-owned on purpose (a volume that ignores fsGroup);
 *  - no `fieldRef: metadata.namespace`: that variable gets the namespace as a value;
 *  - annotation values capped at 63 characters: the pod's annotations are dropped;
 *  - terminationGracePeriodSeconds ignored: the drain is `podman pod stop -t <grace>`.
 *
 * Needs podman, runc, debootstrap and catatonit (.ci/setup-podman.sh installs them).
 */
import { mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { NAMESPACE, byKind, ensureTools, render, runner, type Obj } from '../chart/helpers.js';
import { IMAGE, UID, buildImage, must, sh, skipReason as skipReasonFor } from './podman.js';

const skipReason = skipReasonFor(['podman', 'runc', 'debootstrap', 'catatonit']);
if (skipReason) console.log(`test/container/kube-play${skipReason}`);

const [imageRepository, imageTag] = IMAGE.split(':') as [string, string];
const pods: string[] = [];

/** A data volume: queue/ with these items, owned by the pod's user unless `owner` says. */
function volume(items: number, owner = UID): string {
  const dir = path.join(tmpdir(), `cronsafe-kube-${process.pid}-${Math.random().toString(36).slice(2)}`);
  mkdirSync(path.join(dir, 'queue'), { recursive: true });
  mkdirSync(path.join(dir, 'started'));
  for (let i = 0; i < items; i++) writeFileSync(path.join(dir, 'queue', `item-${String(i).padStart(3, '0')}.txt`), `payload ${i}\n`);
  must('chown', ['-R', `${owner}:${owner}`, dir]);
  return dir;
}

/** The chart rendered with these values, as one Pod (plus its ConfigMap) for `podman kube play`. */
function podYaml(values: Obj, dataDir: string, name: string): string {
  const objs = render({ image: { repository: imageRepository, tag: imageTag, pullPolicy: 'Never' }, ...values });
  const template = structuredClone(runner(objs).spec.jobTemplate.spec.template) as Obj;
  const spec = template.spec as Obj;
  spec.volumes = (spec.volumes as Obj[]).map((v) => (v.name === 'data' ? { name: 'data', hostPath: { path: dataDir, type: 'Directory' } } : v));
  for (const c of [...(spec.initContainers ?? []), ...spec.containers] as Obj[]) {
    for (const e of (c.env ?? []) as Obj[]) {
      if (e.valueFrom?.fieldRef?.fieldPath === 'metadata.namespace') {
        delete e.valueFrom;
        e.value = NAMESPACE;
      }
    }
  }
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    // The labels the Job controller puts on its pods (the env reads two of them).
    metadata: {
      name,
      labels: { ...template.metadata.labels, 'batch.kubernetes.io/job-name': `${name}-job`, 'batch.kubernetes.io/controller-uid': `uid-${name}` },
    },
    spec,
  };
  return [...byKind(objs, 'ConfigMap'), pod].map((o) => YAML.stringify(o)).join('---\n');
}

/** `podman kube play`: returns its result (non-zero when an init container fails). */
function play(values: Obj, dataDir: string): { name: string; status: number | null; stderr: string } {
  const name = `cronsafe-kube-${process.pid}-${pods.length}`;
  pods.push(name);
  const file = path.join(dataDir, '..', `${path.basename(dataDir)}-${pods.length}.yaml`);
  writeFileSync(file, podYaml(values, dataDir, name));
  const r = sh('podman', ['kube', 'play', file], 120_000);
  rmSync(file, { force: true });
  return { name, status: r.status, stderr: r.stderr };
}

/** Waits for the cronsafe container to exit; its code and its JSON log lines. */
function finish(pod: string): { code: number; lines: Obj[] } {
  const code = Number(must('podman', ['wait', `${pod}-cronsafe`], 300_000).trim());
  const logs = sh('podman', ['logs', `${pod}-cronsafe`], 30_000);
  const lines = logs.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Obj);
  return { code, lines };
}

const finished = (lines: Obj[]) => lines.find((l) => l.msg === 'run finished');
const outputs = (dir: string) => readdirSync(path.join(dir, 'out')).filter((f) => f.endsWith('.out')).sort();

describe.skipIf(skipReason !== '')(`the chart's Pod under podman kube play${skipReason}`, () => {
  beforeAll(() => {
    ensureTools();
    buildImage();
  }, 1_800_000);

  afterAll(() => {
    for (const p of pods) sh('podman', ['pod', 'rm', '-f', '-t', '0', p], 60_000);
  });

  it('runs a 50-item pass hardened as rendered, and a second pass skips everything done', () => {
    const dir = volume(50);
    const first = play({}, dir);
    expect(first.status, first.stderr).toBe(0);
    const r1 = finish(first.name);
    expect(r1.code, JSON.stringify(r1.lines.slice(-3))).toBe(0);
    expect(finished(r1.lines)).toMatchObject({ outcome: 'completed', counts: { scanned: 50, succeeded: 50, failed: 0 } });
    expect(outputs(dir)).toHaveLength(50);
    // The init container made the output and state directories as the pod's user.
    expect(statSync(path.join(dir, 'state')).uid).toBe(UID);

    // podman applied the rendered securityContext.
    const c = JSON.parse(must('podman', ['inspect', `${first.name}-cronsafe`]))[0] as Obj;
    expect(c.Config.User).toBe(`${UID}:${UID}`);
    expect(c.HostConfig.ReadonlyRootfs).toBe(true);
    expect(c.HostConfig.SecurityOpt).toContain('no-new-privileges');
    expect(c.EffectiveCaps ?? []).toEqual([]);

    const before = statSync(path.join(dir, 'out', 'item-007.txt.out')).mtimeMs;
    const second = play({}, dir);
    expect(second.status, second.stderr).toBe(0);
    const r2 = finish(second.name);
    expect(r2.code).toBe(0);
    expect(finished(r2.lines)).toMatchObject({ outcome: 'completed', counts: { scanned: 50, claimed: 0, succeeded: 0 }, items: { done: 50 } });
    expect(statSync(path.join(dir, 'out', 'item-007.txt.out')).mtimeMs).toBe(before);
    rmSync(dir, { recursive: true, force: true });
  });

  it('`podman pod stop -t <grace>` during slow items: exits 75 before the grace, claims handed back, the next pass finishes', () => {
    const G = 12;
    const margin = 4;
    // Slow while /data/slow exists: each item marks itself started, then outlasts the drain budget.
    const handler = 'touch "/data/started/$CRONSAFE_ITEM_ID"; if [ -e /data/slow ]; then sleep 120; fi; cp "$CRONSAFE_ITEM_PATH" "$CRONSAFE_OUTPUT_PATH"';
    const values = {
      drain: { gracePeriodSeconds: G, marginSeconds: margin },
      config: { concurrency: 2, handler: { command: ['sh', '-c', handler], timeoutSeconds: 300 } },
    };
    const dir = volume(6);
    writeFileSync(path.join(dir, 'slow'), '');
    const pod = play(values, dir);
    expect(pod.status, pod.stderr).toBe(0);
    const deadline = Date.now() + 120_000;
    while (readdirSync(path.join(dir, 'started')).length < 2) {
      if (Date.now() > deadline) throw new Error(`items never started:\n${sh('podman', ['logs', `${pod.name}-cronsafe`], 10_000).stdout.slice(-3000)}`);
      sh('sleep', ['0.2'], 5_000);
    }

    const t0 = Date.now();
    sh('podman', ['pod', 'stop', '-t', String(G), pod.name], (G + 60) * 1000);
    const elapsed = (Date.now() - t0) / 1000;
    const { code, lines } = finish(pod.name);
    console.log(`kube play pod drained: exit ${code} ${elapsed.toFixed(1)} s after SIGTERM (G=${G}, margin=${margin})`);
    expect(code, JSON.stringify(lines.slice(-4))).toBe(75);
    expect(elapsed).toBeLessThan(G);
    // In-flight items were aborted at G - margin, not earlier.
    expect(elapsed).toBeGreaterThan(G - margin - 1);
    expect(finished(lines)).toMatchObject({ outcome: 'drained', items: { claimed: 0, done: 0, pending: 6 } });
    // No partial output: nothing was committed.
    expect(outputs(dir)).toEqual([]);

    rmSync(path.join(dir, 'slow'));
    const again = play(values, dir);
    expect(again.status, again.stderr).toBe(0);
    const r = finish(again.name);
    expect(r.code).toBe(0);
    expect(outputs(dir)).toHaveLength(6);
    rmSync(dir, { recursive: true, force: true });
  });

  it('a volume that ignores fsGroup (root-owned): the init container exits 78 saying what to fix; cronsafe never starts', () => {
    const dir = volume(3, 0);
    const pod = play({}, dir);
    expect(pod.status).not.toBe(0);
    const init = JSON.parse(must('podman', ['inspect', `${pod.name}-init-dirs`]))[0] as Obj;
    expect(init.State.ExitCode).toBe(78);
    const logs = sh('podman', ['logs', `${pod.name}-init-dirs`], 30_000);
    expect(logs.stderr + logs.stdout).toContain(
      // The queue is readable, which is all cronsafe needs of the source: the output directory is what stops it.
      `cannot create or write the directory /data/out: /data is owned by uid:gid 0:0 with mode 755, and this container runs as uid ${UID}`);
    expect(logs.stderr + logs.stdout).toContain('initDirs.enabled: false');
    const main = JSON.parse(must('podman', ['inspect', `${pod.name}-cronsafe`]))[0] as Obj;
    expect(main.State.Status).toBe('created');
    rmSync(dir, { recursive: true, force: true });
  });
});
