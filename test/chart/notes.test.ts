import { beforeAll, describe, expect, it } from 'vitest';
import { CHART, NAMESPACE, RELEASE, ensureTools, helm, valuesFile } from './helpers.js';
import type { Values } from './value-sets.js';

beforeAll(ensureTools);

const PGW = 'http://pushgateway:9091';

/** NOTES.txt as `helm install` prints it (client-side dry run: no cluster needed). */
function notes(values: Values = {}): string {
  const r = helm(['install', RELEASE, CHART, '--dry-run=client', '--namespace', NAMESPACE, '-f', valuesFile(values)]);
  if (r.status !== 0) throw new Error(`helm install --dry-run failed:\n${r.stderr}`);
  const at = r.stdout.indexOf('\nNOTES:\n');
  if (at < 0) throw new Error('no NOTES in helm install output');
  return r.stdout.slice(at + 8);
}

describe('NOTES.txt', () => {
  it('tells how to watch a first run and read the ledger, with no warning for the defaults', () => {
    const text = notes();
    expect(text).toContain(`kubectl -n ${NAMESPACE} create job --from=cronjob/qc-cronsafe "$JOB"`);
    expect(text).toContain(`kubectl -n ${NAMESPACE} logs -f "job/$JOB"`);
    expect(text).toContain('--from=cronjob/qc-cronsafe-status');
    expect(text).toContain('78 bad config');
    expect(text).not.toContain('WARNING');
  });

  it.each<[string, Values, RegExp]>([
    ['a handler timeout beyond the drain budget', { config: { handler: { timeoutSeconds: 600 } } },
      /config\.handler\.timeoutSeconds \(600\) is longer than the drain\s+budget \(drain\.gracePeriodSeconds - drain\.marginSeconds = 135s\)/],
    ['a deadline shorter than the handler timeout', { activeDeadlineSeconds: 60 },
      /activeDeadlineSeconds \(60\) is shorter than\s+config\.handler\.timeoutSeconds \(120\)/],
    ['no persistence', { persistence: { enabled: false } }, /persistence\.enabled is false/],
    ['API features without the chart-made Role', { rbac: { create: false }, events: { enabled: true } },
      /Kubernetes API features are enabled but the chart does not create the Role/],
    ['metrics nobody collects', { metrics: { enabled: true } }, /metrics\.enabled without metrics\.pushgateway/],
    // Scraped pods are gone between runs: with no pushed series, a CronJob that stops
    // starting Jobs leaves nothing for CronsafeNoRecentSuccess to fire on.
    ['alerts fed by pod scrapes only', { metrics: { enabled: true, podMonitor: { enabled: true }, prometheusRule: { enabled: true } } },
      /metrics\.prometheusRule\.enabled without metrics\.pushgateway[\s\S]*CronsafeNoRecentSuccess/],
    ['a ReadWriteMany volume with the SQLite ledger', { persistence: { accessModes: ['ReadWriteMany'] } },
      /persistence\.accessModes has ReadWriteMany with the SQLite ledger[\s\S]*cronsafe exits 78 there\.[\s\S]*ReadWriteOnce volume, or set config\.state\.postgres\.existingSecret/],
    ['a SQLite ledger off the volume (the /tmp emptyDir)', { config: { state: { sqlite: '/tmp/cronsafe.db' } } },
      /config\.state\.sqlite \(\/tmp\/cronsafe\.db\) is not under persistence\.mountPath \(\/data\)[\s\S]*lost after every run/],
    // The read-only root leaves only the /tmp emptyDir off the volume: outputs there vanish with the pod.
    ['an output directory off the volume (the /tmp emptyDir)', { config: { output: { directory: '/tmp/results' } } },
      /config\.output\.directory \(\/tmp\/results\) is not under persistence\.mountPath \(\/data\)[\s\S]*lost when each run's pod ends/],
    // Only read, so the chart renders it (an image may hold it); on the read-only root file
    // system nothing can add items there, and where the image lacks it every Job fails (78).
    ['a source directory on no volume (the read-only root file system)', { config: { source: { directory: '/srv/queue' } } },
      /config\.source\.directory \(\/srv\/queue\) is not under persistence\.mountPath \(\/data\)[\s\S]*read-only root file system[\s\S]*nothing can add items[\s\S]*exit 78, "source\.directory:\s+directory not found"/],
    ['a Pushgateway password written into the values (it lands in the ConfigMap)', { metrics: { pushgateway: 'https://ops:hunter2@pgw.example.com' } },
      /metrics\.pushgateway holds a password, and it is rendered into ConfigMap qc-cronsafe[\s\S]*\$\{PUSHGATEWAY_PASSWORD\}[\s\S]*secretKeyRef/],
    // The URL written into extraEnv as a plain value: no ConfigMap, but every reader of the
    // CronJob, its Jobs and pods (and `kubectl describe pod`) had the database password.
    ['a PostgreSQL password written into an extraEnv value', { extraEnv: [{ name: 'CRONSAFE_STATE_POSTGRES', value: 'postgres://app:hunter2@db:5432/jobs' }] },
      /extraEnv CRONSAFE_STATE_POSTGRES holds a PostgreSQL password, and it is rendered\s+into CronJob qc-cronsafe[\s\S]*config\.state\.postgres\.existingSecret[\s\S]*secretKeyRef/],
    ['a password in a PostgreSQL URL\'s query, in an extraEnv value', { extraEnv: [{ name: 'LEDGER_URL', value: 'postgresql://app@db/jobs?sslmode=require&password=hunter2' }] },
      /extraEnv LEDGER_URL holds a PostgreSQL password/],
    // A ReadWriteOnce volume attaches to one node: the pods of the pass placed elsewhere sit
    // in ContainerCreating (Multi-Attach error) until the others end.
    ['parallel pods of a PostgreSQL pass on a ReadWriteOnce volume', { parallelism: 3, config: { state: { postgres: { existingSecret: 'pg' } } } },
      /parallelism is 3 but persistence\.accessModes is \[ReadWriteOnce\][\s\S]*Multi-Attach[\s\S]*ReadWriteMany/],
    // The pod's user (65532) has no capabilities: on containerd 1.x (ip_unprivileged_port_start
    // 1024, as under podman) the bind fails with EACCES, cronsafe warns and serves nothing.
    ['a metrics port the non-root pod may not bind', { metrics: { enabled: true, port: 80, pushgateway: PGW } },
      /metrics\.port \(80\) is below 1024[\s\S]*ip_unprivileged_port_start[\s\S]*cannot serve \/metrics on this port/],
    ['a stale-fire window shorter than the starting deadline', { config: { schedule: { graceSeconds: 60 } }, scheduledTimestamp: { enabled: true } },
      /config\.schedule\.graceSeconds \(60\) is shorter than\s+startingDeadlineSeconds \(300\)/],
    // The first recipe above (kubectl create job --from) would be skipped as a stale fire:
    // without reading its Job, cronsafe cannot see kubectl's manual mark.
    ['a manual Job judged as a late fire', { config: { schedule: { graceSeconds: 600 } } },
      /graceSeconds is set and scheduledTimestamp\.enabled is false[\s\S]*more than\s+600 s after the latest occurrence logs "skipped: stale fire"[\s\S]*scheduledTimestamp\.enabled=true/],
    // Without its Job, a manual run's fire is the latest occurrence: after a fall-back's second
    // fire of a fixed-time schedule, that is the repeated one, and repeatedFire: skip refuses it.
    ['a manual Job judged as the repeated fall-back fire', { schedule: '30 1 * * *', timeZone: 'America/New_York', config: { schedule: { repeatedFire: 'skip' } } },
      /repeatedFire is skip and scheduledTimestamp\.enabled is false[\s\S]*"skipped:\s+second fire of the repeated fall-back hour"[\s\S]*scheduledTimestamp\.enabled=true/],
    // A healthy daily run that ends a little later than yesterday's leaves 24h + a bit since
    // the last success: with the default age of a day, that pages (promtool shows it).
    ['a no-success age within two intervals of a daily schedule', { schedule: '0 3 * * *', metrics: { pushgateway: PGW, prometheusRule: { enabled: true } } },
      /metrics\.prometheusRule\.noSuccessAgeSeconds \(86400\) is less than twice the longest time\s+between fires of "0 3 \* \* \*" \(at least 86400s\)[\s\S]*healthy[\s\S]*259200/],
    // Friday's run to Monday's is three days: the whole weekend would page.
    ['a no-success age within two intervals of a weekday schedule', { schedule: '15 6 * * 1-5', metrics: { pushgateway: PGW, prometheusRule: { enabled: true } } },
      /noSuccessAgeSeconds \(86400\) is less than twice the longest time\s+between fires of "15 6 \* \* 1-5"/],
    // Sub-daily schedules at a fixed interval: an age of one interval ("page when an hourly job
    // missed its hour") pages a healthy job every time a run ends later than the one before.
    ['a no-success age within two intervals of an hourly schedule', { schedule: '0 * * * *', metrics: { pushgateway: PGW, prometheusRule: { enabled: true, noSuccessAgeSeconds: 3600 } } },
      /noSuccessAgeSeconds \(3600\) is less than twice the longest time\s+between fires of "0 \* \* \* \*" \(at least 3600s\)[\s\S]*10800/],
    ['a no-success age within two intervals of an every-15-minutes schedule', { schedule: '*/15 * * * *', metrics: { pushgateway: PGW, prometheusRule: { enabled: true, noSuccessAgeSeconds: 1200 } } },
      /noSuccessAgeSeconds \(1200\) is less than twice the longest time\s+between fires of "\*\/15 \* \* \* \*" \(at least 900s\)/],
    ['a no-success age within two intervals of an every-6-hours schedule', { schedule: '0 */6 * * *', metrics: { pushgateway: PGW, prometheusRule: { enabled: true, noSuccessAgeSeconds: 30000 } } },
      /noSuccessAgeSeconds \(30000\) is less than twice the longest time\s+between fires of "0 \*\/6 \* \* \*" \(at least 21600s\)/],
    ['a no-success age shorter than a weekly schedule', { schedule: '@weekly', metrics: { pushgateway: PGW, prometheusRule: { enabled: true, noSuccessAgeSeconds: 172800 } } },
      /noSuccessAgeSeconds \(172800\) is less than twice the longest time\s+between fires of "@weekly" \(at least 604800s\)/],
  ])('warns about %s', (_what, values, warning) => {
    const text = notes(values);
    expect(text).toMatch(warning);
    expect(text.match(/WARNING/g)).toHaveLength(1);
  });

  it('does not warn about the no-success age when it fits the schedule, or when no rule is rendered', () => {
    for (const [schedule, noSuccessAgeSeconds] of [['*/15 * * * *', 86400], ['*/15 * * * *', 1800], ['0 */6 * * *', 86400], ['@hourly', 86400], ['5 * * * *', 7200], ['30 2 * * *', 259200], ['0 4 * * 1', 1900800], ['0 0 1 * *', 8035200]] as const) {
      const text = notes({ schedule, metrics: { pushgateway: PGW, prometheusRule: { enabled: true, noSuccessAgeSeconds } } });
      expect(text, schedule).not.toContain('WARNING');
    }
    expect(notes({ schedule: '@daily' })).not.toContain('WARNING');
  });

  it('does not warn about repeatedFire: skip when runs read their Job (a manual one is known as such)', () => {
    expect(notes({ schedule: '30 1 * * *', timeZone: 'America/New_York', config: { schedule: { repeatedFire: 'skip' } }, scheduledTimestamp: { enabled: true } })).not.toContain('WARNING');
  });

  it('does not warn about a Pushgateway URL without a password, or with one from the env', () => {
    for (const pushgateway of ['http://pushgateway:9091', 'https://ops@pgw.example.com', 'https://ops:${PUSHGATEWAY_PASSWORD}@pgw.example.com', 'http://pgw:9091/a:b@c']) {
      expect(notes({ metrics: { pushgateway } }), pushgateway).not.toContain('WARNING');
    }
  });

  it('does not warn about a PostgreSQL URL in extraEnv without a password, or with one from a Secret', () => {
    const envs = [
      [{ name: 'CRONSAFE_STATE_POSTGRES', value: 'postgres://app@db:5432/jobs?sslmode=require' }],
      // Kubernetes expands $(VAR) from the variables listed before it (a secretKeyRef).
      [{ name: 'DB_PASSWORD', valueFrom: { secretKeyRef: { name: 'pg', key: 'password' } } },
        { name: 'CRONSAFE_STATE_POSTGRES', value: 'postgres://app:$(DB_PASSWORD)@db:5432/jobs' }],
      [{ name: 'CRONSAFE_STATE_POSTGRES', valueFrom: { secretKeyRef: { name: 'pg', key: 'url' } } }],
    ];
    for (const extraEnv of envs) expect(notes({ extraEnv }), JSON.stringify(extraEnv)).not.toContain('WARNING');
  });

  it('does not warn about an absolute ledger path on the volume or on an extra volume mount', () => {
    expect(notes({ config: { state: { sqlite: '/data/elsewhere/x.db' } } })).not.toContain('WARNING');
    expect(notes({ config: { state: { sqlite: '/ledger/x.db' } }, extraVolumes: [{ name: 'l', emptyDir: {} }], extraVolumeMounts: [{ name: 'l', mountPath: '/ledger' }] })).not.toContain('config.state.sqlite');
  });

  // Without a PVC the data volume is an emptyDir, but a PostgreSQL ledger is not on it, nor
  // a source or output directory on an extra volume (an NFS share): the warning said "the
  // ledger, outputs and queue live in an emptyDir" whatever the config, sending the user
  // after a PVC that would hold nothing of theirs.
  it('without persistence, names only what is on the emptyDir: not a PostgreSQL ledger, nor a source or output on an extra volume', () => {
    const off = { enabled: false };
    const pg = { postgres: { existingSecret: 'pg' } };
    const shared = { extraVolumes: [{ name: 'shared', nfs: { server: 'nfs.example.com', path: '/exports' } }], extraVolumeMounts: [{ name: 'shared', mountPath: '/shared' }] };
    const onShare = { source: { directory: '/shared/queue' }, output: { directory: '/shared/out' } };
    expect(notes({ persistence: off })).toMatch(/persistence\.enabled is false: the ledger, the output directory and the queue are in an emptyDir/);
    expect(notes({ persistence: off, config: { state: pg } })).toMatch(/persistence\.enabled is false: the output directory and the queue are in an emptyDir/);
    expect(notes({ persistence: off, config: { state: pg, source: onShare.source }, ...shared })).toMatch(/persistence\.enabled is false: the output directory is in an emptyDir/);
    expect(notes({ persistence: off, config: { ...onShare }, ...shared })).toMatch(/persistence\.enabled is false: the ledger is in an emptyDir/);
    expect(notes({ persistence: off, config: { state: pg, ...onShare }, ...shared })).not.toContain('WARNING');
    // The ledger from extraEnv is PostgreSQL too.
    const url = [{ name: 'CRONSAFE_STATE_POSTGRES', valueFrom: { secretKeyRef: { name: 'pg', key: 'url' } } }];
    expect(notes({ persistence: off, config: { ...onShare }, extraEnv: url, ...shared })).not.toContain('WARNING');
  });

  it('does not warn about a ReadWriteMany volume with the PostgreSQL ledger (no SQLite file, no lock file)', () => {
    const text = notes({ persistence: { accessModes: ['ReadWriteMany'] }, config: { state: { postgres: { existingSecret: 'pg' } } } });
    expect(text).toContain('PostgreSQL ledger');
    expect(text).not.toContain('WARNING');
  });

  // The pods that join a PostgreSQL pass do not take the Lease (only the pod that started
  // the pass does: test/kube/lease-postgres.test.ts), so the Lease does not idle them.
  it('does not warn that the Lease idles the pods of a PostgreSQL pass: they join it without the Lease', () => {
    const text = notes({ parallelism: 4, lock: { kubernetesLease: { enabled: true } }, config: { state: { postgres: { existingSecret: 'pg' } } }, persistence: { accessModes: ['ReadWriteMany'] } });
    expect(text).toContain('PostgreSQL ledger');
    expect(text).not.toContain('WARNING');
  });

  it('says where the state may live: SQLite on a ReadWriteOnce volume, PostgreSQL for many pods', () => {
    const text = notes();
    expect(text).toMatch(/The ledger is SQLite, \/data\/state\/cronsafe\.db: keep it on a ReadWriteOnce\s+volume/);
    expect(text).toMatch(/On NFS, CephFS, SMB, EFS or a FUSE mount cronsafe exits 78/);
    expect(text).toContain('use PostgreSQL (config.state.postgres.existingSecret)');
    expect(text).toContain("The run lock is on the pod's /tmp emptyDir");
    expect(notes({ config: { state: { postgres: { existingSecret: 'pg' } } } })).not.toContain('The ledger is SQLite');
  });

  it('omits the status recipe when the status template is disabled', () => {
    expect(notes({ statusJob: { enabled: false } })).not.toContain('-status');
  });

  // A release name with a "." where the commands cut the name at 40: the Job names they
  // gave ended the cut in "." ("<39 chars>.-manual-..."), which kubectl create job refused.
  it('gives Job names kubectl takes when the cut at 40 ends in "."', () => {
    const release = `${'a'.repeat(39)}.bcd`;
    const r = helm(['install', release, CHART, '--dry-run=client', '--namespace', NAMESPACE, '--set', 'config.name=qc']);
    expect(r.status, r.stderr).toBe(0);
    const jobs = [...r.stdout.matchAll(/^ *JOB=(\S+)-\$\(date \+%s\)$/gm)].map((m) => `${m[1]}-1764000000`);
    // The status CronJob's name, cut with a hash (its full name is past 45), then at 40.
    expect(jobs).toEqual([`${'a'.repeat(39)}-manual-1764000000`, expect.stringMatching(new RegExp(`^${'a'.repeat(38)}-[0-9a-f]-1764000000$`))]);
    for (const job of jobs) expect(job).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/);
  });
});
