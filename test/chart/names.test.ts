/**
 * Object names under long release names, nameOverride and fullnameOverride. Kubernetes
 * takes at most 63 characters (a DNS-1123 label) for most names and 52 for a CronJob (its
 * Jobs add 11); the chart cuts the full name to fit, and a cut must neither end in "-" nor
 * make two releases' names one.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { CHART, ensureTools, helm, parseDocs, validateAll, valuesFile, type Obj } from './helpers.js';

beforeAll(ensureTools);

const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

/** Everything with the Kubernetes API features on, so the Role, RoleBinding and Lease render. */
const ALL_ON = { lock: { kubernetesLease: { enabled: true } }, events: { enabled: true } };

function renderRelease(release: string, values: Record<string, unknown> = {}): Obj[] {
  const r = helm(['template', release, CHART, '--namespace', 'jobs', '-f', valuesFile({ ...ALL_ON, ...values })]);
  if (r.status !== 0) throw new Error(`helm template ${release} failed (${r.status}):\n${r.stderr}`);
  return parseDocs(r.stdout);
}

/**
 * Every name a release owns or points at, keyed by what it is: each object's kind and name,
 * and the references to them (PVC claim, ConfigMap volume, ServiceAccount, the RoleBinding's
 * Role and subject, the Lease the Role names, cronsafe's own name in its config).
 */
function namesOf(objs: Obj[]): Map<string, string> {
  const names = new Map<string, string>();
  const add = (what: string, name: unknown) => {
    expect(typeof name, what).toBe('string');
    names.set(what, name as string);
  };
  for (const o of objs) {
    add(`${o.kind}/${o.metadata.name as string}`, o.metadata.name);
    if (o.kind === 'CronJob') {
      const pod = o.spec.jobTemplate.spec.template.spec as Obj;
      add(`${o.metadata.name as string} serviceAccountName`, pod.serviceAccountName);
      for (const v of pod.volumes as Obj[]) {
        if (v.persistentVolumeClaim) add(`${o.metadata.name as string} claimName`, v.persistentVolumeClaim.claimName);
        if (v.configMap) add(`${o.metadata.name as string} configMap`, v.configMap.name);
      }
    }
    if (o.kind === 'Role') {
      for (const rule of o.rules as Obj[]) {
        for (const n of (rule.resourceNames ?? []) as string[]) add(`Role ${(rule.resources as string[]).join(',')}`, n);
      }
    }
    if (o.kind === 'RoleBinding') {
      add('RoleBinding roleRef', o.roleRef.name);
      for (const s of o.subjects as Obj[]) add(`RoleBinding subject ${s.kind as string}`, s.name);
    }
    if (o.kind === 'ConfigMap') add('config name', (YAML.parse(o.data['cronsafe.yaml'] as string) as Obj).name);
  }
  return names;
}

function expectValidNames(objs: Obj[]): void {
  validateAll(objs);
  for (const [what, name] of namesOf(objs)) {
    expect(name, what).toMatch(LABEL);
    expect(name.length, what).toBeLessThanOrEqual(what.startsWith('CronJob/') ? 52 : 63);
  }
  for (const o of objs) {
    const labelSets = [o.metadata.labels as Record<string, string>];
    if (o.kind === 'CronJob') labelSets.push(o.spec.jobTemplate.spec.template.metadata.labels as Record<string, string>);
    for (const labels of labelSets) {
      for (const [key, value] of Object.entries(labels)) {
        expect(String(value), `${o.kind} label ${key}`).toMatch(LABEL_VALUE);
        expect(String(value).length, `${o.kind} label ${key}`).toBeLessThanOrEqual(63);
      }
    }
  }
}

describe('two releases whose full names differ only past the cut', () => {
  // The full name was cut at 52 alone: both releases rendered one name for every object
  // (CronJob, ConfigMap, PVC, ServiceAccount, Role, RoleBinding, the Lease through the
  // default config.name), so the second install failed on them, or, in another namespace,
  // shared one cronsafe name; the status CronJob's hash was of the cut name, the same too.
  it.each([
    ['53-character release names holding "cronsafe"', [`payments-reconciliation-cronsafe-nightly-eu-west-${'1'.repeat(4)}`, `payments-reconciliation-cronsafe-nightly-eu-west-${'1'.repeat(3)}2`], {}],
    ['53-character release names', [`${'r'.repeat(52)}1`, `${'r'.repeat(52)}2`], {}],
    ['a long nameOverride', ['qc', 'qc'], [{ nameOverride: `${'n'.repeat(50)}-1` }, { nameOverride: `${'n'.repeat(50)}-2` }]],
  ])('%s render no name in common, each valid', (_what, releases, values) => {
    const sets = releases.map((release, i) => {
      expect(release.length).toBeLessThanOrEqual(53);
      const objs = renderRelease(release, Array.isArray(values) ? values[i] : values);
      expectValidNames(objs);
      return namesOf(objs);
    });
    const [a, b] = sets as [Map<string, string>, Map<string, string>];
    expect(a.size).toBeGreaterThanOrEqual(12);
    const shared = [...a.values()].filter((n) => [...b.values()].includes(n));
    expect(shared).toEqual([]);
  });
});

describe('names that fit are not changed', () => {
  it.each([
    ['the default', 'qc', {}, 'qc-cronsafe'],
    ['a full name of exactly 52', 'q'.repeat(43), {}, `${'q'.repeat(43)}-cronsafe`],
    ['a release name of 52 holding "cronsafe"', `cronsafe-${'q'.repeat(43)}`, {}, `cronsafe-${'q'.repeat(43)}`],
    ['a fullnameOverride of 52', 'qc', { fullnameOverride: 'f'.repeat(52) }, 'f'.repeat(52)],
  ])('%s', (_what, release, values, fullname) => {
    const objs = renderRelease(release, values);
    expectValidNames(objs);
    const names = namesOf(objs);
    for (const kind of ['CronJob', 'ConfigMap', 'PersistentVolumeClaim', 'ServiceAccount', 'Role', 'RoleBinding']) {
      expect(names.get(`${kind}/${fullname}`), kind).toBe(fullname);
    }
    expect(names.get('config name')).toBe(fullname);
  });
});

describe('names the API server would refuse are refused at render', () => {
  it.each([
    ['nameOverride', { nameOverride: 'Cronsafe' }, '/nameOverride'],
    ['nameOverride', { nameOverride: 'cron_safe' }, '/nameOverride'],
    ['fullnameOverride', { fullnameOverride: 'QC' }, '/fullnameOverride'],
    ['fullnameOverride', { fullnameOverride: 'qc_nightly' }, '/fullnameOverride'],
    ['fullnameOverride', { fullnameOverride: 'qc-' }, '/fullnameOverride'],
    ['fullnameOverride', { fullnameOverride: 'f'.repeat(53) }, '/fullnameOverride'],
    ['config.name', { config: { name: 'QC' } }, '/config/name'],
    // These rendered, and the API server refused the ServiceAccount or every Job's pod.
    ['serviceAccount.name', { serviceAccount: { name: 'Batch_Runner' } }, '/serviceAccount/name'],
    ['serviceAccount.name', { serviceAccount: { name: 'runner-' } }, '/serviceAccount/name'],
    ['serviceAccount.name', { serviceAccount: { create: false, name: 'Runner' } }, '/serviceAccount/name'],
    ['serviceAccount.name', { serviceAccount: { name: 's'.repeat(254) } }, '/serviceAccount/name'],
    ['priorityClassName', { priorityClassName: 'High_Priority' }, '/priorityClassName'],
  ])('%s %j', (_key, values, path) => {
    const r = helm(['template', 'qc', CHART, '--namespace', 'jobs', '-f', valuesFile(values)]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain(`at '${path}'`);
  });

  it.each([
    ['serviceAccount.name', { serviceAccount: { name: 'batch-runner-1' } }],
    ['priorityClassName', { priorityClassName: 'system-cluster-critical' }],
  ])('a valid %s still renders', (_key, values) => {
    expectValidNames(renderRelease('qc', values));
  });
});
