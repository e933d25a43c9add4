import { beforeAll, describe, expect, it } from 'vitest';
import { byKind, configOf, ensureTools, mainContainer, NAMESPACE, one, podSpec, render, runner, templateRaw, type Obj } from './helpers.js';

beforeAll(ensureTools);

const LEASE_RULES = [
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: ['qc-cronsafe'], verbs: ['get', 'update'] },
  // create cannot be narrowed by resourceNames: the authorizer has no name before the object exists.
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
];
const EVENT_RULES = [{ apiGroups: [''], resources: ['events'], verbs: ['create'] }];
const JOB_RULES = [{ apiGroups: ['batch'], resources: ['jobs'], verbs: ['get'] }];

const tokenMounted = (objs: Obj[]) => ({
  pod: podSpec(runner(objs)).automountServiceAccountToken as boolean,
  sa: one(objs, 'ServiceAccount').automountServiceAccountToken as boolean,
});

describe('least privilege', () => {
  it('by default: a ServiceAccount without a token, and no Role or RoleBinding at all', () => {
    const objs = render();
    expect(byKind(objs, 'Role')).toEqual([]);
    expect(byKind(objs, 'RoleBinding')).toEqual([]);
    expect(tokenMounted(objs)).toEqual({ pod: false, sa: false });
    expect(podSpec(runner(objs)).serviceAccountName).toBe('qc-cronsafe');
  });

  it.each([
    ['the Lease lock', { lock: { kubernetesLease: { enabled: true } } }, LEASE_RULES],
    ['Events', { events: { enabled: true } }, [...EVENT_RULES, ...JOB_RULES]],
    ['the scheduled-timestamp read', { scheduledTimestamp: { enabled: true } }, JOB_RULES],
    [
      'all three',
      { lock: { kubernetesLease: { enabled: true } }, events: { enabled: true }, scheduledTimestamp: { enabled: true } },
      [...LEASE_RULES, ...EVENT_RULES, ...JOB_RULES],
    ],
  ])('%s: exactly the rules it needs, bound to the ServiceAccount, token mounted', (_what, values, rules) => {
    const objs = render(values);
    const role = one(objs, 'Role');
    expect(role.rules).toEqual(rules);
    const binding = one(objs, 'RoleBinding');
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role.metadata.name });
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'qc-cronsafe', namespace: NAMESPACE }]);
    expect(tokenMounted(objs)).toEqual({ pod: true, sa: true });
  });

  // `cronsafe status` reads the ledger only: a one-off status pod gets no token, so the Lease,
  // Events and Job rights stay with the runner's pods.
  it('the status pod never mounts the token, whatever is enabled', () => {
    const objs = render({ lock: { kubernetesLease: { enabled: true } }, events: { enabled: true }, scheduledTimestamp: { enabled: true } });
    expect(podSpec(runner(objs)).automountServiceAccountToken).toBe(true);
    expect(podSpec(one(objs, 'CronJob', `${runner(objs).metadata.name}-status`)).automountServiceAccountToken).toBe(false);
  });

  it('restricts the Lease rule to the configured lease name', () => {
    const role = one(render({ lock: { kubernetesLease: { enabled: true, name: 'captions-lock' } } }), 'Role');
    expect(role.rules[0].resourceNames).toEqual(['captions-lock']);
  });

  it('rbac.create=false renders no Role even with features on, but still mounts the token', () => {
    const objs = render({ rbac: { create: false }, events: { enabled: true } });
    expect(byKind(objs, 'Role')).toEqual([]);
    expect(byKind(objs, 'RoleBinding')).toEqual([]);
    expect(tokenMounted(objs).pod).toBe(true);
  });

  it('an external ServiceAccount is used by name and not created', () => {
    const objs = render({ serviceAccount: { create: false, name: 'batch-runner' }, lock: { kubernetesLease: { enabled: true } } });
    expect(byKind(objs, 'ServiceAccount')).toEqual([]);
    expect(podSpec(runner(objs)).serviceAccountName).toBe('batch-runner');
    expect(one(objs, 'RoleBinding').subjects[0].name).toBe('batch-runner');
  });

  // The namespace's `default` ServiceAccount is every pod's that names none: binding the
  // Role to it would give them all the Lease, Events and Job rights.
  it.each([
    ['no ServiceAccount named', { create: false }],
    ['`default` named', { create: false, name: 'default' }],
  ])('never binds the Role to the default ServiceAccount (%s): install fails naming serviceAccount.name', (_what, serviceAccount) => {
    const r = templateRaw({ serviceAccount, events: { enabled: true } });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/serviceAccount\.name/);
    expect(r.stderr).toMatch(/default ServiceAccount/);
    // Without a feature that needs the API there is no Role, so nothing to refuse.
    expect(byKind(render({ serviceAccount }), 'RoleBinding')).toEqual([]);
    // rbac.create: false binds nothing either: the user grants what is needed.
    expect(byKind(render({ serviceAccount, events: { enabled: true }, rbac: { create: false } }), 'RoleBinding')).toEqual([]);
  });
});

describe('what the pod is told about the enabled features', () => {
  it('the config names the Lease and the features only when they are enabled', () => {
    const off = configOf(render());
    expect(off.lock).not.toHaveProperty('kubernetesLease');
    expect(off).not.toHaveProperty('events');
    expect(off).not.toHaveProperty('scheduledTimestamp');
    const on = configOf(render({
      lock: { kubernetesLease: { enabled: true } }, events: { enabled: true }, scheduledTimestamp: { enabled: true },
    }));
    expect(on.lock).toEqual({ path: '/tmp/qc-cronsafe.lock', kubernetesLease: { name: 'qc-cronsafe' } });
    expect(on.events).toEqual({ enabled: true });
    expect(on.scheduledTimestamp).toEqual({ enabled: true });
  });

  it('the pod knows its own name, namespace and Job through the downward API', () => {
    const env = mainContainer(runner(render())).env as Obj[];
    const field = (n: string) => env.find((e) => e.name === n)?.valueFrom?.fieldRef?.fieldPath;
    expect(field('CRONSAFE_POD_NAME')).toBe('metadata.name');
    expect(field('CRONSAFE_POD_NAMESPACE')).toBe('metadata.namespace');
    expect(field('CRONSAFE_JOB_NAME')).toBe("metadata.labels['batch.kubernetes.io/job-name']");
    expect(field('CRONSAFE_JOB_UID')).toBe("metadata.labels['batch.kubernetes.io/controller-uid']");
  });
});
