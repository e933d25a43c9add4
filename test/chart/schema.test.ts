import { beforeAll, describe, expect, it } from 'vitest';
import { CHART, ensureTools, helm, parseDocs, templateRaw } from './helpers.js';
import type { Values } from './value-sets.js';

beforeAll(ensureTools);

/**
 * [what, values, text the error must contain]. values.schema.json catches single values
 * (helm names the JSON path, e.g. /config/concurrency); cross-value rules are `fail`s in
 * _helpers.tpl (cronsafe.validate) that name the keys in values.yaml's dotted form.
 */
const BAD: [string, Values, string][] = [
  ['a missing schedule', { schedule: null }, "missing property 'schedule'"],
  ['an empty schedule', { schedule: '' }, '/schedule'],
  ['a TZ= prefix in the schedule', { schedule: 'TZ=UTC 0 * * * *' }, '/schedule'],
  ['a 4-field schedule', { schedule: '0 * * *' }, '/schedule'],
  ['a 6-field (seconds) schedule', { schedule: '0 0 * * * *' }, '/schedule'],
  // Sunday to cron and to cronsafe, not to the API server's cron parser (robfig/cron v3: 0-6),
  // which refused the CronJob after everything else was installed.
  ['an existing claim with persistence disabled (an emptyDir is mounted instead)', { persistence: { enabled: false, existingClaim: 'ledger' } }, 'persistence.existingClaim (ledger) is set but persistence.enabled is false'],
  ['day-of-week 7', { schedule: '0 0 * * 7' }, 'schedule "0 0 * * 7": day-of-week 7 (in "7") is refused by the Kubernetes API server, whose cron parser (robfig/cron v3) takes 0-6: write 0 for Sunday'],
  ['day-of-week 7 ending a range', { schedule: '0 0 * * 1,5-7' }, 'day-of-week 7 (in "5-7")'],
  ['day-of-week 7 starting a step', { schedule: '0 0 * * 7/2' }, 'write 0 for Sunday'],
  // What else the API server's parser refuses in a field the pattern lets through.
  ['minute 60', { schedule: '60 * * * *' }, 'the minute field\'s "60" has a value outside 0-59'],
  ['hour 24 in a list', { schedule: '0 6,24 * * *' }, 'the hour field\'s "24" has a value outside 0-23'],
  ['day-of-month 0', { schedule: '0 0 0 * *' }, 'the day-of-month field\'s "0" has a value outside 1-31'],
  ['month 13 as a range end', { schedule: '0 0 1 6-13 *' }, 'the month field\'s "6-13" has a value outside 1-12'],
  ['a name in the hour field', { schedule: '0 JAN * * *' }, 'the hour field\'s "JAN" has "JAN", which is no number'],
  ['an unknown day name', { schedule: '0 0 * * MON-FRY' }, '"FRY", which is no number nor a day-of-week name'],
  ['a range running backwards through Sunday', { schedule: '0 0 * * SAT-SUN' }, 'the day-of-week field\'s "SAT-SUN" has a range whose start is past its end'],
  ['a step of 0', { schedule: '*/0 * * * *' }, 'the minute field\'s "*/0" has a step of 0'],
  // The API server takes these and the CronJob never starts a Job (so no pod ever says why);
  // cronsafe refuses them as schedule.cron.
  ['a schedule that never fires (30 February)', { schedule: '0 0 30 2 *' }, 'schedule "0 0 30 2 *" never fires: no month it allows has a day of month it allows'],
  ['a schedule that never fires (31st of the short months, by name, with ?)', { schedule: '0 0 31 apr,jun,sep,nov ?' }, 'never fires'],
  ['a schedule that never fires (a day-of-week star with a step of 1, or in a list)', { schedule: '0 0 31 2 1,*/1' }, 'never fires'],
  ['a fixed-offset time zone', { timeZone: '+05:00' }, '/timeZone'],
  // The API server refuses it ("timeZone must be an explicit time zone"), naming spec.timeZone.
  ['the time zone Local', { timeZone: 'Local' }, '/timeZone'],
  // Zone names are case-sensitive to the API server (Go's time.LoadLocation) and to cronsafe;
  // every IANA name's parts start with a capital.
  ['a time zone in lower case', { timeZone: 'europe/london' }, '/timeZone'],
  ['a time zone part in lower case', { timeZone: 'America/new_York' }, '/timeZone'],
  ['concurrencyPolicy Allow', { concurrencyPolicy: 'Allow' }, '/concurrencyPolicy'],
  ['concurrencyPolicy Replace', { concurrencyPolicy: 'Replace' }, '/concurrencyPolicy'],
  ['a fractional grace period', { drain: { gracePeriodSeconds: 30.5 } }, '/drain/gracePeriodSeconds'],
  ['a zero grace period', { drain: { gracePeriodSeconds: 0 } }, '/drain/gracePeriodSeconds'],
  ['a margin equal to the grace', { drain: { gracePeriodSeconds: 20, marginSeconds: 20 } }, 'drain.marginSeconds (20) must be less than drain.gracePeriodSeconds (20)'],
  ['a negative margin', { drain: { marginSeconds: -1 } }, '/drain/marginSeconds'],
  // cronsafe exits 78 on it: its drain's last resort would exit with the kubelet's SIGKILL.
  ['a margin under a second', { drain: { marginSeconds: 0.5 } }, '/drain/marginSeconds'],
  ['a zero margin', { drain: { marginSeconds: 0 } }, '/drain/marginSeconds'],
  ['concurrency 0', { config: { concurrency: 0 } }, '/config/concurrency'],
  ['a string concurrency', { config: { concurrency: 'eight' } }, '/config/concurrency'],
  ['a source directory climbing out', { config: { source: { directory: '../etc' } } }, '/config/source/directory'],
  ['an absolute include glob', { config: { source: { include: ['/etc/**'] } } }, '/config/source/include/0'],
  ['an empty include list', { config: { source: { include: [] } } }, '/config/source/include'],
  // cronsafe refuses these (exit 78, every Job) as matching no item or every other file.
  ['an exclude glob ending in "/" (as .gitignore writes a directory)', { config: { source: { exclude: ['tmp/'] } } }, '/config/source/exclude/0'],
  ['an exclude glob ending in a lone backslash (as Windows writes a directory)', { config: { source: { exclude: ['tmp', 'cache\\'] } } }, '/config/source/exclude/1'],
  ['an include glob with a leading "!"', { config: { source: { include: ['**', '!bad.txt'] } } }, '/config/source/include/1'],
  ['an include glob that is a lone "!"', { config: { source: { include: ['!'] } } }, '/config/source/include/0'],
  ['a log level typo', { config: { log: { level: 'verbose' } } }, '/config/log/level'],
  ['retention.runs below the 20 status and the streak gauge read', { config: { retention: { runs: 5 } } }, '/config/retention/runs'],
  ['a fractional retention.days', { config: { retention: { days: 1.5 } } }, '/config/retention/days'],
  ['an unknown refresh', { config: { schedule: { refresh: 'always' } } }, '/config/schedule/refresh'],
  ['an unknown repeatedFire', { config: { schedule: { repeatedFire: 'twice' } } }, '/config/schedule/repeatedFire'],
  ['an uppercase name', { config: { name: 'Caption_QC' } }, '/config/name'],
  // A DNS subdomain, as the API server checks a Lease's name (422 at every run otherwise; cronsafe exits 78).
  ['a Lease name with an empty part between dots', { lock: { kubernetesLease: { enabled: true, name: 'qc..lease' } } }, '/lock/kubernetesLease/name'],
  ['a Lease name with a part ending in "-"', { lock: { kubernetesLease: { enabled: true, name: 'qc-.lease' } } }, '/lock/kubernetesLease/name'],
  // CREATE SCHEMA refuses pg_*, and pg_dump leaves information_schema out: cronsafe exits 78.
  ['a reserved ledger schema', { config: { state: { postgres: { existingSecret: 'pg-url', schema: 'pg_ledger' } } } }, '/config/state/postgres/schema'],
  ['information_schema as the ledger schema', { config: { state: { postgres: { existingSecret: 'pg-url', schema: 'information_schema' } } } }, '/config/state/postgres/schema'],
  ['a non-string handler env value', { config: { handler: { env: { RETRIES: 3 } } } }, '/config/handler/env/RETRIES'],
  ['a bad handler env name', { config: { handler: { env: { '1X': 'a' } } } }, '/config/handler/env'],
  ['renewal not shorter than the lease', { config: { lease: { seconds: 30, renewSeconds: 30 } } }, 'config.lease.renewSeconds (30) must be less than config.lease.seconds (30)'],
  ['a backoff ceiling below the first delay', { config: { retry: { backoffSeconds: 60, backoffMaxSeconds: 30 } } }, 'config.retry.backoffMaxSeconds (30) must be >= config.retry.backoffSeconds (60)'],
  ['both command and module', { config: { handler: { module: 'qc.mjs' } } }, 'set exactly one of config.handler.command and config.handler.module'],
  ['neither command nor module', { config: { handler: { command: [] } } }, 'set exactly one of config.handler.command and config.handler.module'],
  ['{output} without an output directory', { config: { output: { directory: '' } } }, 'config.handler.command uses {output} but config.output.directory is empty'],
  // cronsafe exits 78 on it at start-up: every Job would fail.
  // cronsafe exits 78 on it (outputs would become items): every Job would fail.
  ['the output directory being the source directory', { config: { output: { directory: 'queue' } } }, 'config.output.directory is config.source.directory itself (/data/queue)'],
  ['the output directory being the source directory, written differently', { config: { source: { directory: '/data/./in/' }, output: { directory: 'in' } } }, 'config.output.directory is config.source.directory itself (/data/in)'],
  // The same when it is inside the source and no source.exclude keeps the scan out of it.
  ['the output directory inside the source directory', { config: { output: { directory: 'queue/done' } } }, 'config.output.directory (/data/queue/done) is inside config.source.directory (/data/queue)'],
  ['the whole volume as the source, the default output on it', { config: { source: { directory: '/data' } } }, 'config.output.directory (/data/out) is inside config.source.directory (/data)'],
  // The SQLite ledger or lock file naming a directory init-dirs makes, or the lock on the
  // ledger: cronsafe exits 78 on each.
  ['the ledger at the source directory', { config: { state: { sqlite: 'queue' } } }, 'config.state.sqlite (/data/queue) is config.source.directory, a directory'],
  ['the ledger at the output directory', { config: { state: { sqlite: './out' } } }, 'config.state.sqlite (/data/out) is config.output.directory, a directory'],
  ['the lock at the source directory', { config: { lock: { path: '/data/queue' } } }, 'config.lock.path (/data/queue) is config.source.directory, a directory'],
  ['the lock on the ledger file', { config: { lock: { path: 'state/cronsafe.db' } } }, 'config.lock.path (/data/state/cronsafe.db) is the ledger file, config.state.sqlite'],
  // cronsafe adds /metrics/job/<name> and exits 78 on a URL that has it (every Job would fail).
  // Rendered twice in one mapping, which the install refused with a bare YAML error.
  // Rendered, then refused by the API server (a label value: at most 63 of [-A-Za-z0-9_.], a letter or digit at each end).
  ['a commonLabels value with a blank', { commonLabels: { team: 'media team' } }, '/commonLabels/team'],
  ['a commonLabels value ending in "-"', { commonLabels: { team: 'media-' } }, '/commonLabels/team'],
  ['a commonLabels value of 64 characters', { commonLabels: { team: 'a'.repeat(64) } }, '/commonLabels/team'],
  ['a commonLabels value with "/"', { commonLabels: { owner: 'media/qc' } }, '/commonLabels/owner'],
  ['a commonLabels key with two "/"', { commonLabels: { 'example.com/a/b': 'x' } }, 'commonLabels: "example.com/a/b" is not a Kubernetes label key'],
  ['a commonLabels key with a blank', { commonLabels: { 'my team': 'x' } }, 'commonLabels: "my team" is not a Kubernetes label key'],
  ['a podLabels key of 64 characters', { podLabels: { ['k'.repeat(64)]: 'x' } }, `podLabels: "${'k'.repeat(64)}" is not a Kubernetes label key`],
  ['a PrometheusRule label key with an uppercase prefix', { metrics: { prometheusRule: { enabled: true, labels: { 'Example.com/x': 'prom' } } } }, 'metrics.prometheusRule.labels: "Example.com/x" is not a Kubernetes label key'],
  ['a podLabels value with ":"', { podLabels: { at: '12:00' } }, '/podLabels/at'],
  ['a PodMonitor label value with a blank', { metrics: { enabled: true, podMonitor: { enabled: true, labels: { release: 'kube prom' } } } }, '/metrics/podMonitor/labels/release'],
  ['a PrometheusRule label value with a blank', { metrics: { prometheusRule: { enabled: true, labels: { release: 'kube prom' } } } }, '/metrics/prometheusRule/labels/release'],
  // Not a Secret name (a DNS subdomain): the pods failed to start (CreateContainerConfigError).
  ['a ledger Secret name with an empty part between dots', { config: { state: { postgres: { existingSecret: 'a..b' } } } }, '/config/state/postgres/existingSecret'],
  ['a ledger Secret name with a part ending in "-"', { config: { state: { postgres: { existingSecret: 'pg-.url' } } } }, '/config/state/postgres/existingSecret'],
  ['a ledger Secret name with a part starting with "-"', { config: { state: { postgres: { existingSecret: 'pg.-url' } } } }, '/config/state/postgres/existingSecret'],
  ['a pod label the chart sets', { podLabels: { 'app.kubernetes.io/component': 'qc' } }, 'podLabels: app.kubernetes.io/component is a label the chart sets itself'],
  ['a common label the chart sets', { commonLabels: { 'app.kubernetes.io/name': 'qc' } }, 'commonLabels: app.kubernetes.io/name is a label the chart sets itself'],
  // The same for the PodMonitor's and PrometheusRule's extra labels, beside the chart's and commonLabels.
  ['a PodMonitor label also in commonLabels', { commonLabels: { release: 'prom' }, metrics: { enabled: true, podMonitor: { enabled: true, labels: { release: 'prom' } } } }, 'metrics.podMonitor.labels: release is also in commonLabels, which go on the PodMonitor too'],
  ['a PrometheusRule label also in commonLabels', { commonLabels: { release: 'prom' }, metrics: { prometheusRule: { enabled: true, labels: { release: 'prom' } } } }, 'metrics.prometheusRule.labels: release is also in commonLabels, which go on the PrometheusRule too'],
  ['a PodMonitor label the chart sets', { metrics: { enabled: true, podMonitor: { enabled: true, labels: { 'app.kubernetes.io/instance': 'prom' } } } }, 'metrics.podMonitor.labels: app.kubernetes.io/instance is a label the chart sets itself'],
  // Root with runAsNonRoot (values.yaml sets it in both contexts): the API server took it, the
  // kubelet refused to start the containers (CreateContainerConfigError), and the pod waited
  // forever: a Job that never ended, and Forbid started no later run.
  ['runAsUser 0 with the default runAsNonRoot', { securityContext: { runAsUser: 0 } }, 'securityContext.runAsUser is 0 (root) and securityContext.runAsNonRoot is true: the kubelet refuses to start the containers'],
  ['the pod\'s runAsUser 0, the container\'s removed', { podSecurityContext: { runAsUser: 0 }, securityContext: { runAsUser: null } }, 'podSecurityContext.runAsUser is 0 (root) and securityContext.runAsNonRoot is true'],
  ['runAsUser 0 with runAsNonRoot left on the pod', { podSecurityContext: { runAsUser: 0 }, securityContext: { runAsUser: null, runAsNonRoot: null } }, 'podSecurityContext.runAsUser is 0 (root) and podSecurityContext.runAsNonRoot is true'],
  ['the PVC\'s keep annotation given again', { persistence: { annotations: { 'helm.sh/resource-policy': 'keep' } } }, 'persistence.annotations: helm.sh/resource-policy is the annotation persistence.keep sets'],
  // The chart's PVC holds the ledger and outputs: a ReadOnlyMany-only claim is mounted
  // read-only by CSI drivers (or never provisioned), and every pod failed (EROFS) or waited.
  ['a created PVC that can only be read', { persistence: { accessModes: ['ReadOnlyMany'] } }, 'persistence.accessModes (ReadOnlyMany) has no ReadWrite mode, and the SQLite ledger (config.state.sqlite) and the outputs (config.output.directory) must be written on the data volume'],
  ['the config checksum given as a pod annotation', { podAnnotations: { 'checksum/config': 'x' } }, 'podAnnotations: checksum/config is an annotation the chart sets itself'],
  ['a pushgateway URL with the push path', { metrics: { pushgateway: 'http://pushgateway.monitoring:9091/metrics/job/captions' } }, 'metrics.pushgateway: give the Pushgateway\'s base URL'],
  ['a pushgateway URL with the base64 push path', { metrics: { pushgateway: 'http://pushgateway.monitoring:9091/metrics/job@base64/Y2FwdGlvbnM' } }, 'metrics.pushgateway: give the Pushgateway\'s base URL'],
  ['expectOutput without an output directory', { config: { handler: { command: ['true'], expectOutput: true }, output: { directory: '' } } }, 'config.handler.expectOutput needs config.output.directory'],
  ['an unknown config key', { config: { concurrancy: 4 } }, "additional properties 'concurrancy' not allowed"],
  ['an unknown top-level key', { schedul: '* * * * *' }, "additional properties 'schedul' not allowed"],
  ['a PodMonitor without metrics', { metrics: { podMonitor: { enabled: true } } }, 'metrics.podMonitor.enabled needs metrics.enabled'],
  ['a pushgateway without a scheme', { metrics: { pushgateway: 'pushgateway:9091' } }, '/metrics/pushgateway'],
  // cronsafe refuses both (exit 78): the push client drops them, so a ?token= never arrived.
  ['a pushgateway with a query string', { metrics: { pushgateway: 'http://pushgateway:9091/?token=abc' } }, '/metrics/pushgateway'],
  ['a pushgateway with a fragment', { metrics: { pushgateway: 'http://pushgateway:9091/#x' } }, '/metrics/pushgateway'],
  ['a bad pull policy', { image: { pullPolicy: 'Sometimes' } }, '/image/pullPolicy'],
  // null in a values file deletes the chart's default ("use cronsafe's own default", a user
  // may think); the ConfigMap then says `concurrency: null`, which cronsafe refuses with exit
  // 78 in every Job. The schema refuses it at install instead, naming the key.
  ['a null concurrency', { config: { concurrency: null } }, "at '/config': missing property 'concurrency'"],
  ['a null handler timeout', { config: { handler: { timeoutSeconds: null } } }, "at '/config/handler': missing property 'timeoutSeconds'"],
  ['a null include list', { config: { source: { include: null } } }, "at '/config/source': missing property 'include'"],
  ['a null maxAttempts', { config: { retry: { maxAttempts: null } } }, "at '/config/retry': missing property 'maxAttempts'"],
  ['a null lease duration', { config: { lease: { seconds: null } } }, "at '/config/lease': missing property 'seconds'"],
  ['a null retention', { config: { retention: { runs: null } } }, "at '/config/retention': missing property 'runs'"],
  ['a null refresh policy', { config: { schedule: { refresh: null } } }, "at '/config/schedule': missing property 'refresh'"],
  ['a null log level', { config: { log: { level: null } } }, "at '/config/log': missing property 'level'"],
  ['a null ledger schema', { config: { state: { postgres: { existingSecret: 'pg-url', schema: null } } } }, "at '/config/state/postgres': missing property 'schema'"],
  ['a null push interval', { metrics: { pushgateway: 'http://pushgateway:9091', pushIntervalSeconds: null } }, "at '/metrics': missing property 'pushIntervalSeconds'"],
  // Rendered as repo:<tag>, these are no image reference: the kubelet leaves the pod in
  // InvalidImageName, a Job that never fails, and Forbid then starts no other run.
  ['a tag with a leading colon', { image: { tag: ':0.1.0' } }, '/image/tag'],
  ['a digest in the tag', { image: { tag: `sha256:${'a'.repeat(64)}` } }, '/image/tag'],
  ['a tag with a space', { image: { tag: '0.1.0 ' } }, '/image/tag'],
  ['a tag starting with a dot', { image: { tag: '.1' } }, '/image/tag'],
  ['a tag over 128 characters', { image: { tag: 'a'.repeat(129) } }, '/image/tag'],
  ['a tiny starting deadline', { startingDeadlineSeconds: 5 }, '/startingDeadlineSeconds'],
  // Every fire would be refused as stale (exit 0), silently, forever: cronsafe exits 78 too.
  ['a stale-fire window of 0', { config: { schedule: { graceSeconds: 0 } } }, '/config/schedule/graceSeconds'],
  // The API server takes any claimName: the pod waited forever for a PVC no name can have,
  // a Job that never ended, and Forbid started no later run.
  ['an existing claim name no PVC can have', { persistence: { existingClaim: 'Caption_Ledger' } }, "at '/persistence/existingClaim': 'Caption_Ledger' does not match"],
  // The templates read .name and .mountPath of each entry: a string (as `FOO=bar`) failed with
  // "can't evaluate field name in type interface {}", naming neither the key nor the entry.
  ['an extraEnv entry written as a string', { extraEnv: ['FOO=bar'] }, "at '/extraEnv/0': got string, want object"],
  ['an extraVolumeMounts entry written as a string', { extraVolumeMounts: ['/inbox'] }, "at '/extraVolumeMounts/0': got string, want object"],
  ['an extraVolumeMounts entry without a mountPath', { extraVolumes: [{ name: 'inbox', emptyDir: {} }], extraVolumeMounts: [{ name: 'inbox' }] }, "at '/extraVolumeMounts/0': missing property 'mountPath'"],
  // `m` is milli: 512m of memory is half a byte (Kubernetes' docs warn of it). The API server
  // takes it; the runtime then cannot start the container under a 1-byte limit (StartError,
  // every pod, backoffLimit times), and a 128m request reserves nothing.
  ['a memory limit in millibytes (512m for 512Mi)', { resources: { limits: { memory: '512m' } } }, "at '/resources/limits/memory'"],
  ['a memory request in millibytes (128m for 128Mi)', { resources: { requests: { memory: '128m' } } }, "at '/resources/requests/memory'"],
  ['a quantity that is no quantity', { resources: { limits: { cpu: '1 core' } } }, "at '/resources/limits/cpu'"],
  // Not requests or limits: the API server refused the CronJob naming the rendered path only.
  ['a resources typo (limit for limits)', { resources: { limit: { memory: '1Gi' } } }, "at '/resources'"],
  // An env value is a string: a number (PGPORT: 5432) failed the install with "cannot
  // unmarshal number into Go struct field EnvVar...", naming no value.
  ['an extraEnv value that is a number', { extraEnv: [{ name: 'PGPORT', value: 5432 }] }, "at '/extraEnv/0/value'"],
  // A variable the chart sets itself, given again: Kubernetes keeps the last, so cronsafe
  // planned its drain for 300s while the kubelet's SIGKILL came at 150 (the pod's grace); the
  // API server only warns "duplicate name".
  ['the drain grace given again in extraEnv', { extraEnv: [{ name: 'CRONSAFE_DRAIN_GRACE_SECONDS', value: '300' }] },
    'extraEnv: CRONSAFE_DRAIN_GRACE_SECONDS is set by the chart (from drain.gracePeriodSeconds'],
  ['the config path given again in extraEnv', { extraEnv: [{ name: 'CRONSAFE_CONFIG', value: '/data/mine.yaml' }] },
    'extraEnv: CRONSAFE_CONFIG is set by the chart'],
  ['the pod name given again in extraEnv', { extraEnv: [{ name: 'CRONSAFE_POD_NAME', value: 'x' }] },
    'extraEnv: CRONSAFE_POD_NAME is set by the chart'],
  ['the ledger URL both from existingSecret and in extraEnv', { config: { state: { postgres: { existingSecret: 'pg' } } }, extraEnv: [{ name: 'CRONSAFE_STATE_POSTGRES', valueFrom: { secretKeyRef: { name: 'other', key: 'url' } } }] },
    'extraEnv: CRONSAFE_STATE_POSTGRES is set by the chart (from config.state.postgres.existingSecret'],
  // A fixed run group is every Job's: a Job started while another ran (kubectl create job
  // --from, concurrencyPolicy Allow) joined the running pass instead of being kept out.
  ['a fixed CRONSAFE_RUN_GROUP in extraEnv', { extraEnv: [{ name: 'CRONSAFE_RUN_GROUP', value: 'nightly' }] },
    'extraEnv: CRONSAFE_RUN_GROUP has a fixed value (nightly), the same for every Job of this CronJob'],
  // The API server refused the CronJob ("volumes[3].name: Duplicate value") naming the rendered path.
  ['an extra volume named like the chart\'s data volume', { extraVolumes: [{ name: 'data', emptyDir: {} }], extraVolumeMounts: [{ name: 'data', mountPath: '/inbox' }] },
    'extraVolumes[0].name: data is the name of a volume the chart mounts itself (config, data, tmp); give it another name'],
  ['a relative mountPath', { persistence: { mountPath: 'data' } }, '/persistence/mountPath'],
  // A volume at the path of one of the chart's own mounts: the API server refused the
  // CronJob ("must be unique") naming a rendered path, not the value.
  ['the volume mounted at /tmp, the chart\'s emptyDir', { persistence: { mountPath: '/tmp' } }, 'persistence.mountPath (/tmp) is where the chart mounts the /tmp emptyDir'],
  ['the volume mounted at /etc/cronsafe, the config', { persistence: { mountPath: '/etc/cronsafe' } }, 'persistence.mountPath (/etc/cronsafe) is where the chart mounts the config'],
  ['an extra volume mounted at /tmp', { extraVolumes: [{ name: 'scratch', emptyDir: {} }], extraVolumeMounts: [{ name: 'scratch', mountPath: '/tmp' }] }, 'extraVolumeMounts[0].mountPath (/tmp) is where the chart mounts the /tmp emptyDir'],
  ['an extra volume mounted at the data volume\'s path', { persistence: { enabled: false }, extraVolumes: [{ name: 'mine', emptyDir: {} }], extraVolumeMounts: [{ name: 'mine', mountPath: '/data' }] }, 'extraVolumeMounts[0].mountPath (/data) is where the chart mounts the data volume (persistence.mountPath)'],
  // A volume over what the container runs from: installed cleanly, and every pod failed
  // (node: Cannot find module '/app/dist/cli.js', exit 1; or no tini to exec).
  ['the volume mounted at /app, over the program', { persistence: { mountPath: '/app' } }, "persistence.mountPath (/app) would hide /app/dist, cronsafe's program, under a volume"],
  ['the volume mounted at /', { persistence: { mountPath: '/' } }, 'persistence.mountPath (/) would hide'],
  ['the volume mounted at /usr/local, over node', { persistence: { mountPath: '/usr/./local' } }, 'persistence.mountPath (/usr/local) would hide /usr/local/bin, node, under a volume'],
  ['the volume mounted at /lib, a link into /usr', { persistence: { mountPath: '/lib' } }, 'persistence.mountPath (/lib) would hide /lib, the system libraries'],
  ['an extra volume over the program\'s modules', { extraVolumes: [{ name: 'code', emptyDir: {} }], extraVolumeMounts: [{ name: 'code', mountPath: '/srv/code' }, { name: 'code', mountPath: '/app/node_modules' }] }, "extraVolumeMounts[1].mountPath (/app/node_modules) would hide /app/node_modules, cronsafe's modules"],
  // A volume inside a read-only one with no directory there: installed cleanly, and the
  // runtime could not make the mount point (runc: "mkdir ...: read-only file system"), so
  // every pod waited in CreateContainerError, a Job that never ended, and Forbid started no
  // later run.
  ['the volume mounted inside /etc/cronsafe, the config', { persistence: { mountPath: '/etc/cronsafe/data' } },
    'persistence.mountPath (/etc/cronsafe/data) is inside /etc/cronsafe, where the chart mounts the config (cronsafe.yaml), a read-only ConfigMap volume'],
  ['a Secret mounted inside /etc/cronsafe', { extraVolumes: [{ name: 'creds', secret: { secretName: 'qc-creds' } }], extraVolumeMounts: [{ name: 'creds', mountPath: '/etc/cronsafe/creds' }] },
    'extraVolumeMounts[0].mountPath (/etc/cronsafe/creds) is inside /etc/cronsafe'],
  ['a volume mounted inside an extra Secret volume', { extraVolumes: [{ name: 'creds', secret: { secretName: 'qc-creds' } }, { name: 'tls', secret: { secretName: 'qc-tls' } }], extraVolumeMounts: [{ name: 'creds', mountPath: '/etc/qc' }, { name: 'tls', mountPath: '/etc/qc/tls' }] },
    'extraVolumeMounts[1].mountPath (/etc/qc/tls) is inside /etc/qc, extraVolumeMounts[0].mountPath, a secret volume (extraVolumes creds)'],
  ['a volume mounted inside the config volume mounted again', { extraVolumes: [{ name: 'scratch', emptyDir: {} }], extraVolumeMounts: [{ name: 'config', mountPath: '/srv/cfg' }, { name: 'scratch', mountPath: '/srv/cfg/x' }] },
    'extraVolumeMounts[1].mountPath (/srv/cfg/x) is inside /srv/cfg'],
  ['a volume mounted inside an emptyDir mounted readOnly', { extraVolumes: [{ name: 'results', emptyDir: {} }], extraVolumeMounts: [{ name: 'results', mountPath: '/results', readOnly: true }, { name: 'results', mountPath: '/results/qc' }] },
    'extraVolumeMounts[1].mountPath (/results/qc) is inside /results, extraVolumeMounts[0].mountPath, an emptyDir (extraVolumes results) mounted readOnly'],
  // With the read-only root file system, a path cronsafe writes on no volume (or a read-only
  // one): installed cleanly, and every run failed with EROFS (exit 1); NOTES said of such a
  // ledger that it was "lost after every run".
  ['the SQLite ledger on the read-only root file system', { config: { state: { sqlite: '/var/lib/cronsafe/cronsafe.db' } } }, 'config.state.sqlite (/var/lib/cronsafe/cronsafe.db) is on no volume, and the container\'s root file system is read-only'],
  ['the output directory on the read-only root file system', { config: { output: { directory: '/results' } } }, 'config.output.directory (/results) is on no volume'],
  ['the lock file on the read-only root file system', { config: { lock: { path: '/run/cronsafe.lock' } } }, 'config.lock.path (/run/cronsafe.lock) is on no volume'],
  ['the output directory on a volume mounted readOnly', { config: { output: { directory: '/results/qc' } }, extraVolumes: [{ name: 'results', emptyDir: {} }], extraVolumeMounts: [{ name: 'results', mountPath: '/results', readOnly: true }] }, 'config.output.directory (/results/qc) is on an extraVolumeMounts entry with readOnly: true'],
  ['the output directory beside a mount whose name starts with it', { config: { output: { directory: '/results2' } }, extraVolumes: [{ name: 'results', emptyDir: {} }], extraVolumeMounts: [{ name: 'results', mountPath: '/results' }] }, 'config.output.directory (/results2) is on no volume'],
  // cronsafe refuses each of these at start-up (exit 78), so every Job failed after the
  // install succeeded: a ledger or lock path naming a directory, and globs that match nothing.
  ['a ledger path ending in "/"', { config: { state: { sqlite: 'state/' } } }, "at '/config/state/sqlite': 'state/' does not match"],
  ['a ledger path ending in "/."', { config: { state: { sqlite: 'state/.' } } }, "at '/config/state/sqlite': 'state/.' does not match"],
  ['an absolute ledger path ending in "/"', { config: { state: { sqlite: '/var/lib/cronsafe/' } } }, '/config/state/sqlite'],
  ['a ledger path "."', { config: { state: { sqlite: '.' } } }, '/config/state/sqlite'],
  ['a lock path ending in "/"', { config: { lock: { path: 'locks/' } } }, "'locks/' does not match"],
  ['a lock path ending in "/."', { config: { lock: { path: 'locks/.' } } }, "'locks/.' does not match"],
  ['an include glob ending in "/"', { config: { source: { include: ['csv/'] } } }, '/config/source/include/0'],
  ['an exclude glob ending in "/"', { config: { source: { exclude: ['tmp/'] } } }, '/config/source/exclude/0'],
  ['an exclude glob ending in a lone backslash', { config: { source: { exclude: ['tmp\\'] } } }, "at '/config/source/exclude/0': 'tmp\\' does not match"],
  ['an include glob ending in an odd run of backslashes', { config: { source: { include: ['a\\\\\\'] } } }, '/config/source/include/0'],
  ['an exclude glob with a leading "!"', { config: { source: { exclude: ['!*.tmp'] } } }, "'!*.tmp' does not match"],
  ['an include glob with a leading "!!"', { config: { source: { include: ['!!x'] } } }, '/config/source/include/0'],
  // The API server refuses such a name only at apply time (helm install's last step).
  ['an env name with "="', { extraEnv: [{ name: 'MODE=fast', value: 'x' }] }, "at '/extraEnv/0/name'"],
  ['an env name with a space', { extraEnv: [{ name: 'A', value: '1' }, { name: 'MY VAR', value: 'x' }] }, "at '/extraEnv/1/name'"],
  // Kubernetes keeps the last of two, silently dropping the first.
  ['an env name given twice', { extraEnv: [{ name: 'MODE', value: 'a' }, { name: 'MODE', value: 'b' }] }, 'extraEnv: MODE is given twice'],
  // It wins over the Job's scheduled-timestamp annotation: every Job would run for one occurrence.
  ['a fixed CRONSAFE_SCHEDULED_TIME', { extraEnv: [{ name: 'CRONSAFE_SCHEDULED_TIME', value: '2026-01-01T00:00:00Z' }] }, 'extraEnv: CRONSAFE_SCHEDULED_TIME has a fixed value (2026-01-01T00:00:00Z)'],
  // A misspelt field rendered into the pod spec, and the API server dropped it (unknown field).
  ['a misspelt container securityContext field', { securityContext: { readOnlyRootFileSystem: false } }, "at '/securityContext': additional properties 'readOnlyRootFileSystem' not allowed"],
  ['a misspelt pod securityContext field', { podSecurityContext: { fsgroup: 1000 } }, "at '/podSecurityContext': additional properties 'fsgroup' not allowed"],
  ['a glob too long for the scan to compile', { config: { source: { exclude: ['a'.repeat(65_537)] } } }, "at '/config/source/exclude/0': maxLength"],
  // A LocalObjectReference has only `name`: other keys went into the pod spec, where the
  // API server drops them (unknown field); an empty name rendered a pull secret no Secret has.
  ['an imagePullSecrets entry with a key beside name', { imagePullSecrets: [{ name: 'regcred', namespace: 'registry' }] }, "at '/imagePullSecrets/0': additional properties 'namespace' not allowed"],
  ['an imagePullSecrets entry with an empty name', { imagePullSecrets: [{ name: 'regcred' }, { name: '' }] }, "at '/imagePullSecrets/1/name'"],
  ['an empty imagePullSecrets name as a string', { imagePullSecrets: [''] }, "at '/imagePullSecrets/0'"],
  ['an imagePullSecrets name no Secret can have', { imagePullSecrets: ['Reg_Cred'] }, "at '/imagePullSecrets/0': 'Reg_Cred' does not match"],
];

describe('bad values fail `helm template` with a message naming the value', () => {
  it.each(BAD)('%s', (_what, values, message) => {
    const r = templateRaw(values);
    expect(r.status, `expected failure, got:\n${r.stdout.slice(0, 400)}`).not.toBe(0);
    expect(r.stderr).toContain(message);
  });
});

describe('good edge values are accepted', () => {
  it.each<[string, Values]>([
    ['every @macro', { schedule: '@midnight' }],
    // Nothing written on the data volume: a PostgreSQL pass whose handler reads the source there and writes elsewhere.
    ['a read-only PVC for the source of a PostgreSQL pass without outputs', { persistence: { accessModes: ['ReadOnlyMany'] }, config: { state: { postgres: { existingSecret: 'pg' } }, output: { directory: '' }, handler: { command: ['upload', '{path}'] } } }],
    ['a run group from the pod\'s labels (valueFrom), not a fixed value', { extraEnv: [{ name: 'CRONSAFE_RUN_GROUP', valueFrom: { fieldRef: { fieldPath: "metadata.labels['batch.kubernetes.io/controller-uid']" } } }] }],
    ['quantities as Kubernetes writes them', { resources: { requests: { cpu: 0.5, memory: '1G', 'ephemeral-storage': '1Gi', 'nvidia.com/gpu': 1 }, limits: { cpu: '1500m', memory: 1073741824 } } }],
    ['names and steps in the schedule', { schedule: '0 9-17/2 * JAN-MAR MON-FRI' }],
    // Fires: 29 February in leap years; with both day fields restricted, robfig also fires
    // on the days of the week (a step of 2 clears its star bit); a step reaching a short day.
    ['schedules on rare days that still fire', { schedule: '0 0 29 2 *' }],
    ['30 February or Mondays', { schedule: '0 0 30 2 1' }],
    ['31 February or every other weekday', { schedule: '0 0 31 2 */2' }],
    ['the 1st and 31st of February', { schedule: '0 0 1-31/30 2 *' }],
    // What robfig/cron v3 takes: Sunday as 0 or sun, N/step up to the field's end, `?`,
    // leading zeros, a step past the field.
    ['schedules the API server\'s cron parser takes', { schedule: '00,30 0-23/25 ? 1/1 sun,6/1' }],
    ['a zone with an offset-like name', { timeZone: 'Etc/GMT+5' }],
    ['zones with three parts, hyphens and digits', { timeZone: 'America/Argentina/ComodRivadavia' }],
    ['a zone with hyphens', { timeZone: 'America/Port-au-Prince' }],
    ['a zone with digits and no region', { timeZone: 'EST5EDT' }],
    ['a fractional margin and timeouts', { drain: { gracePeriodSeconds: 20, marginSeconds: 2.5 }, config: { handler: { timeoutSeconds: 0.5 } } }],
    ['a hidden directory that is not ..', { config: { source: { directory: '.inbox/..x' } } }],
    ['ledger and lock files under "." and "//" segments, named ".db" and "..x"', { config: { state: { sqlite: './state//.db' }, lock: { path: 'locks/./..x' } } }],
    ['globs ending in an escaped backslash, an extglob "!(...)", a leading "./"', { config: { source: { include: ['a\\\\', './**', '././x'], exclude: ['!(*.csv)', 'x/..y'] } } }],
    // PostgreSQL ignores both (CRONSAFE_STATE_POSTGRES, from the Secret or extraEnv).
    ['a ledger and lock naming the source directory, with PostgreSQL', { config: { state: { sqlite: 'queue', postgres: { existingSecret: 'pg-url' } }, lock: { path: 'queue' } } }],
    ['a ledger naming the output directory, with PostgreSQL from extraEnv', { config: { state: { sqlite: 'out' } }, extraEnv: [{ name: 'CRONSAFE_STATE_POSTGRES', value: 'postgres://db/jobs' }] }],
    ['a glob of 65,536 characters', { config: { source: { exclude: ['a'.repeat(65_536)] } } }],
    ['an absolute source directory', { config: { source: { directory: '/mnt/inbox' } } }],
    // Beside the program, under the /tmp emptyDir, in /etc, in /dev: no mount the pod needs is hidden.
    ['volumes mounted beside what the pod needs', { persistence: { mountPath: '/app/data' }, extraVolumes: [{ name: 'shm', emptyDir: { medium: 'Memory' } }, { name: 'scratch', emptyDir: {} }, { name: 'certs', emptyDir: {} }], extraVolumeMounts: [{ name: 'shm', mountPath: '/dev/shm' }, { name: 'scratch', mountPath: '/tmp/scratch' }, { name: 'certs', mountPath: '/etc/ssl/private' }] }],
    // Writable: the volume, the /tmp emptyDir, the runtime's /dev/shm, the deepest of nested mounts, a writable root file system.
    // (A claim mounted readOnly may hold the directory a mount inside it needs.)
    ['written paths on writable volumes', { config: { output: { directory: '/results/qc' }, state: { sqlite: '/tmp/ledger/cronsafe.db' }, lock: { path: '/dev/shm/qc.lock' } }, extraVolumes: [{ name: 'results', persistentVolumeClaim: { claimName: 'results' } }], extraVolumeMounts: [{ name: 'results', mountPath: '/results', readOnly: true }, { name: 'results', mountPath: '/results/qc' }] }],
    // Inside a ConfigMap volume whose items make that directory, beside /etc/cronsafe, inside /tmp.
    ['volumes mounted inside volumes that have the directory, or beside the config', { extraVolumes: [{ name: 'qc', configMap: { name: 'qc', items: [{ key: 'rules', path: 'rules/qc.yaml' }] } }, { name: 'scratch', emptyDir: {} }], extraVolumeMounts: [{ name: 'qc', mountPath: '/etc/qc' }, { name: 'scratch', mountPath: '/etc/qc/rules' }, { name: 'scratch', mountPath: '/etc/cronsafe-creds' }, { name: 'scratch', mountPath: '/tmp/work' }] }],
    ['a ledger off the volumes with a writable root file system', { config: { state: { sqlite: '/var/lib/cronsafe/cronsafe.db' } }, securityContext: { readOnlyRootFilesystem: false } }],
    // PostgreSQL ignores state.sqlite and lock.path (no ledger file, no lock file).
    ['a ledger and lock path off the volumes, with PostgreSQL', { config: { state: { sqlite: '/var/lib/cronsafe/cronsafe.db', postgres: { existingSecret: 'pg-url' } }, lock: { path: '/run/qc.lock' } } }],
    // cronsafe takes it when source.exclude keeps the scan out of it (it checks the globs).
    ['an output directory inside the source, excluded from the scan', { config: { output: { directory: 'queue/done' }, source: { exclude: ['done/**'] } } }],
    ['an output directory beside the source whose name starts with it', { config: { source: { directory: 'queue' }, output: { directory: 'queue-out' } } }],
    // An extglob `!(...)`, a `!` later in the glob, an escaped backslash (an id's `\\`) at the end.
    ['globs cronsafe takes with a "!" or a backslash', { config: { source: { include: ['!(*.tmp)', 'a/!b', '[!.]*'], exclude: ['back\\\\', 'x\\*'] } } }],
    ['a pushgateway under a path, with a port and a trailing slash', { metrics: { pushgateway: 'https://metrics.example.com:8443/pgw/' } }],
    // Root when runAsNonRoot is off where it applies; the pod's runAsUser 0 under the container's own user.
    ['runAsUser 0 with runAsNonRoot false', { securityContext: { runAsUser: 0, runAsNonRoot: false } }],
    ['the pod\'s runAsUser 0, the container\'s 65532', { podSecurityContext: { runAsUser: 0 } }],
    // component is not among the PodMonitor's own labels; keys distinct from commonLabels.
    ['PodMonitor and PrometheusRule labels beside commonLabels', { commonLabels: { team: 'media' }, metrics: { enabled: true, podMonitor: { enabled: true, labels: { release: 'prom', 'app.kubernetes.io/component': 'metrics' } }, prometheusRule: { enabled: true, labels: { release: 'prom' } } } }],
    ['an existing claim with a dot in its name', { persistence: { existingClaim: 'caption-ledger.v2' } }],
    ['label values the API server takes: empty, "_" and "." inside, 63 characters; keys with a prefix', { commonLabels: { 'example.com/team': 'media_qc.v2', empty: '', long: `a${'-'.repeat(61)}z` }, podLabels: { 'tier.example.com/x': 'A' } }],
    ['a ledger Secret name with dots', { config: { state: { postgres: { existingSecret: 'pg.url-1.v2' } } } }],
    ['the keep annotation given by hand with persistence.keep false', { persistence: { keep: false, annotations: { 'helm.sh/resource-policy': 'keep' } } }],
    ['env names with ".", "-" and "_" (taken by every Kubernetes version)', { extraEnv: [{ name: 'com.example.mode', value: 'a' }, { name: 'X-Trace_id', value: 'b' }] }],
    ['every securityContext field Kubernetes has', { podSecurityContext: { supplementalGroups: [1000], supplementalGroupsPolicy: 'Strict', sysctls: [], seLinuxOptions: { level: 's0:c1' }, seLinuxChangePolicy: 'MountOption', appArmorProfile: { type: 'RuntimeDefault' } }, securityContext: { procMount: 'Default', seLinuxOptions: { level: 's0:c1' }, appArmorProfile: { type: 'RuntimeDefault' } } }],
    ['tags a registry takes', { image: { tag: 'v0.2.0-rc.1_build.7' } }],
    ['a tag pinned to its digest (repo:tag@digest is a valid reference)', { image: { tag: `0.1.0@sha256:${'0'.repeat(64)}` } }],
  ])('%s', (_what, values) => {
    const r = templateRaw(values);
    expect(r.status, r.stderr).toBe(0);
  });
});

describe('a release name that is no cronsafe job name', () => {
  // Helm takes a dot in a release name; cronsafe's name does not. The chart said
  // `config.name "qc.v2-cronsafe": expected ...` of a key the user never set.
  it('says config.name defaults to it, and to set config.name', () => {
    const r = helm(['template', 'qc.v2', CHART, '--namespace', 'jobs']);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('config.name is not set, and its default, the release\'s full name "qc.v2-cronsafe", is not a cronsafe job name');
    expect(r.stderr).toContain('set config.name (e.g. "qc-v2-cronsafe")');
    const named = helm(['template', 'qc.v2', CHART, '--namespace', 'jobs', '--set', 'config.name=qc-v2']);
    expect(named.status, named.stderr).toBe(0);
  });
});

describe('a release name cut at 52 characters', () => {
  const dns = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
  // Helm takes these 53-character names; the cut kept one of two "-", or a ".", at the end
  // of the full name: the chart said to set config.name, which left every object's name invalid.
  // (A cut name now also carries 6 hex of the full name: names.test.ts.)
  it.each([
    ['ending in "-" after one "-" is trimmed', `${'a'.repeat(43)}--${'b'.repeat(8)}`, 'a'.repeat(43)],
    ['ending in "."', `${'a'.repeat(44)}.${'b'.repeat(8)}`, 'a'.repeat(44)],
  ])('%s: every object is named without it', (_what, release, cut) => {
    const r = helm(['template', release, CHART, '--namespace', 'jobs']);
    expect(r.status, r.stderr).toBe(0);
    const names = parseDocs(r.stdout).map((o) => String(o.metadata.name));
    expect(names).toContainEqual(expect.stringMatching(new RegExp(`^${cut}-[0-9a-f]{6}$`)));
    for (const name of names) expect(name).toMatch(dns);
  });

  // The status CronJob's cut at 45 ended in "." and rendered "<...>.-status".
  it('the status CronJob\'s name does not hold ".-"', () => {
    const r = helm(['template', `${'a'.repeat(44)}.${'b'.repeat(8)}`, CHART, '--namespace', 'jobs', '--set', 'config.name=qc']);
    expect(r.status, r.stderr).toBe(0);
    const names = parseDocs(r.stdout).map((o) => String(o.metadata.name));
    expect(names).toContainEqual(expect.stringMatching(new RegExp(`^${'a'.repeat(38)}-[0-9a-f]{6}-status$`)));
    for (const name of names) expect(name).toMatch(dns);
  });

  // The status CronJob's name was the full name cut at 45: two releases whose names differ
  // only past that (one per region) rendered one, and the second install failed on it.
  it.each([
    ['release names', ['payments-reconciliation-nightly-cronsafe-eu-west-1', 'payments-reconciliation-nightly-cronsafe-eu-west-2'], []],
    ['fullnameOverride', ['a', 'b'], ['--set', 'fullnameOverride=REPLACE']],
  ])('two %s differing past character 45 render distinct status CronJobs, each a valid CronJob name', (_what, pair, extra) => {
    const statusNames = pair.map((release, i) => {
      const full = `${'x'.repeat(47)}-${i + 1}`;
      const args = extra.map((a) => a.replace('REPLACE', full));
      const r = helm(['template', release, CHART, '--namespace', 'jobs', '--set', 'config.name=qc', ...args]);
      expect(r.status, r.stderr).toBe(0);
      const cronJobs = parseDocs(r.stdout).filter((o) => o.kind === 'CronJob').map((o) => String(o.metadata.name));
      expect(cronJobs).toHaveLength(2);
      for (const name of cronJobs) {
        expect(name).toMatch(dns);
        expect(name.length).toBeLessThanOrEqual(52);
      }
      return cronJobs.find((n) => n.endsWith('-status'));
    });
    expect(statusNames[0]).not.toBe(statusNames[1]);
  });

  it('a full name of 45 characters keeps its status CronJob name uncut', () => {
    const release = `${'q'.repeat(36)}-cronsafe`;
    const r = helm(['template', release, CHART, '--namespace', 'jobs']);
    expect(r.status, r.stderr).toBe(0);
    expect(parseDocs(r.stdout).map((o) => String(o.metadata.name))).toContain(`${release}-status`);
  });
});
