import { readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import {
  CHART, NAMESPACE, RELEASE, byKind, configOf, ensureTools, helm, mainContainer, one, podSpec, render, runner, validateAll,
  templateRaw, validateObject, valuesFile, type Obj,
} from './helpers.js';
import { VALUE_SETS } from './value-sets.js';

beforeAll(ensureTools);

const chartVersion = (YAML.parse(readFileSync(path.join(CHART, 'Chart.yaml'), 'utf8')) as Obj).appVersion as string;

describe('helm template: every object is valid Kubernetes', () => {
  it.each(Object.entries(VALUE_SETS))('%s', (_name, values) => {
    const objs = render(values);
    expect(objs.length).toBeGreaterThan(2);
    validateAll(objs);
    for (const o of objs) expect(o.metadata.labels['app.kubernetes.io/instance']).toBe(RELEASE);
  });

  // Without it, `helm template -n batch | kubectl apply -f -` (and GitOps tools that apply the
  // output) put every object in kubectl's current namespace while the RoleBinding's subject
  // named the ServiceAccount in batch: the pods' Lease, Event and Job calls were refused.
  it.each(Object.entries(VALUE_SETS))('every object of the %s value set names the release namespace', (_name, values) => {
    const objs = render({ ...values, lock: { kubernetesLease: { enabled: true } } });
    for (const o of objs) expect(`${o.kind}/${o.metadata.name} ${o.metadata.namespace}`).toBe(`${o.kind}/${o.metadata.name} ${NAMESPACE}`);
    for (const b of byKind(objs, 'RoleBinding')) expect(b.subjects[0].namespace).toBe(NAMESPACE);
  });

  it('the validator itself rejects what the API server would (so the checks above can fail)', () => {
    const cj = runner(render());
    const broken = structuredClone(cj);
    broken.spec.concurrencyPolicy = 'Sometimes';
    expect(() => validateObject(broken)).toThrow(/CronJob\/qc-cronsafe: .*concurrencyPolicy/);
    const badRule = structuredClone(cj);
    badRule.spec.jobTemplate.spec.podFailurePolicy.rules[0].action = 'Fail';
    expect(() => validateObject(badRule)).toThrow(/action/);
    const badPort = structuredClone(cj);
    badPort.spec.jobTemplate.spec.template.spec.containers[0].ports = [{ containerPort: 'http' }];
    expect(() => validateObject(badPort)).toThrow(/containerPort/);
    expect(() => validateObject({ apiVersion: 'monitoring.coreos.com/v1', kind: 'PodMonitor', metadata: { name: 'x' }, spec: {} }))
      .toThrow(/selector/);
  });

  it('renders exactly the default object set', () => {
    const kinds = render().map((o) => `${o.kind}/${o.metadata.name}`).sort();
    expect(kinds).toEqual([
      'ConfigMap/qc-cronsafe',
      'CronJob/qc-cronsafe',
      'CronJob/qc-cronsafe-status',
      'PersistentVolumeClaim/qc-cronsafe',
      'ServiceAccount/qc-cronsafe',
    ]);
  });
});

describe('CronJob', () => {
  it('is Forbid, with the schedule, zone, deadline and history limits from the values', () => {
    const cj = runner(render({ schedule: '5 4 * * 1-5', timeZone: 'America/New_York', startingDeadlineSeconds: 120,
      successfulJobsHistoryLimit: 1, failedJobsHistoryLimit: 5, backoffLimit: 2 }));
    expect(cj.spec).toMatchObject({
      concurrencyPolicy: 'Forbid', schedule: '5 4 * * 1-5', timeZone: 'America/New_York', suspend: false,
      startingDeadlineSeconds: 120, successfulJobsHistoryLimit: 1, failedJobsHistoryLimit: 5,
    });
    expect(cj.spec.jobTemplate.spec.backoffLimit).toBe(2);
  });

  // The schema takes null (Kubernetes' own default: no deadline), and NOTES reads it so; the
  // template rendered `startingDeadlineSeconds: 0`, and a CronJob with a deadline of 0 (under
  // 10) misses every start: the controller is always a moment late, so no Job was ever made.
  it('has no startingDeadlineSeconds when it is null (not 0, which misses every start)', () => {
    const cj = runner(render({ startingDeadlineSeconds: null }));
    expect(cj.spec).not.toHaveProperty('startingDeadlineSeconds');
    validateObject(cj);
  });

  it('has activeDeadlineSeconds only when set', () => {
    expect(runner(render()).spec.jobTemplate.spec).not.toHaveProperty('activeDeadlineSeconds');
    expect(runner(render({ activeDeadlineSeconds: 7200 })).spec.jobTemplate.spec.activeDeadlineSeconds).toBe(7200);
  });

  it('maps exit codes with podFailurePolicy: 78 and 2 fail the Job (78 from init-dirs too), 75 and disruptions are ignored', () => {
    const cj = runner(render());
    const spec = cj.spec.jobTemplate.spec;
    expect(spec.podFailurePolicy.rules).toEqual([
      { action: 'FailJob', onExitCodes: { containerName: 'cronsafe', operator: 'In', values: [2, 78] } },
      { action: 'FailJob', onExitCodes: { containerName: 'init-dirs', operator: 'In', values: [78] } },
      { action: 'Ignore', onExitCodes: { containerName: 'cronsafe', operator: 'In', values: [75] } },
      { action: 'Ignore', onPodConditions: [{ type: 'DisruptionTarget', status: 'True' }] },
    ]);
    // The API server rejects a podFailurePolicy unless the pod template says Never.
    expect(podSpec(cj).restartPolicy).toBe('Never');
    // The rules name containers of the template (the API server rejects others).
    expect(mainContainer(cj).name).toBe('cronsafe');
    expect((podSpec(cj).initContainers as Obj[]).map((c) => c.name)).toEqual(['init-dirs']);
  });

  it('runs `run` through the image entrypoint (args only, so tini stays PID 1)', () => {
    const c = mainContainer(runner(render()));
    expect(c.args).toEqual(['run']);
    expect(c).not.toHaveProperty('command');
    expect(c.image).toBe(`ghcr.io/cronsafe/cronsafe:${chartVersion}`);
    expect(c.env).toContainEqual({ name: 'CRONSAFE_CONFIG', value: '/etc/cronsafe/cronsafe.yaml' });
  });
});

describe('one value wires Kubernetes and cronsafe together', () => {
  const wiring = (values: Obj) => {
    const objs = render(values);
    const cj = runner(objs);
    const cfg = configOf(objs);
    return { cj, cfg, grace: podSpec(cj).terminationGracePeriodSeconds as number };
  };

  // The config reads the drain from the pod's env, set in the same pod spec as the grace
  // period (config.test.ts: a pod started after an upgrade); its default is the same value.
  it('drain.gracePeriodSeconds sets terminationGracePeriodSeconds and the config drain grace', () => {
    const drainEnv = (cj: Obj) => (mainContainer(cj).env as Obj[]).filter((e) => String(e.name).startsWith('CRONSAFE_DRAIN_'));
    const a = wiring({});
    expect(a.cfg.drain.gracePeriodSeconds).toBe(`\${CRONSAFE_DRAIN_GRACE_SECONDS:-${a.grace}}`);
    expect(drainEnv(a.cj)).toEqual([{ name: 'CRONSAFE_DRAIN_GRACE_SECONDS', value: String(a.grace) }, { name: 'CRONSAFE_DRAIN_MARGIN_SECONDS', value: '15' }]);
    const b = wiring({ drain: { gracePeriodSeconds: 420, marginSeconds: 20 } });
    expect(b.grace).toBe(420);
    expect(b.cfg.drain).toEqual({ gracePeriodSeconds: '${CRONSAFE_DRAIN_GRACE_SECONDS:-420}', marginSeconds: '${CRONSAFE_DRAIN_MARGIN_SECONDS:-20}' });
    expect(drainEnv(b.cj)).toEqual([{ name: 'CRONSAFE_DRAIN_GRACE_SECONDS', value: '420' }, { name: 'CRONSAFE_DRAIN_MARGIN_SECONDS', value: '20' }]);
    expect(b.grace).not.toBe(a.grace);
  });

  // Helm reads a values file's numbers as float64, and `{{ }}` prints one of a million or more
  // as 1e+06: the API server refuses that for an int64 field (a month's activeDeadlineSeconds,
  // 2592000, rendered 2.592e+06 and the install failed).
  it('renders large second counts as integers, not in exponent form', () => {
    const r = templateRaw({ drain: { gracePeriodSeconds: 1_000_000 }, activeDeadlineSeconds: 2_592_000, startingDeadlineSeconds: 1_000_000 });
    expect(r.status, r.stderr).toBe(0);
    const lines = r.stdout.split('\n').filter((l) => /^\s*(terminationGracePeriodSeconds|activeDeadlineSeconds|startingDeadlineSeconds):/.test(l));
    expect(lines.length).toBeGreaterThanOrEqual(4);
    for (const l of lines) expect(l).toMatch(/: \d+$/);
  });

  it('schedule and timeZone set the CronJob and the config schedule', () => {
    const { cj, cfg } = wiring({ schedule: '@daily', timeZone: 'Asia/Kolkata' });
    expect([cj.spec.schedule, cj.spec.timeZone]).toEqual(['@daily', 'Asia/Kolkata']);
    expect(cfg.schedule).toMatchObject({ cron: '@daily', timeZone: 'Asia/Kolkata' });
  });
});

describe('pod hardening', () => {
  const hardened = {
    runAsNonRoot: true, runAsUser: 65532, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false,
    privileged: false, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' },
  };

  it.each(Object.entries(VALUE_SETS))('every container is locked down (%s)', (_name, values) => {
    for (const cj of byKind(render(values), 'CronJob')) {
      const spec = podSpec(cj);
      expect(spec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 65532, fsGroup: 65532,
        seccompProfile: { type: 'RuntimeDefault' } });
      const containers = [...(spec.initContainers ?? []), ...spec.containers] as Obj[];
      for (const c of containers) expect(c.securityContext, c.name).toMatchObject(hardened);
    }
  });

  it('writes only to the data volume and a /tmp emptyDir; the config is mounted read-only', () => {
    const spec = podSpec(runner(render()));
    const mounts = mainContainer(runner(render())).volumeMounts as Obj[];
    expect(mounts).toEqual([
      { name: 'config', mountPath: '/etc/cronsafe', readOnly: true },
      { name: 'data', mountPath: '/data' },
      { name: 'tmp', mountPath: '/tmp' },
    ]);
    const vol = (n: string) => (spec.volumes as Obj[]).find((v) => v.name === n);
    expect(vol('tmp')).toEqual({ name: 'tmp', emptyDir: { sizeLimit: '256Mi' } });
    expect(vol('data')).toEqual({ name: 'data', persistentVolumeClaim: { claimName: 'qc-cronsafe' } });
    expect(vol('config')).toEqual({ name: 'config', configMap: { name: 'qc-cronsafe' } });
  });

  it('has resources', () => {
    expect(mainContainer(runner(render())).resources).toEqual({
      requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '512Mi' },
    });
  });
});

describe('checksum/config', () => {
  const checksum = (values: Obj) => podSpecMeta(runner(render(values))).annotations['checksum/config'] as string;
  const podSpecMeta = (cj: Obj) => cj.spec.jobTemplate.spec.template.metadata as Obj;

  it('changes when the config changes, and only then', () => {
    const base = checksum({});
    expect(base).toMatch(/^[0-9a-f]{64}$/);
    expect(checksum({ config: { retry: { maxAttempts: 9 } } })).not.toBe(base);
    expect(checksum({ drain: { gracePeriodSeconds: 200, marginSeconds: 15 } })).not.toBe(base);
    expect(checksum({ resources: { requests: { cpu: '1' } } })).toBe(base);
  });
});

describe('persistence', () => {
  it('creates a PVC kept on uninstall by default', () => {
    const pvc = one(render(), 'PersistentVolumeClaim');
    expect(pvc.metadata.annotations['helm.sh/resource-policy']).toBe('keep');
    expect(pvc.spec).toEqual({ accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } });
    const withClass = one(render({ persistence: { storageClass: 'fast', size: '20Gi', keep: false } }), 'PersistentVolumeClaim');
    expect(withClass.spec).toMatchObject({ storageClassName: 'fast', resources: { requests: { storage: '20Gi' } } });
    expect(withClass.metadata.annotations ?? {}).not.toHaveProperty('helm.sh/resource-policy');
  });

  // A PVC with storageClassName "" binds only a PersistentVolume without a class (one made by
  // hand); without the field the default class provisions one. The chart had no way to say "".
  it('renders storageClassName "" for storageClass "-", and leaves it out when empty', () => {
    const none = one(render({ persistence: { storageClass: '-' } }), 'PersistentVolumeClaim');
    expect(none.spec).toHaveProperty('storageClassName', '');
    validateObject(none);
    const unset = one(render({ persistence: { storageClass: '' } }), 'PersistentVolumeClaim');
    expect(unset.spec).not.toHaveProperty('storageClassName');
  });

  it('refuses a storageClass no StorageClass can be named', () => {
    const r = templateRaw({ persistence: { storageClass: 'Fast_SSD' } });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("at '/persistence/storageClass'");
  });

  it('uses an existing claim without creating one, and an emptyDir when disabled', () => {
    const existing = render({ persistence: { existingClaim: 'ledger' } });
    expect(byKind(existing, 'PersistentVolumeClaim')).toEqual([]);
    expect((podSpec(runner(existing)).volumes as Obj[])[1]).toEqual({ name: 'data', persistentVolumeClaim: { claimName: 'ledger' } });
    const none = render({ persistence: { enabled: false } });
    expect(byKind(none, 'PersistentVolumeClaim')).toEqual([]);
    expect((podSpec(runner(none)).volumes as Obj[])[1]).toEqual({ name: 'data', emptyDir: {} });
  });

  it('creates the source, output and state directories on the volume in an init container (cronsafe exits 78 without the source)', () => {
    const dirsOf = (values: Obj) => ((podSpec(runner(render(values))).initContainers as Obj[])[0]?.command as string[]).slice(4);
    const init = podSpec(runner(render({ config: { source: { directory: 'in/box' } } }))).initContainers as Obj[];
    expect(init.map((c) => c.name)).toEqual(['init-dirs']);
    expect(init[0]?.command.slice(0, 2)).toEqual(['sh', '-c']);
    // The source only needs to be readable (cronsafe never writes there): `--readable`.
    expect(init[0]?.command.slice(3)).toEqual(['init-dirs', '--readable', '/data/in/box', '/data/out', '/data/state']);
    // Only paths on the data volume (the only one it mounts); no state dir with PostgreSQL.
    expect(dirsOf({ config: { output: { directory: '/elsewhere/out' }, state: { postgres: { existingSecret: 'pg' } } }, extraVolumes: [{ name: 'e', emptyDir: {} }], extraVolumeMounts: [{ name: 'e', mountPath: '/elsewhere' }] }))
      .toEqual(['--readable', '/data/queue']);
    // A source that is also the ledger's directory must be writable: no `--readable`.
    expect(dirsOf({ config: { handler: { command: ['true'] }, output: { directory: '' }, state: { sqlite: 'queue/ledger.db' } } }))
      .toEqual(['/data/queue']);
    expect(podSpec(runner(render({ initDirs: { enabled: false } })))).not.toHaveProperty('initContainers');
  });

  // Under a ResourceQuota on limits.cpu the API server refuses a pod any of whose containers
  // names none: the init container's were fixed, so no pod of the chart could start there.
  it("takes the init container's resources from initDirs.resources (a cpu limit for a quota)", () => {
    const init = (objs: Obj[]) => (podSpec(runner(objs)).initContainers as Obj[])[0]!;
    expect(init(render()).resources).toEqual({ requests: { cpu: '10m', memory: '16Mi' }, limits: { memory: '64Mi' } });
    const objs = render({ initDirs: { resources: { limits: { cpu: '50m' } } } });
    expect(init(objs).resources).toEqual({ requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '50m', memory: '64Mi' } });
    validateAll(objs);
    const bad = templateRaw({ initDirs: { resources: { limits: { memory: '64m' } } } });
    expect(bad.status).not.toBe(0);
    expect(bad.stderr).toContain("at '/initDirs/resources/limits/memory'");
  });

  it('fails the Job at once when the init container exits 78 (a volume it cannot write), only when there is one', () => {
    const rules = (values: Obj) => runner(render(values)).spec.jobTemplate.spec.podFailurePolicy.rules as Obj[];
    expect(rules({})).toContainEqual({
      action: 'FailJob', onExitCodes: { containerName: 'init-dirs', operator: 'In', values: [78] },
    });
    // containerName must name a container of the template, or the API server rejects the Job.
    expect(rules({ initDirs: { enabled: false } }).map((r) => r.onExitCodes?.containerName)).not.toContain('init-dirs');
  });

  it('refuses an image repository without a registry host, naming image.repository', () => {
    for (const [repository, pulled] of [['cronsafe', 'docker.io/library/cronsafe'], ['myorg/cronsafe', 'docker.io/myorg/cronsafe']]) {
      const r = helm(['template', RELEASE, CHART, '-f', valuesFile({ image: { repository } })]);
      expect(r.status).not.toBe(0);
      expect(r.stderr).toContain(`image.repository "${repository}" has no registry host`);
      expect(r.stderr).toContain(pulled);
    }
    for (const repository of ['localhost/cronsafe', 'registry.example.com:5000/cronsafe', 'docker.io/library/cronsafe']) {
      expect(mainContainer(runner(render({ image: { repository, tag: 't' } }))).image).toBe(`${repository}:t`);
    }
  });

  it('refuses a repository that is not one (a tag, a digest, a scheme, spaces, upper case), naming image.repository', () => {
    for (const repository of ['ghcr.io/x/y:1.0', 'ghcr.io/x/y@sha256:abc', 'https://ghcr.io/x/y', 'ghcr.io/X/Y', 'ghcr.io/', ' ghcr.io/x/y', 'ghcr.io/x/y ']) {
      const r = helm(['template', RELEASE, CHART, '-f', valuesFile({ image: { repository } })]);
      expect(r.status, repository).not.toBe(0);
      expect(r.stderr).toContain(`image.repository ${JSON.stringify(repository)} is not an image repository`);
      expect(r.stderr).toContain('set image.tag');
    }
  });
});

describe('imagePullSecrets', () => {
  // The plain-name form many charts take (bitnami's common helpers render either as {name}).
  it('takes a Secret name or {name: ...}, and renders each as {name: ...} on both CronJobs', () => {
    const objs = render({ imagePullSecrets: ['regcred', { name: 'mirror.v2' }] });
    for (const cj of byKind(objs, 'CronJob')) expect(podSpec(cj).imagePullSecrets).toEqual([{ name: 'regcred' }, { name: 'mirror.v2' }]);
    validateAll(objs);
  });
});

describe('status template', () => {
  it('is a suspended CronJob running `cronsafe status` on the same volume and config', () => {
    const objs = render();
    const status = one(objs, 'CronJob', `${RELEASE}-cronsafe-status`);
    expect(status.spec.suspend).toBe(true);
    expect(mainContainer(status).args).toEqual(['status']);
    expect(podSpec(status).volumes).toEqual(podSpec(runner(objs)).volumes);
    expect(byKind(render({ statusJob: { enabled: false } }), 'CronJob')).toHaveLength(1);
  });

  // With a PostgreSQL ledger `cronsafe status` reads nothing on the data volume; mounting it,
  // its pod could not start on another node while a run's pod held the ReadWriteOnce claim.
  it.each([
    ['existingSecret', { config: { state: { postgres: { existingSecret: 'pg-url' } } } }],
    ['extraEnv', { extraEnv: [{ name: 'CRONSAFE_STATE_POSTGRES', valueFrom: { secretKeyRef: { name: 'pg', key: 'url' } } }] }],
  ])('with PostgreSQL (%s) and a ReadWriteOnce claim, mounts no data volume; the runner does', (_from, values) => {
    const objs = render({ ...values, persistence: { accessModes: ['ReadWriteOnce'] } });
    validateAll(objs);
    const status = one(objs, 'CronJob', `${RELEASE}-cronsafe-status`);
    const names = (list: Obj[]) => list.map((x) => x.name as string);
    expect(names(mainContainer(status).volumeMounts as Obj[])).toEqual(['config', 'tmp']);
    expect(names(podSpec(status).volumes as Obj[])).toEqual(['config', 'tmp']);
    expect(names(mainContainer(runner(objs)).volumeMounts as Obj[])).toContain('data');
    expect(podSpec(runner(objs)).volumes).toContainEqual({ name: 'data', persistentVolumeClaim: { claimName: `${RELEASE}-cronsafe` } });
  });

  it('keeps the data volume with PostgreSQL when extraVolumeMounts mounts it', () => {
    const objs = render({ config: { state: { postgres: { existingSecret: 'pg-url' } } }, extraVolumeMounts: [{ name: 'data', mountPath: '/reports', subPath: 'out' }] });
    validateAll(objs);
    const status = one(objs, 'CronJob', `${RELEASE}-cronsafe-status`);
    expect((podSpec(status).volumes as Obj[]).map((v) => v.name)).toContain('data');
  });
});

describe('metrics', () => {
  it('serves /metrics and renders the PodMonitor and PrometheusRule only when enabled', () => {
    const off = render();
    expect(mainContainer(runner(off))).not.toHaveProperty('ports');
    expect(off.filter((o) => o.apiVersion.startsWith('monitoring.coreos.com'))).toEqual([]);
    expect(configOf(off)).not.toHaveProperty('metrics');

    const on = render(VALUE_SETS['all features']);
    expect(mainContainer(runner(on)).ports).toEqual([{ name: 'metrics', containerPort: 9464, protocol: 'TCP' }]);
    expect(configOf(on).metrics).toEqual({ port: 9464, pushgateway: 'http://pushgateway.monitoring:9091', pushIntervalSeconds: 30 });
    const pm = one(on, 'PodMonitor');
    expect(pm.metadata.labels.release).toBe('prom');
    expect(pm.spec.podMetricsEndpoints).toEqual([{ port: 'metrics', path: '/metrics', honorLabels: true, interval: '15s' }]);
    expect(pm.spec.selector.matchLabels).toMatchObject({ 'app.kubernetes.io/component': 'runner' });
    const rule = one(on, 'PrometheusRule');
    // The file, with the overrun window fitted to the default schedule (every 15 minutes: 90m).
    const fitted = readFileSync(path.join(CHART, 'files/cronsafe-rules.yaml'), 'utf8')
      .replaceAll('cronsafe_overruns_total[1h] offset 1h', 'cronsafe_overruns_total[90m] offset 90m')
      .replaceAll('cronsafe_overruns_total[1h]', 'cronsafe_overruns_total[90m]')
      .replace('overruns in the last hour', 'overruns in the last 90m')
      // The overrun alert's test of a new ledger (the first two of the file's first runs over [1h]): its first run changed in the window.
      .replace('cronsafe_first_run_timestamp_seconds[1h])) == max by (namespace, job) (max_over_time(cronsafe_first_run_timestamp_seconds[1h]', 'cronsafe_first_run_timestamp_seconds[90m])) == max by (namespace, job) (max_over_time(cronsafe_first_run_timestamp_seconds[90m]');
    expect(rule.spec).toEqual(YAML.parse(fitted) as Obj);
  });

  it('the no-success age of the PrometheusRule is a value: a weekly job is not paged every week', () => {
    const noSuccess = (objs: Obj[]) =>
      (one(objs, 'PrometheusRule').spec.groups as Obj[]).flatMap((g) => g.rules as Obj[]).find((r) => r.alert === 'CronsafeNoRecentSuccess')?.expr as string;
    expect(noSuccess(render({ metrics: { prometheusRule: { enabled: true } } }))).toBe('cronsafe:success_age_seconds > 86400');
    const weekly = render({ schedule: '0 3 * * 0', metrics: { prometheusRule: { enabled: true, noSuccessAgeSeconds: 1900800 } } });
    expect(noSuccess(weekly)).toBe('cronsafe:success_age_seconds > 1900800');
  });
});
