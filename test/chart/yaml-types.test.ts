import { beforeAll, describe, expect, it } from 'vitest';
// parseDocs reads YAML 1.1, as Helm and the API server (sigs.k8s.io/yaml) do: a bare 123,
// 0777, 1e3, on, yes or y is a number or a boolean there, not a string.
import { CHART, ensureTools, helm, type Obj, parseDocs, validateAll, valuesFile } from './helpers.js';

beforeAll(ensureTools);

describe('names and labels that YAML would read as a number or a boolean', () => {
  // Helm takes these release names, and the schema these overrides; the chart rendered
  // `app.kubernetes.io/instance: 123` (or `name: 0777`) bare, and `helm install` failed with
  // "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string".
  it.each([
    ['release 123', '123', {}],
    ['release on', 'on', {}],
    ['release yes', 'yes', {}],
    ['release y', 'y', {}],
    ['release 0777', '0777', {}],
    ['release 1e3', '1e3', {}],
    ['nameOverride 0777', 'qc', { nameOverride: '0777' }],
    ['fullnameOverride 123', 'qc', { fullnameOverride: '123' }],
    ['fullnameOverride 1e3', 'qc', { fullnameOverride: '1e3' }],
    ['namespace 123', 'qc', {}, '123'],
    ['priorityClassName 1000', 'qc', { priorityClassName: '1000' }],
  ])('%s: every object is valid as the API server reads it', (_what, release, values, namespace = 'jobs') => {
    const all = {
      ...values,
      lock: { kubernetesLease: { enabled: true } },
      events: { enabled: true },
      metrics: { enabled: true, podMonitor: { enabled: true }, prometheusRule: { enabled: true } },
    };
    const r = helm(['template', release, CHART, '--namespace', namespace, '-f', valuesFile(all)]);
    expect(r.status, r.stderr).toBe(0);
    const objs = parseDocs(r.stdout);
    expect(() => validateAll(objs)).not.toThrow();
    for (const o of objs) {
      expect(typeof o.metadata.name, `${o.kind} name`).toBe('string');
      for (const s of o.subjects ?? []) expect(typeof s.namespace, `${o.kind} subject namespace`).toBe('string');
      for (const v of Object.values(o.metadata.labels ?? {})) expect(typeof v, `${o.kind} label`).toBe('string');
    }
  });
});

describe('a persistence.mountPath with characters YAML flow mappings treat specially', () => {
  // The path went bare into `{name: data, mountPath: ...}`: "/mnt/jobs,2024" mounted the
  // volume at /mnt/jobs while cronsafe.yaml said /mnt/jobs,2024/queue (on the read-only root:
  // every run failed), and "/mnt/jobs #1" or "/mnt/{jobs}" failed the render with a YAML
  // error naming no value.
  it.each(['/mnt/jobs,2024', '/mnt/jobs, readOnly: true', '/mnt/jobs #1', '/mnt/{jobs}', '/mnt/a: b'])('%s', (mountPath) => {
    const r = helm(['template', 'qc', CHART, '--namespace', 'jobs', '-f', valuesFile({ persistence: { mountPath } })]);
    expect(r.status, r.stderr).toBe(0);
    const objs = parseDocs(r.stdout);
    validateAll(objs);
    for (const cj of objs.filter((o) => o.kind === 'CronJob')) {
      const spec = cj.spec.jobTemplate.spec.template.spec as Obj;
      for (const c of [...((spec.initContainers ?? []) as Obj[]), ...(spec.containers as Obj[])]) {
        const data = (c.volumeMounts as Obj[]).filter((m) => m.name === 'data');
        expect(data, `${cj.metadata.name} ${c.name}`).toEqual([{ name: 'data', mountPath }]);
      }
    }
  });
});
