{{/*
The pod template shared by the runner CronJob and the status CronJob.
Call with (dict "root" $ "args" (list "run") "component" "runner" "initDirs" true).
*/}}
{{- define "cronsafe.podTemplate" -}}
{{- $ := .root -}}
{{- $v := $.Values -}}
{{- /* The data volume: the runner's (source, outputs, SQLite ledger); the status pod's only
for a SQLite ledger, which it reads there. With PostgreSQL it reads nothing there, and on a
ReadWriteOnce claim its pod could not start on another node while a run's pod held the
volume. Kept when an extraVolumeMounts entry mounts it. */ -}}
{{- $data := or (eq .component "runner") (not (include "cronsafe.postgresLedger" $)) -}}
{{- range $v.extraVolumeMounts }}{{- if and (kindIs "map" .) (eq (toString (get . "name")) "data") }}{{- $data = true }}{{- end }}{{- end -}}
metadata:
  labels:
    {{- include "cronsafe.selectorLabels" $ | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
    {{- with $v.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    # A config change shows up as a new pod template (and in `helm diff`); each Job's
    # pods then carry the config their Job was made with (a pod started after an upgrade
    # reads the new one: docs/kubernetes.md, "Upgrading").
    checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") $ | sha256sum }}
    {{- with $v.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  # Never: a failed container fails its pod, so that the Job controller sees the exit
  # code (and the runner's podFailurePolicy, which requires Never, can act on it).
  restartPolicy: Never
  serviceAccountName: {{ include "cronsafe.serviceAccountName" $ | quote }}
  # A token only where a Kubernetes API feature runs: the runner (`cronsafe status` reads
  # the ledger alone).
  automountServiceAccountToken: {{ and (eq .component "runner") (include "cronsafe.needsApi" $ | eq "true") }}
  # One value for both: the kubelet's SIGKILL comes exactly when cronsafe's drain budget
  # (drain.gracePeriodSeconds in cronsafe.yaml) says it will.
  terminationGracePeriodSeconds: {{ int64 $v.drain.gracePeriodSeconds }}
  {{- with $v.podSecurityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- /* Each entry as {name: ...}, the only field of a LocalObjectReference: the plain
  Secret name many charts take (`imagePullSecrets: [regcred]`) too. */}}
  {{- with $v.imagePullSecrets }}
  imagePullSecrets:
    {{- range . }}
    - name: {{ if kindIs "map" . }}{{ .name | quote }}{{ else }}{{ . | quote }}{{ end }}
    {{- end }}
  {{- end }}
  {{- with $v.priorityClassName }}
  priorityClassName: {{ . | quote }}
  {{- end }}
  {{- if .initDirs }}
  initContainers:
    # cronsafe refuses (exit 78) a source directory that does not exist; on a fresh
    # volume nothing has created it yet. On a volume the pod's user cannot write, the
    # script names the path, its owner and mode, and the fixes, and exits 78: the Job's
    # podFailurePolicy then fails the Job at once (files/init-dirs.sh).
    # The name is what that rule's containerName refers to.
    - name: init-dirs
      image: {{ include "cronsafe.image" $ | quote }}
      imagePullPolicy: {{ $v.image.pullPolicy }}
      command:
        - sh
        - -c
        # The script without its comment lines (they stay in the chart's file).
        - {{ regexReplaceAll "(?m)^[ \t]*#.*\n" ($.Files.Get "files/init-dirs.sh") "" | quote }}
        - init-dirs
        {{- range (include "cronsafe.initDirs" $ | fromYamlArray) }}
        - {{ . | quote }}
        {{- end }}
      {{- with $v.securityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.initDirs.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        - {name: data, mountPath: {{ $v.persistence.mountPath | quote }}}
  {{- end }}
  containers:
    # The name is what podFailurePolicy's onExitCodes rules refer to.
    - name: cronsafe
      image: {{ include "cronsafe.image" $ | quote }}
      imagePullPolicy: {{ $v.image.pullPolicy }}
      # Only args: the image's ENTRYPOINT (tini -- node cli.js) stays PID 1.
      args: {{ toJson .args }}
      env:
        - {name: CRONSAFE_CONFIG, value: /etc/cronsafe/cronsafe.yaml}
        # cronsafe.yaml's drain (${CRONSAFE_DRAIN_...}) comes from here, the pod spec that holds
        # terminationGracePeriodSeconds: a pod its Job starts after an upgrade (a retry, a
        # replacement) reads the new ConfigMap but keeps its Job's grace period.
        - {name: CRONSAFE_DRAIN_GRACE_SECONDS, value: {{ toJson $v.drain.gracePeriodSeconds | quote }}}
        - {name: CRONSAFE_DRAIN_MARGIN_SECONDS, value: {{ toJson $v.drain.marginSeconds | quote }}}
        # Who am I, for the Lease holder identity, Events and the Job annotation read.
        - name: CRONSAFE_POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
        - name: CRONSAFE_POD_NAMESPACE
          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
        - name: CRONSAFE_JOB_NAME
          valueFrom: {fieldRef: {fieldPath: "metadata.labels['batch.kubernetes.io/job-name']"}}
        - name: CRONSAFE_JOB_UID
          valueFrom: {fieldRef: {fieldPath: "metadata.labels['batch.kubernetes.io/controller-uid']"}}
        {{- with $v.config.state.postgres.existingSecret }}
        # The PostgreSQL ledger's URL, password included, straight from the Secret: it is
        # never in the ConfigMap, and cronsafe never logs it.
        - name: CRONSAFE_STATE_POSTGRES
          valueFrom: {secretKeyRef: {name: {{ . | quote }}, key: {{ $v.config.state.postgres.secretKey | quote }}}}
        {{- end }}
        {{- with $v.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $v.extraEnvFrom }}
      envFrom:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if and $v.metrics.enabled (eq .component "runner") }}
      ports:
        - {name: metrics, containerPort: {{ $v.metrics.port }}, protocol: TCP}
      {{- end }}
      {{- with $v.securityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        - {name: config, mountPath: /etc/cronsafe, readOnly: true}
        {{- if $data }}
        - {name: data, mountPath: {{ $v.persistence.mountPath | quote }}}
        {{- end }}
        # The only other writable place with readOnlyRootFilesystem (HOME=/tmp too).
        - {name: tmp, mountPath: /tmp}
        {{- with $v.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
  volumes:
    - name: config
      configMap:
        name: {{ include "cronsafe.fullname" $ | quote }}
    {{- if $data }}
    - name: data
      {{- if $v.persistence.enabled }}
      persistentVolumeClaim:
        claimName: {{ default (include "cronsafe.fullname" $) $v.persistence.existingClaim | quote }}
      {{- else }}
      emptyDir: {}
      {{- end }}
    {{- end }}
    - name: tmp
      emptyDir:
        sizeLimit: {{ $v.tmpSizeLimit }}
    {{- with $v.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $v.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
