/**
 * The plain manifests (k8s/) for users without Helm: `kubectl kustomize` must build them,
 * every object must be valid, and they must keep the chart's guarantees. Unlike the chart,
 * nothing ties the CronJob to the config file, so the agreement is checked here.
 */
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { ROOT, byKind, ensureTools, kubectl, one, parseDocs, podSpec, render, runner, validateAll, type Obj } from './helpers.js';

beforeAll(ensureTools);

function build(dir: string): Obj[] {
  const r = kubectl(['kustomize', path.join(ROOT, dir)]);
  if (r.status !== 0) throw new Error(`kubectl kustomize ${dir} failed:\n${r.stderr}`);
  return parseDocs(r.stdout);
}

const spec = (objs: Obj[]) => one(objs, 'CronJob').spec as Obj;
const pod = (objs: Obj[]) => spec(objs).jobTemplate.spec.template.spec as Obj;
const container = (objs: Obj[]) => (pod(objs).containers as Obj[]).find((c) => c.name === 'cronsafe') as Obj;
const config = (objs: Obj[]) => YAML.parse(one(objs, 'ConfigMap').data['cronsafe.yaml'] as string) as Obj;

describe.each(['k8s/base', 'k8s/overlays/example'])('%s', (dir) => {
  it('builds, and every object validates', () => {
    const objs = build(dir);
    expect(objs.map((o) => o.kind).sort()).toEqual(['ConfigMap', 'CronJob', 'PersistentVolumeClaim', 'ServiceAccount']);
    validateAll(objs);
  });

  it('keeps Forbid, the exit-code policy and restartPolicy Never', () => {
    const objs = build(dir);
    expect(spec(objs).concurrencyPolicy).toBe('Forbid');
    expect(spec(objs).jobTemplate.spec.podFailurePolicy.rules).toEqual([
      { action: 'FailJob', onExitCodes: { containerName: 'cronsafe', operator: 'In', values: [2, 78] } },
      { action: 'FailJob', onExitCodes: { containerName: 'init-dirs', operator: 'In', values: [78] } },
      { action: 'Ignore', onExitCodes: { containerName: 'cronsafe', operator: 'In', values: [75] } },
      { action: 'Ignore', onPodConditions: [{ type: 'DisruptionTarget', status: 'True' }] },
    ]);
    expect(pod(objs).restartPolicy).toBe('Never');
  });

  it("runs the chart's init-dirs script on the directories of cronsafe.yaml", () => {
    const objs = build(dir);
    const cfg = config(objs);
    const init = (pod(objs).initContainers as Obj[])[0] as Obj;
    const chartInit = (podSpec(runner(render())).initContainers as Obj[])[0] as Obj;
    expect(init.name).toBe('init-dirs');
    // The same script (the chart's file without comments); a change to one must go to both.
    expect(init.command.slice(0, 3)).toEqual(chartInit.command.slice(0, 3));
    expect(init.command.slice(3)).toEqual(['init-dirs', '--readable', cfg.source.directory, cfg.output.directory, path.dirname(cfg.state.sqlite)]);
  });

  it("puts the run lock on the pod's emptyDir, as the chart does, not on the (possibly network) volume", () => {
    const objs = build(dir);
    const lockPath = config(objs).lock?.path as string | undefined;
    expect(lockPath, 'lock.path').toBeDefined();
    const mount = (container(objs).volumeMounts as Obj[]).find((m) => lockPath!.startsWith(`${m.mountPath as string}/`));
    const volume = (pod(objs).volumes as Obj[]).find((v) => v.name === mount?.name);
    expect(volume?.emptyDir, `the volume of ${lockPath}`).toBeDefined();
  });

  it('the CronJob and cronsafe.yaml agree on schedule, zone and drain grace', () => {
    const objs = build(dir);
    const cfg = config(objs);
    expect(cfg.schedule.cron).toBe(spec(objs).schedule);
    expect(cfg.schedule.timeZone).toBe(spec(objs).timeZone);
    expect(cfg.drain.gracePeriodSeconds).toBe(pod(objs).terminationGracePeriodSeconds);
  });

  it('is hardened and needs no API access (no token, no RBAC)', () => {
    const objs = build(dir);
    expect(byKind(objs, 'Role')).toEqual([]);
    expect(pod(objs).automountServiceAccountToken).toBe(false);
    expect(one(objs, 'ServiceAccount').automountServiceAccountToken).toBe(false);
    expect(pod(objs).securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 65532, fsGroup: 65532 });
    for (const c of [...pod(objs).initContainers, ...pod(objs).containers] as Obj[]) {
      expect(c.securityContext, c.name).toMatchObject({
        runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' },
      });
    }
    const vols = pod(objs).volumes as Obj[];
    expect(vols.find((v) => v.name === 'tmp')).toEqual({ name: 'tmp', emptyDir: { sizeLimit: '256Mi' } });
  });

  it('mounts the generated (content-hashed) ConfigMap', () => {
    const objs = build(dir);
    const name = one(objs, 'ConfigMap').metadata.name as string;
    expect(name).toMatch(/^cronsafe-config-[a-z0-9]{10}$/);
    expect((pod(objs).volumes as Obj[]).find((v) => v.name === 'config')).toEqual({ name: 'config', configMap: { name } });
  });
});

describe('the example overlay', () => {
  it('changes the schedule, the image, the handler and the resources, and nothing it should not', () => {
    const base = build('k8s/base');
    const ex = build('k8s/overlays/example');
    expect(spec(ex).schedule).not.toBe(spec(base).schedule);
    expect(container(ex).image).toBe('registry.example.com/caption-qc:1.4.2');
    expect((pod(ex).initContainers as Obj[])[0]?.image).toBe('registry.example.com/caption-qc:1.4.2');
    expect(config(ex).handler.command).not.toEqual(config(base).handler.command);
    expect(container(ex).resources).not.toEqual(container(base).resources);
    // The strategic merge patch must not have dropped the base container's other fields.
    expect(container(ex).args).toEqual(['run']);
    expect(container(ex).volumeMounts).toEqual(container(base).volumeMounts);
    expect(container(ex).securityContext).toEqual(container(base).securityContext);
  });
});
