/**
 * Value sets every chart test renders: the defaults and a few that switch on, off or
 * around each template branch. Each must lint, render, and validate.
 */
export type Values = Record<string, unknown>;

export const VALUE_SETS: Record<string, Values> = {
  defaults: {},

  // Every optional object and Kubernetes API feature on.
  'all features': {
    lock: { kubernetesLease: { enabled: true } },
    events: { enabled: true },
    scheduledTimestamp: { enabled: true },
    metrics: {
      enabled: true,
      pushgateway: 'http://pushgateway.monitoring:9091',
      podMonitor: { enabled: true, labels: { release: 'prom' } },
      prometheusRule: { enabled: true, labels: { release: 'prom' } },
    },
    activeDeadlineSeconds: 3600,
    commonLabels: { team: 'media' },
    podAnnotations: { 'example.com/owner': 'media' },
  },

  // A module handler on an existing claim, no outputs, no status template.
  'module handler, existing claim': {
    persistence: { existingClaim: 'caption-ledger', mountPath: '/var/lib/work' },
    config: {
      handler: { command: [], module: 'handlers/qc.mjs', timeoutSeconds: 30 },
      output: { directory: '' },
      source: { directory: 'inbox', include: ['**/*.scc'], exclude: ['tmp/**'] },
    },
    statusJob: { enabled: false },
    initDirs: { enabled: false },
  },

  // Names, zone, macro schedule, fractional margin, PostgreSQL URL from a Secret, no PVC.
  'custom names, no persistence': {
    fullnameOverride: 'caption-qc',
    schedule: '@hourly',
    timeZone: 'Europe/London',
    drain: { gracePeriodSeconds: 600, marginSeconds: 12.5 },
    persistence: { enabled: false },
    serviceAccount: { create: false, name: 'batch-runner' },
    image: { repository: 'registry.example.com/caption-qc', digest: `sha256:${'a'.repeat(64)}` },
    config: {
      name: 'captions',
      source: { directory: '/inbox' },
      queueSize: 16,
      concurrency: 6,
      lock: { path: 'state/captions.lock' },
      schedule: { graceSeconds: 900, refresh: 'on-change' },
      handler: { env: { QC_MODE: 'strict' }, command: ['python3', '/opt/qc.py', '{path}', '--out={output}'] },
      log: { level: 'debug', format: 'pretty' },
    },
    extraEnv: [
      { name: 'CRONSAFE_STATE_POSTGRES', valueFrom: { secretKeyRef: { name: 'pg', key: 'url' } } },
    ],
    extraVolumes: [{ name: 'inbox', nfs: { server: 'nfs.example.com', path: '/exports/inbox' } }],
    extraVolumeMounts: [{ name: 'inbox', mountPath: '/inbox', readOnly: true }],
    nodeSelector: { 'kubernetes.io/os': 'linux' },
    tolerations: [{ key: 'batch', operator: 'Exists', effect: 'NoSchedule' }],
    priorityClassName: 'batch-low',
    imagePullSecrets: [{ name: 'regcred' }],
  },
};
