{{/*
cronsafe.yaml, rendered from the values. Written out by hand (not `toYaml` of a dict) to
keep the order of docs/configuration.md for humans reading the ConfigMap; every value
goes through toJson, which quotes strings safely (JSON is YAML).

The schedule and the drain grace come from the same values as the CronJob's `schedule`,
`timeZone` and `terminationGracePeriodSeconds`, so the runner and Kubernetes agree.
*/}}
{{- define "cronsafe.config" -}}
{{- $v := .Values -}}
{{- $c := $v.config -}}
# Rendered by the cronsafe Helm chart; change the chart values, not this file.
name: {{ include "cronsafe.configName" . | toJson }}
source:
  directory: {{ include "cronsafe.dataPath" (list . $c.source.directory) | toJson }}
  include: {{ toJson $c.source.include }}
  exclude: {{ toJson $c.source.exclude }}
handler:
{{- if $c.handler.module }}
  module: {{ include "cronsafe.dataPath" (list . $c.handler.module) | toJson }}
{{- else }}
  command: {{ toJson $c.handler.command }}
{{- end }}
  timeoutSeconds: {{ toJson $c.handler.timeoutSeconds }}
  killAfterSeconds: {{ toJson $c.handler.killAfterSeconds }}
  maxLogBytes: {{ toJson $c.handler.maxLogBytes }}
{{- if $c.handler.expectOutput }}
  expectOutput: true
{{- end }}
{{- with $c.handler.env }}
  env: {{ toJson . }}
{{- end }}
{{- if $c.output.directory }}
output:
  directory: {{ include "cronsafe.dataPath" (list . $c.output.directory) | toJson }}
{{- end }}
state:
  sqlite: {{ include "cronsafe.dataPath" (list . $c.state.sqlite) | toJson }}
{{- if $c.state.allowNetworkFilesystem }}
  allowNetworkFilesystem: true
{{- end }}
{{- /* The URL may also come from extraEnv or extraEnvFrom (values.yaml offers both); the
schema must then reach cronsafe too, or the job uses the default one (with SQLite cronsafe
ignores it). */ -}}
{{- $urlFromEnv := $v.extraEnvFrom -}}
{{- range $v.extraEnv }}{{- if eq (toString .name) "CRONSAFE_STATE_POSTGRES" }}{{- $urlFromEnv = true }}{{- end }}{{- end -}}
{{- if $c.state.postgres.existingSecret }}
  # The URL comes from Secret {{ $c.state.postgres.existingSecret }} (CRONSAFE_STATE_POSTGRES replaces sqlite).
  schema: {{ toJson $c.state.postgres.schema }}
{{- else if $urlFromEnv }}
  # The schema of the PostgreSQL ledger when CRONSAFE_STATE_POSTGRES is set (extraEnv, extraEnvFrom).
  schema: {{ toJson $c.state.postgres.schema }}
{{- end }}
concurrency: {{ toJson $c.concurrency }}
{{- if not (kindIs "invalid" $c.queueSize) }}
queueSize: {{ toJson $c.queueSize }}
{{- end }}
lease:
  seconds: {{ toJson $c.lease.seconds }}
  renewSeconds: {{ toJson $c.lease.renewSeconds }}
retry:
  maxAttempts: {{ toJson $c.retry.maxAttempts }}
  backoffSeconds: {{ toJson $c.retry.backoffSeconds }}
  backoffMaxSeconds: {{ toJson $c.retry.backoffMaxSeconds }}
retention:
  runs: {{ toJson $c.retention.runs }}
  days: {{ toJson $c.retention.days }}
  forgetMissingAfterDays: {{ toJson $c.retention.forgetMissingAfterDays }}
drain:
  # The pod's terminationGracePeriodSeconds (values: drain.gracePeriodSeconds), read from the
  # pod's env, which its spec sets beside it: a pod that a Job made before an upgrade starts
  # after it (a retry, a replacement for a drained pod) has its Job's spec but this new file.
  # The defaults are for the file read outside such a pod.
  gracePeriodSeconds: {{ printf "${CRONSAFE_DRAIN_GRACE_SECONDS:-%s}" (toJson $v.drain.gracePeriodSeconds) | toJson }}
  marginSeconds: {{ printf "${CRONSAFE_DRAIN_MARGIN_SECONDS:-%s}" (toJson $v.drain.marginSeconds) | toJson }}
lock:
{{- if $c.lock.path }}
  path: {{ include "cronsafe.dataPath" (list $ $c.lock.path) | toJson }}
{{- else }}
  # On the pod's /tmp emptyDir: node-local whatever the volume is (a flock on a network file
  # system is unreliable). Runs on one SQLite ledger are also kept apart by cronsafe's flock
  # on the ledger file itself, on the volume (a manual Job, a pod still terminating).
  path: {{ printf "/tmp/%s.lock" (include "cronsafe.configName" .) | toJson }}
{{- end }}
{{- if $c.lock.allowNetworkFilesystem }}
  allowNetworkFilesystem: true
{{- end }}
{{- if $v.lock.kubernetesLease.enabled }}
  # In the pod's namespace (CRONSAFE_POD_NAMESPACE); duration and renewal from `lease`.
  kubernetesLease:
    name: {{ include "cronsafe.leaseName" . | toJson }}
{{- end }}
schedule:
  # The CronJob's spec.schedule and spec.timeZone (values: schedule, timeZone).
  cron: {{ toJson $v.schedule }}
  timeZone: {{ toJson $v.timeZone }}
{{- if not (kindIs "invalid" $c.schedule.graceSeconds) }}
  graceSeconds: {{ toJson $c.schedule.graceSeconds }}
{{- end }}
  refresh: {{ toJson $c.schedule.refresh }}
  repeatedFire: {{ toJson $c.schedule.repeatedFire }}
{{- if or $v.metrics.enabled $v.metrics.pushgateway }}
metrics:
{{- if $v.metrics.enabled }}
  port: {{ toJson $v.metrics.port }}
{{- end }}
{{- with $v.metrics.pushgateway }}
  pushgateway: {{ toJson . }}
{{- end }}
  pushIntervalSeconds: {{ toJson $v.metrics.pushIntervalSeconds }}
{{- end }}
{{- if $v.events.enabled }}
events:
  enabled: true
{{- end }}
{{- if $v.scheduledTimestamp.enabled }}
scheduledTimestamp:
  enabled: true
{{- end }}
log:
  level: {{ toJson $c.log.level }}
  format: {{ toJson $c.log.format }}
{{- end -}}
