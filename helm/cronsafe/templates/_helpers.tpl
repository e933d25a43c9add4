{{/*
Names. CronJob names are limited to 52 characters (the controller appends an 11-character
suffix to make Job names), so the full name is cut at 52, not Helm's usual 63. A cut alone
made two releases whose full names differ only past character 52 (two 53-character release
names, or a long nameOverride beside two releases) render one name for every object (the
CronJob, ConfigMap, PVC, ServiceAccount, Role, RoleBinding, and the default config.name,
hence one Lease and one ledger owner): the second install failed on them, or shared them.
A full name longer than 52 is now cut at 45 and carries 6 hex of its sha256 (like
cronsafe.statusName); one of 52 or fewer is unchanged. A cut may end in several "-" or in
a "." (a release name such as "...--b" or "....b" is valid): all of them go, or the name
ended in one, which no object name may.
*/}}
{{- define "cronsafe.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{- define "cronsafe.fullname" -}}
{{- $full := .Values.fullnameOverride -}}
{{- if not $full -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- $full = ternary .Release.Name (printf "%s-%s" .Release.Name $name) (contains $name .Release.Name) -}}
{{- end -}}
{{- if le (len $full) 52 -}}
{{- regexReplaceAll "[-.]+$" $full "" -}}
{{- else -}}
{{- printf "%s-%s" (regexReplaceAll "[-.]+$" ($full | trunc 45) "") ($full | sha256sum | trunc 6) -}}
{{- end -}}
{{- end -}}

{{/* cronsafe's own `name` (lock file, Lease, metric label): the full name unless set. */}}
{{- define "cronsafe.configName" -}}
{{- default (include "cronsafe.fullname" .) .Values.config.name -}}
{{- end -}}

{{- define "cronsafe.leaseName" -}}
{{- default (include "cronsafe.configName" .) .Values.lock.kubernetesLease.name -}}
{{- end -}}

{{/*
The status CronJob: `<fullname>-status`, within a CronJob's 52 characters. A full name
longer than 45 is cut, and a cut alone made two releases whose names differ only past
character 45 (qc-...-eu-west-1, qc-...-eu-west-2) render one status CronJob name, which
the second install could not own. A cut name carries 6 hex of the full name's sha256.
*/}}
{{- define "cronsafe.statusName" -}}
{{- $full := include "cronsafe.fullname" . -}}
{{- if le (len $full) 45 -}}
{{- printf "%s-status" $full -}}
{{- else -}}
{{- printf "%s-%s-status" (regexReplaceAll "[-.]+$" ($full | trunc 38) "") ($full | sha256sum | trunc 6) -}}
{{- end -}}
{{- end -}}

{{- define "cronsafe.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cronsafe.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cronsafe.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end -}}

{{- define "cronsafe.labels" -}}
helm.sh/chart: {{ include "cronsafe.chart" . }}
{{ include "cronsafe.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "cronsafe.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "cronsafe.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "cronsafe.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
The directories the init container creates, as a YAML list: the source, the output and
the SQLite ledger's directory, each only when it lies on the data volume (the only volume
the init container mounts; paths elsewhere belong to extraVolumes the user manages).
*/}}
{{- define "cronsafe.initDirs" -}}
{{- $v := .Values -}}
{{- $mount := trimSuffix "/" $v.persistence.mountPath -}}
{{- $onVolume := list -}}
{{- /* cronsafe writes in these: output and the SQLite ledger's directory. */ -}}
{{- $dirs := list -}}
{{- with $v.config.output.directory -}}
{{- $dirs = append $dirs (include "cronsafe.dataPath" (list $ .)) -}}
{{- end -}}
{{- if not $v.config.state.postgres.existingSecret -}}
{{- $dirs = append $dirs (dir (include "cronsafe.dataPath" (list . $v.config.state.sqlite))) -}}
{{- end -}}
{{- /* It only reads the source: `--readable` asks for read and search, unless it is
also one of the others. */ -}}
{{- $source := include "cronsafe.dataPath" (list . $v.config.source.directory) -}}
{{- if and (hasPrefix (printf "%s/" $mount) (printf "%s/" $source)) (not (has $source $dirs)) -}}
{{- $onVolume = list "--readable" $source -}}
{{- end -}}
{{- range $dirs -}}
{{- if and (hasPrefix (printf "%s/" $mount) (printf "%s/" .)) (not (has . $onVolume)) -}}
{{- $onVolume = append $onVolume . -}}
{{- end -}}
{{- end -}}
{{- toYaml $onVolume -}}
{{- end -}}

{{/* A config path: absolute as given, relative under the volume's mountPath. */}}
{{- define "cronsafe.dataPath" -}}
{{- $p := index . 1 -}}
{{- if hasPrefix "/" $p -}}{{ $p }}{{- else -}}{{ printf "%s/%s" (trimSuffix "/" (index . 0).Values.persistence.mountPath) $p }}{{- end -}}
{{- end -}}

{{/*
A lower bound of the longest time between two fires of `schedule`, in seconds, for the
shapes that fire at most once a day: a macro, or a single hour (a week for a single day of
the week, a month for a single day of the month, a year for a date, a day for any other
restriction such as 1-5); "" for anything more frequent or not recognised. Only NOTES uses
it (through cronsafe.scheduleMaxGapSeconds), to warn when CronsafeNoRecentSuccess's age would
page a healthy job, and cronsafe.overrunWindow for the shapes it cannot tell itself.
*/}}
{{- define "cronsafe.scheduleGapSeconds" -}}
{{- $s := trim .Values.schedule -}}
{{- $macros := dict "@hourly" "" "@daily" "86400" "@midnight" "86400" "@weekly" "604800" "@monthly" "2678400" "@yearly" "31622400" "@annually" "31622400" -}}
{{- if hasPrefix "@" $s -}}
{{- get $macros $s -}}
{{- else -}}
{{- $f := regexSplit "[ \t]+" $s -1 -}}
{{- $one := "^[0-9]+$" -}}
{{- $any := "^[*?]$" -}}
{{- if and (eq (len $f) 5) (regexMatch $one (index $f 1)) -}}
{{- $dom := index $f 2 -}}{{- $month := index $f 3 -}}{{- $dow := index $f 4 -}}
{{- if and (regexMatch $any $dom) (regexMatch $any $month) (regexMatch $any $dow) -}}86400
{{- else if and (regexMatch $any $dom) (regexMatch $any $month) (regexMatch $one $dow) -}}604800
{{- else if and (regexMatch $one $dom) (regexMatch $any $month) (regexMatch $any $dow) -}}2678400
{{- else if and (regexMatch $one $dom) (regexMatch $one $month) (regexMatch $any $dow) -}}31622400
{{- else -}}86400
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The longest time between two fires of `schedule`, in seconds (a lower bound), for NOTES'
warning about CronsafeNoRecentSuccess's age: cronsafe.scheduleGapSeconds' shapes (at most
one fire a day), and the ones that fire every day at a fixed interval: `@hourly`, a minute
every hour (`5 * * * *`), every N hours (a step in the hour), every N minutes (a step in the minute),
every minute. Wrapping past midnight (or the hour) never makes a longer gap than N. "" for
anything else (lists, ranges, restricted days: `0 * * * 1-5` waits the weekend).
*/}}
{{- define "cronsafe.scheduleMaxGapSeconds" -}}
{{- $daily := include "cronsafe.scheduleGapSeconds" . -}}
{{- $s := trim .Values.schedule -}}
{{- $f := regexSplit "[ \t]+" $s -1 -}}
{{- $any := "^[*?]$" -}}
{{- $num := "^[0-9]+$" -}}
{{- $step := "^[*0]/[0-9]+$" -}}
{{- if $daily -}}{{ $daily }}
{{- else if eq $s "@hourly" -}}3600
{{- else if and (eq (len $f) 5) (regexMatch $any (index $f 2)) (regexMatch $any (index $f 3)) (regexMatch $any (index $f 4)) -}}
{{- $m := index $f 0 -}}{{- $h := index $f 1 -}}
{{- if and (regexMatch $num $m) (regexMatch $any $h) -}}3600
{{- else if and (regexMatch $num $m) (regexMatch $step $h) (gt (atoi (index (splitList "/" $h) 1)) 0) -}}{{ mul 3600 (min 24 (atoi (index (splitList "/" $h) 1))) }}
{{- else if and (regexMatch $step $m) (regexMatch $any $h) (gt (atoi (index (splitList "/" $m) 1)) 0) -}}{{ mul 60 (min 60 (atoi (index (splitList "/" $m) 1))) }}
{{- else if and (regexMatch $any $m) (regexMatch $any $h) -}}60
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The window of CronsafeRepeatedOverruns as a PromQL duration: 6 x the time between fires,
at least 1h (the rules file's). A run that outlasts the interval sees about one fire come
due (an overrun) per two fires, so at 1h a job firing every 15 minutes or less often whose
every run overran never paged: two an hour at most for a job every 15 minutes, one for an hourly job. Six
fires' worth holds three such runs. The interval comes from `schedule`: every N minutes, a
fixed minute every hour (or every N hours), the mean over a day of minute and hour fields of
lists, ranges and steps (`0,30 * * * *`, `0 0-23/2 * * *`: cronsafe.cronFieldCount), on
every day or on the days the day fields allow, or the daily-or-longer gap of
cronsafe.scheduleGapSeconds; any other expression (a name in the minute or hour) keeps 1h. At most 7d (a common retention
is 15d): a weekly or monthly job, which cannot overrun three times in a week, is not paged
for overruns.
*/}}
{{- define "cronsafe.overrunWindow" -}}
{{- $s := trim .Values.schedule -}}
{{- $gap := 0 -}}
{{- $f := regexSplit "[ \t]+" $s -1 -}}
{{- $any := "^[*?]$" -}}
{{- if eq $s "@hourly" -}}
{{- $gap = 3600 -}}
{{- else if not (hasPrefix "@" $s) -}}
{{- /* The day fields do not change the interval within a day that has fires: `0 * * * 1-5`
fires hourly, as `0 * * * *` does (it kept 1h, and an hourly weekday job whose every run
overran never paged). */ -}}
{{- if eq (len $f) 5 -}}
{{- $m := index $f 0 -}}{{- $h := index $f 1 -}}
{{- if and (regexMatch "^[0-9]+$" $m) (regexMatch $any $h) -}}
{{- $gap = 3600 -}}
{{- else if and (regexMatch "^[0-9]+$" $m) (regexMatch "^[*0]/[0-9]+$" $h) -}}
{{- $gap = mul 3600 (atoi (index (splitList "/" $h) 1)) -}}
{{- else if and (regexMatch "^[*0]/[0-9]+$" $m) (regexMatch $any $h) -}}
{{- $gap = mul 60 (atoi (index (splitList "/" $m) 1)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* Lists, ranges and steps (`0,30 * * * *`, `0 0-23/2 * * *`, `5/15 * * * *`): the mean
interval, a day over the fires in it. */ -}}
{{- if and (eq $gap 0) (eq (len $f) 5) -}}
{{- $nm := include "cronsafe.cronFieldCount" (list (index $f 0) 59) -}}
{{- $nh := include "cronsafe.cronFieldCount" (list (index $f 1) 23) -}}
{{- /* One fire a day on restricted days (`0 3 * * 0`) is cronsafe.scheduleGapSeconds' case. */ -}}
{{- if and $nm $nh (or (gt (mul (atoi $nm) (atoi $nh)) 1) (and (regexMatch $any (index $f 2)) (regexMatch $any (index $f 3)) (regexMatch $any (index $f 4)))) -}}
{{- $gap = div 86400 (mul (atoi $nm) (atoi $nh)) -}}
{{- end -}}
{{- end -}}
{{- if eq $gap 0 -}}
{{- $daily := include "cronsafe.scheduleGapSeconds" . -}}
{{- if $daily -}}{{- $gap = atoi $daily -}}{{- end -}}
{{- end -}}
{{- $minutes := min 10080 (max 60 (div (mul 6 $gap) 60)) -}}
{{- if eq (mod $minutes 1440) 0 -}}{{ div $minutes 1440 }}d
{{- else if eq (mod $minutes 60) 0 -}}{{ div $minutes 60 }}h
{{- else -}}{{ $minutes }}m
{{- end -}}
{{- end -}}

{{/*
How many values a cron minute or hour field takes (list field max: 59 or 23), from
numbers, a star, ranges and steps joined by commas (`0,30`, `0-23/2`, `5/15`); "" for
anything else (a name, a value past max, a step of 0).
*/}}
{{- define "cronsafe.cronFieldCount" -}}
{{- $field := index . 0 -}}{{- $max := index . 1 -}}
{{- $seen := dict -}}
{{- $ok := true -}}
{{- range splitList "," $field -}}
{{- $part := regexFind "^([*]|[0-9]+(-[0-9]+)?)(/[0-9]+)?$" . -}}
{{- if not $part -}}{{- $ok = false -}}
{{- else -}}
{{- $base := index (splitList "/" $part) 0 -}}
{{- $step := 1 -}}
{{- if contains "/" $part -}}{{- $step = atoi (index (splitList "/" $part) 1) -}}{{- end -}}
{{- $lo := 0 -}}{{- $hi := $max -}}
{{- if ne $base "*" -}}
{{- $lo = atoi (index (splitList "-" $base) 0) -}}
{{- if contains "-" $base -}}{{- $hi = atoi (index (splitList "-" $base) 1) -}}
{{- else if not (contains "/" $part) -}}{{- $hi = $lo -}}
{{- end -}}
{{- end -}}
{{- if or (lt $step 1) (gt $lo $hi) (gt $hi $max) -}}{{- $ok = false -}}
{{- else -}}
{{- range untilStep $lo (int (add $hi 1)) $step -}}{{- $_ := set $seen (toString .) true -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and $ok (gt (len $seen) 0) -}}{{ len $seen }}{{- end -}}
{{- end -}}

{{/*
Which Kubernetes API features are on. "true" or "" (templates only pass strings), so
`if (include ...)` reads naturally. The ServiceAccount token is mounted, and a Role is
rendered, only when one of them needs the API.
*/}}
{{- define "cronsafe.needsApi" -}}
{{- if or .Values.lock.kubernetesLease.enabled .Values.events.enabled .Values.scheduledTimestamp.enabled -}}true{{- end -}}
{{- end -}}

{{/* Reading the pod's Job: for its scheduled-timestamp annotation, and for the owning
CronJob's name and uid that Events must carry to show in `kubectl describe cronjob`. */}}
{{- define "cronsafe.needsJobGet" -}}
{{- if or .Values.events.enabled .Values.scheduledTimestamp.enabled -}}true{{- end -}}
{{- end -}}

{{/*
The schedule as the API server parses it (robfig/cron v3's ParseStandard, Kubernetes' cron
parser): values.schema.json checks its shape, this the values of its fields. Each
comma-separated part (empty ones are skipped) is `*` or `?`, or a number or name with an
optional `-` end, then an optional `/step`; a number past the field's bounds, a name the field
does not have, a start past the end or a step of 0 made the API server refuse the CronJob
("spec.schedule: Invalid value"), after everything else was installed. Day-of-week 7 is
Sunday to cron and to cronsafe, not to robfig (0-6).
*/}}
{{- define "cronsafe.validateSchedule" -}}
{{- $s := trim .Values.schedule -}}
{{- if not (hasPrefix "@" $s) -}}
{{- $f := regexSplit "[ \t]+" $s -1 -}}
{{- /* The values each field takes, and robfig's star bit (`*` or `?`, alone or with a step of 1). */ -}}
{{- $taken := dict "month" dict "day-of-month" dict -}}
{{- $star := dict -}}
{{- $months := dict "jan" 1 "feb" 2 "mar" 3 "apr" 4 "may" 5 "jun" 6 "jul" 7 "aug" 8 "sep" 9 "oct" 10 "nov" 11 "dec" 12 -}}
{{- $days := dict "sun" 0 "mon" 1 "tue" 2 "wed" 3 "thu" 4 "fri" 5 "sat" 6 -}}
{{- $fields := list (list "minute" 0 59 dict) (list "hour" 0 23 dict) (list "day-of-month" 1 31 dict) (list "month" 1 12 $months) (list "day-of-week" 0 6 $days) -}}
{{- range $i, $field := $fields -}}
{{- $what := index $field 0 -}}{{- $min := index $field 1 -}}{{- $max := index $field 2 -}}{{- $names := index $field 3 -}}
{{- range $part := splitList "," (index $f $i) -}}
{{- if $part -}}
{{- $bad := "" -}}
{{- $rangeAndStep := splitList "/" $part -}}
{{- $lowAndHigh := splitList "-" (first $rangeAndStep) -}}
{{- $start := $min -}}{{- $end := $max -}}
{{- $numbers := list -}}
{{- if not (has (first $lowAndHigh) (list "*" "?")) -}}
{{- if gt (len $lowAndHigh) 2 }}{{- $bad = "more than one \"-\"" }}{{- end -}}
{{- range $lowAndHigh -}}
{{- $n := -1 -}}
{{- if hasKey $names (lower .) }}{{- $n = get $names (lower .) -}}
{{- else if regexMatch "^[0-9]+$" . -}}
{{- $digits := regexReplaceAll "^0+([0-9])" . "${1}" -}}
{{- $n = ternary 1000000 (atoi $digits) (gt (len $digits) 6) -}}
{{- else if not $bad -}}
{{- $bad = printf "%q, which is no number%s" . (ternary (printf " nor a %s name (%s)" $what (keys $names | sortAlpha | join ", ")) "" (gt (len $names) 0)) -}}
{{- end -}}
{{- $numbers = append $numbers $n -}}
{{- end -}}
{{- if not $bad -}}
{{- $start = index $numbers 0 -}}
{{- $end = last $numbers -}}
{{- end -}}
{{- end -}}
{{- if and (not $bad) (gt (len $rangeAndStep) 2) }}{{- $bad = "more than one \"/\"" }}{{- end -}}
{{- if and (not $bad) (eq (len $rangeAndStep) 2) -}}
{{- $step := index $rangeAndStep 1 -}}
{{- if not (regexMatch "^[0-9]+$" $step) -}}{{- $bad = printf "a step %q, which is no number" $step -}}
{{- else if eq (atoi (regexReplaceAll "^0+([0-9])" $step "${1}")) 0 -}}{{- $bad = "a step of 0" -}}
{{- end -}}
{{- if eq (len $lowAndHigh) 1 }}{{- $end = $max }}{{- end -}}
{{- end -}}
{{- if not $bad -}}
{{- if and (eq $what "day-of-week") (or (eq (int $start) 7) (eq (int $end) 7)) -}}
{{- fail (printf "schedule %q: day-of-week 7 (in %q) is refused by the Kubernetes API server, whose cron parser (robfig/cron v3) takes 0-6: write 0 for Sunday" $s $part) -}}
{{- else if or (lt (int $start) (int $min)) (gt (int $start) (int $max)) (gt (int $end) (int $max)) -}}
{{- $bad = printf "a value outside %d-%d" (int $min) (int $max) -}}
{{- else if gt (int $start) (int $end) -}}
{{- $bad = printf "a range whose start is past its end" -}}
{{- end -}}
{{- end -}}
{{- if $bad -}}
{{- fail (printf "schedule %q: the %s field's %q has %s: the Kubernetes API server would refuse the CronJob (its cron parser, robfig/cron v3, takes %s %d-%d%s)" $s $what $part $bad $what (int $min) (int $max) (ternary " or their names" "" (gt (len $names) 0))) -}}
{{- end -}}
{{- $step := 1 -}}
{{- if eq (len $rangeAndStep) 2 }}{{- $step = atoi (regexReplaceAll "^0+([0-9])" (index $rangeAndStep 1) "${1}") -}}{{- end -}}
{{- if and (has (first $lowAndHigh) (list "*" "?")) (eq $step 1) }}{{- $_ := set $star $what true -}}{{- end -}}
{{- if hasKey $taken $what -}}
{{- range untilStep (int $start) (int (add $end 1)) $step }}{{- $_ := set (get $taken $what) (toString .) true -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* A day-of-month that no allowed month has (`0 0 30 2 *`, `0 0 31 4,6,9,11 *`): the API
server takes it, and the CronJob never starts a Job; cronsafe refuses it (exit 78), but no
pod ever runs to say so. With both day fields restricted (no star bit on either), robfig
fires on the days of the week too; a star bit on day-of-month allows every day. */ -}}
{{- if and (hasKey $star "day-of-week") (not (hasKey $star "day-of-month")) -}}
{{- $lengths := list 31 29 31 30 31 30 31 31 30 31 30 31 -}}
{{- $fits := false -}}
{{- range $m := keys (get $taken "month") -}}
{{- range $d := keys (get $taken "day-of-month") -}}
{{- if le (atoi $d) (index $lengths (sub (atoi $m) 1)) }}{{- $fits = true -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $fits -}}
{{- fail (printf "schedule %q never fires: no month it allows has a day of month it allows (the API server takes it, and the CronJob would never start a Job); cronsafe refuses it as schedule.cron" $s) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Cross-value checks that values.schema.json cannot express (JSON Schema cannot compare two
values). cronsafe would reject the same config at start-up with exit 78; failing at
install time is kinder than a failed Job.
*/}}
{{- define "cronsafe.validate" -}}
{{- $v := .Values -}}
{{- include "cronsafe.validateSchedule" . -}}
{{- /* persistence.enabled: false mounts an emptyDir: an existingClaim beside it was never
mounted, and the ledger it holds was left unread while every run started a new one (lost at
its end). Said by NOTES as "testing only", of a claim the user had named. */ -}}
{{- if and (not $v.persistence.enabled) $v.persistence.existingClaim -}}
{{- fail (printf "persistence.existingClaim (%s) is set but persistence.enabled is false, which mounts an emptyDir instead (the ledger lost after every run): set persistence.enabled: true to mount the claim (the chart then creates no PVC), or remove persistence.existingClaim" $v.persistence.existingClaim) -}}
{{- end -}}
{{- /* A label the chart sets itself, given again, rendered its key twice in one mapping, which
the install refused with a YAML error naming neither value; and the selectors and the
PodMonitor rely on the chart's. commonLabels go on every object (the CronJobs carry a
component too), podLabels on the pods. */ -}}
{{- $own := dict "commonLabels" (list "helm.sh/chart" "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/version" "app.kubernetes.io/managed-by" "app.kubernetes.io/component") "podLabels" (list "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/component") -}}
{{- range $field := list "commonLabels" "podLabels" -}}
{{- $given := index $v $field | default dict -}}
{{- range $key := index $own $field -}}
{{- if hasKey $given $key -}}
{{- fail (printf "%s: %s is a label the chart sets itself (its selectors and the PodMonitor rely on it); remove it from %s" $field $key $field) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* A key that is no Kubernetes label key (`my team`, `a/b/c`, a name past 63 characters)
rendered, and the API server refused every object carrying it. Checked here, not in
values.schema.json: helm's error for a bad key names neither the value nor the key's place. */ -}}
{{- $labelMaps := dict "commonLabels" $v.commonLabels "podLabels" $v.podLabels "metrics.podMonitor.labels" $v.metrics.podMonitor.labels "metrics.prometheusRule.labels" $v.metrics.prometheusRule.labels -}}
{{- range $field := keys $labelMaps | sortAlpha -}}
{{- range $key := keys (get $labelMaps $field | default dict) | sortAlpha -}}
{{- $prefix := ternary (splitList "/" $key | first) "" (contains "/" $key) -}}
{{- if or (not (regexMatch "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$" $key)) (gt (len $prefix) 253) -}}
{{- fail (printf "%s: %q is not a Kubernetes label key (an optional DNS-subdomain prefix and \"/\", then at most 63 letters, digits, \"-\", \"_\" and \".\", starting and ending with a letter or digit): the API server would refuse the objects carrying it" $field $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* The same for the PodMonitor's and PrometheusRule's extra labels, which go beside the
chart's labels and commonLabels: a key also in commonLabels (`release: prom` in both, to
match a Prometheus selector) was rendered twice as well. */ -}}
{{- $monitoring := dict "metrics.podMonitor.labels" (list $v.metrics.podMonitor.enabled $v.metrics.podMonitor.labels "PodMonitor") "metrics.prometheusRule.labels" (list $v.metrics.prometheusRule.enabled $v.metrics.prometheusRule.labels "PrometheusRule") -}}
{{- range $field := keys $monitoring | sortAlpha -}}
{{- $m := get $monitoring $field -}}
{{- if index $m 0 -}}
{{- range $key := keys (index $m 1 | default dict) | sortAlpha -}}
{{- if has $key (without (index $own "commonLabels") "app.kubernetes.io/component") -}}
{{- fail (printf "%s: %s is a label the chart sets itself; remove it from %s" $field $key $field) -}}
{{- else if hasKey ($v.commonLabels | default dict) $key -}}
{{- fail (printf "%s: %s is also in commonLabels, which go on the %s too: its labels would hold the key twice, which YAML does not allow; set it in one of them" $field $key (index $m 2)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* Environment variables the chart sets itself, given again in extraEnv: Kubernetes keeps
the last, so CRONSAFE_DRAIN_GRACE_SECONDS=300 made cronsafe plan a 300s drain while the
kubelet's SIGKILL came at the pod's 150 (the API server only warns "duplicate name"; a
server-side apply before Kubernetes 1.29 refused the list). */ -}}
{{- $ownEnv := dict "CRONSAFE_CONFIG" "the ConfigMap's cronsafe.yaml" "CRONSAFE_DRAIN_GRACE_SECONDS" "drain.gracePeriodSeconds, with the pod's terminationGracePeriodSeconds: set drain.gracePeriodSeconds" "CRONSAFE_DRAIN_MARGIN_SECONDS" "drain.marginSeconds: set drain.marginSeconds" "CRONSAFE_POD_NAME" "the pod's metadata" "CRONSAFE_POD_NAMESPACE" "the pod's metadata" "CRONSAFE_JOB_NAME" "the pod's Job label" "CRONSAFE_JOB_UID" "the pod's Job label" -}}
{{- with $v.config.state.postgres.existingSecret }}{{- $_ := set $ownEnv "CRONSAFE_STATE_POSTGRES" (printf "config.state.postgres.existingSecret, Secret %s: use one of the two" .) }}{{- end -}}
{{- $seenEnv := dict -}}
{{- range $v.extraEnv -}}
{{- $envName := toString (get . "name") -}}
{{- /* Given twice: Kubernetes keeps the last, the first is silently dropped (the API
server only warns "duplicate name"). */ -}}
{{- if hasKey $seenEnv $envName -}}
{{- fail (printf "extraEnv: %s is given twice; Kubernetes would keep only the last. Give it once" $envName) -}}
{{- end -}}
{{- $_ := set $seenEnv $envName true -}}
{{- with get $ownEnv $envName -}}
{{- fail (printf "extraEnv: %s is set by the chart (from %s); remove it from extraEnv" $envName .) -}}
{{- end -}}
{{- /* A fixed run group is the same for every Job of the CronJob: a Job started while
another runs (a `kubectl create job --from`, a fire under concurrencyPolicy Allow, the pod of
a Job still terminating) joined its pass instead of being kept out (a lock-skip), and a pass
that ran past the next fire took that fire in silently. The chart groups each Job's pods by
the Job's name; a valueFrom (a label, say) is left to its author. */ -}}
{{- if and (eq $envName "CRONSAFE_RUN_GROUP") (hasKey . "value") (ne (toString (get . "value")) "") -}}
{{- fail (printf "extraEnv: CRONSAFE_RUN_GROUP has a fixed value (%s), the same for every Job of this CronJob: a Job started while another runs (kubectl create job --from, concurrencyPolicy Allow, a pod still terminating) would join its pass instead of being kept out. Remove it: the chart already groups the pods of each Job by the Job's name (CRONSAFE_JOB_NAME)" (toString (get . "value"))) -}}
{{- end -}}
{{- /* The occurrence a run is for: given, it wins over the Job's scheduled-timestamp
annotation, so a fixed value made every Job of the CronJob a run for that one occurrence
(every later one refused as stale with config.schedule.graceSeconds, refresh: every-occurrence
never refreshing). */ -}}
{{- if and (eq $envName "CRONSAFE_SCHEDULED_TIME") (hasKey . "value") (ne (toString (get . "value")) "") -}}
{{- fail (printf "extraEnv: CRONSAFE_SCHEDULED_TIME has a fixed value (%s): every Job of this CronJob would run for that one occurrence. Remove it: set scheduledTimestamp.enabled: true to read each Job's scheduled time from its annotation" (toString (get . "value"))) -}}
{{- end -}}
{{- end -}}
{{- /* The same for the chart's own volumes: the API server refused a second "data" naming
only the rendered path. */ -}}
{{- range $i, $vol := $v.extraVolumes -}}
{{- if has (toString (get $vol "name")) (list "config" "data" "tmp") -}}
{{- fail (printf "extraVolumes[%d].name: %s is the name of a volume the chart mounts itself (config, data, tmp); give it another name (extraVolumeMounts may still mount the chart's data volume elsewhere)" $i (get $vol "name")) -}}
{{- end -}}
{{- end -}}
{{- /* Annotations the chart sets itself, rendered twice the same way. */ -}}
{{- if and $v.persistence.keep (hasKey ($v.persistence.annotations | default dict) "helm.sh/resource-policy") -}}
{{- fail "persistence.annotations: helm.sh/resource-policy is the annotation persistence.keep sets (true by default): its key would be rendered twice; remove it from persistence.annotations" -}}
{{- end -}}
{{- if hasKey ($v.podAnnotations | default dict) "checksum/config" -}}
{{- fail "podAnnotations: checksum/config is an annotation the chart sets itself (a config change rolls the pod template with it); remove it from podAnnotations" -}}
{{- end -}}
{{- if ge (float64 $v.drain.marginSeconds) (float64 $v.drain.gracePeriodSeconds) -}}
{{- fail (printf "drain.marginSeconds (%v) must be less than drain.gracePeriodSeconds (%v)" $v.drain.marginSeconds $v.drain.gracePeriodSeconds) -}}
{{- end -}}
{{- if ge (float64 $v.config.lease.renewSeconds) (float64 $v.config.lease.seconds) -}}
{{- fail (printf "config.lease.renewSeconds (%v) must be less than config.lease.seconds (%v)" $v.config.lease.renewSeconds $v.config.lease.seconds) -}}
{{- end -}}
{{- if lt (float64 $v.config.retry.backoffMaxSeconds) (float64 $v.config.retry.backoffSeconds) -}}
{{- fail (printf "config.retry.backoffMaxSeconds (%v) must be >= config.retry.backoffSeconds (%v)" $v.config.retry.backoffMaxSeconds $v.config.retry.backoffSeconds) -}}
{{- end -}}
{{- if eq (empty $v.config.handler.command) (empty $v.config.handler.module) -}}
{{- fail "config.handler: set exactly one of config.handler.command and config.handler.module (with a module, set config.handler.command: [])" -}}
{{- end -}}
{{- if and (not $v.config.output.directory) (include "cronsafe.usesOutput" .) -}}
{{- fail "config.handler.command uses {output} but config.output.directory is empty" -}}
{{- end -}}
{{- if $v.config.output.directory -}}
{{- $src := clean (include "cronsafe.dataPath" (list . $v.config.source.directory)) -}}
{{- if eq $src (clean (include "cronsafe.dataPath" (list . $v.config.output.directory))) -}}
{{- fail (printf "config.output.directory is config.source.directory itself (%s): outputs would become items on the next run (cronsafe exits 78); use a directory outside config.source.directory" $src) -}}
{{- end -}}
{{- /* Inside it: cronsafe takes that only when source.exclude keeps the scan out of it
(it matches the globs; with no exclude at all nothing can). */ -}}
{{- $out := clean (include "cronsafe.dataPath" (list . $v.config.output.directory)) -}}
{{- $inside := printf "%s/" (trimSuffix "/" $src) -}}
{{- if and (hasPrefix $inside $out) (not $v.config.source.exclude) -}}
{{- fail (printf "config.output.directory (%s) is inside config.source.directory (%s): outputs would become items on the next run (cronsafe exits 78); use a directory outside config.source.directory, or keep the scan out of it with config.source.exclude: [%q]" $out $src (printf "%s/**" (trimPrefix $inside $out))) -}}
{{- end -}}
{{- end -}}
{{- /* The SQLite ledger and the lock file (ignored with PostgreSQL, which may also come from
extraEnvFrom) must be files: the source and output directories are directories (init-dirs
makes them), and a lock on the ledger would overwrite it. cronsafe exits 78 on each. */ -}}
{{- $postgres := or $v.config.state.postgres.existingSecret $v.extraEnvFrom -}}
{{- range $v.extraEnv }}{{- if eq (toString .name) "CRONSAFE_STATE_POSTGRES" }}{{- $postgres = true }}{{- end }}{{- end -}}
{{- /* The created PVC holds what cronsafe writes there (the SQLite ledger, outputs under
persistence.mountPath): with ReadOnlyMany alone the claim asks for a read-only volume (a CSI
driver is told MULTI_NODE_READER_ONLY and mounts it read-only; a StorageClass without the
mode never provisions it), and every pod failed (EROFS) or waited unbound; Forbid then starts
no later run. A PostgreSQL pass that only reads its source there
may use it. */ -}}
{{- if and $v.persistence.enabled (not $v.persistence.existingClaim) (not (has "ReadWriteOnce" $v.persistence.accessModes)) (not (has "ReadWriteOncePod" $v.persistence.accessModes)) (not (has "ReadWriteMany" $v.persistence.accessModes)) -}}
{{- $mount := clean $v.persistence.mountPath -}}
{{- $writes := list -}}
{{- if not $postgres }}{{- $writes = append $writes "the SQLite ledger (config.state.sqlite)" }}{{- end -}}
{{- with $v.config.output.directory -}}
{{- $out := clean (include "cronsafe.dataPath" (list $ .)) -}}
{{- if or (eq $out $mount) (hasPrefix (printf "%s/" (trimSuffix "/" $mount)) $out) }}{{- $writes = append $writes "the outputs (config.output.directory)" }}{{- end -}}
{{- end -}}
{{- if $writes -}}
{{- fail (printf "persistence.accessModes (%s) has no ReadWrite mode, and %s must be written on the data volume. Use ReadWriteOnce (the SQLite ledger), or ReadWriteMany for the pods of a PostgreSQL pass" (join ", " $v.persistence.accessModes) (join " and " $writes)) -}}
{{- end -}}
{{- end -}}
{{- if not $postgres -}}
{{- $dirs := dict (clean (include "cronsafe.dataPath" (list . $v.config.source.directory))) "config.source.directory" -}}
{{- with $v.config.output.directory }}{{- $_ := set $dirs (clean (include "cronsafe.dataPath" (list $ .))) "config.output.directory" }}{{- end -}}
{{- $ledger := clean (include "cronsafe.dataPath" (list . $v.config.state.sqlite)) -}}
{{- with get $dirs $ledger }}{{- fail (printf "config.state.sqlite (%s) is %s, a directory: name the ledger file, e.g. state/cronsafe.db (cronsafe exits 78)" $ledger .) }}{{- end -}}
{{- with $v.config.lock.path -}}
{{- $lock := clean (include "cronsafe.dataPath" (list $ .)) -}}
{{- with get $dirs $lock }}{{- fail (printf "config.lock.path (%s) is %s, a directory: name the lock file, or leave config.lock.path empty (cronsafe exits 78)" $lock .) }}{{- end -}}
{{- if eq $lock $ledger }}{{- fail (printf "config.lock.path (%s) is the ledger file, config.state.sqlite: the lock would overwrite it; leave config.lock.path empty (cronsafe exits 78)" $lock) }}{{- end -}}
{{- end -}}
{{- end -}}
{{- if and (not $v.config.output.directory) $v.config.handler.expectOutput -}}
{{- fail "config.handler.expectOutput needs config.output.directory (the output it expects goes there)" -}}
{{- end -}}
{{- /* Least privilege: the namespace's default ServiceAccount runs every pod that names
none, so a Role bound to it would hand them all the Lease, Events and Job rights. */ -}}
{{- if and $v.rbac.create (include "cronsafe.needsApi" .) (eq (include "cronsafe.serviceAccountName" .) "default") -}}
{{- fail "serviceAccount.name: the Role for the enabled Kubernetes features would be bound to the namespace's default ServiceAccount, which every pod that names none runs as. Set serviceAccount.create: true (the default), or serviceAccount.name to a ServiceAccount of its own, or rbac.create: false and grant the rules yourself (docs/kubernetes.md)" -}}
{{- end -}}
{{- /* cronsafe adds /metrics/job/<name> to the URL and exits 78 on a URL that has it already
(the gateway's push URL as its README writes it). */ -}}
{{- if regexMatch "^https?://[^/]*(/.*)?/metrics/job(@base64)?(/.*)?$" (toString $v.metrics.pushgateway) -}}
{{- fail "metrics.pushgateway: give the Pushgateway's base URL (http://host:9091, or the route prefix it is served under), without /metrics/job/...: cronsafe adds /metrics/job/<name> itself (cronsafe exits 78)" -}}
{{- end -}}
{{- /* A volume mounted where the chart mounts one of its own (the API server refuses the
CronJob: "must be unique"), or over what the container runs from (every pod then fails:
node cannot find /app/dist/cli.cjs, exit 1, or the runtime finds no tini or sh), or over a
directory holding it. Mounts inside /tmp, beside the program (/app/data) or inside a
system directory (/dev/shm) are left alone. /bin, /lib and /lib64 are links into /usr,
which the runtime follows. */ -}}
{{- $own := dict "/tmp" "the /tmp emptyDir" "/etc/cronsafe" "the config (cronsafe.yaml)" -}}
{{- $needed := dict "/app/dist" "cronsafe's program" "/app/node_modules" "cronsafe's modules" "/app/package.json" "cronsafe's package.json" "/usr/bin" "tini and sh" "/usr/local/bin" "node" "/usr/lib" "the system libraries" "/usr/lib64" "the dynamic loader" "/bin" "tini and sh" "/lib" "the system libraries" "/lib64" "the dynamic loader" -}}
{{- $mounts := list (list "persistence.mountPath" $v.persistence.mountPath) -}}
{{- range $i, $m := $v.extraVolumeMounts -}}
{{- if kindIs "map" $m -}}{{- $mounts = append $mounts (list (printf "extraVolumeMounts[%d].mountPath" $i) (toString (get $m "mountPath"))) -}}{{- end -}}
{{- end -}}
{{- range $mounts -}}
{{- $key := index . 0 -}}
{{- $at := clean (index . 1) -}}
{{- if hasPrefix "/" $at -}}
{{- with get $own $at -}}
{{- fail (printf "%s (%s) is where the chart mounts %s, and the API server refuses two volumes at one path: choose another directory" $key $at .) -}}
{{- end -}}
{{- if eq $key "persistence.mountPath" }}{{- $_ := set $own $at "the data volume (persistence.mountPath)" }}{{- end -}}
{{- range $path := keys $needed | sortAlpha -}}
{{- if or (eq $at "/") (eq $at $path) (hasPrefix (printf "%s/" $at) $path) -}}
{{- fail (printf "%s (%s) would hide %s, %s, under a volume, and every Job would fail. Choose a directory of its own, such as /data (the default) or /var/lib/cronsafe" $key $at $path (get $needed $path)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* A volume mounted inside one that is read-only and has no directory at that path: the
runtime must make the mount point there and cannot (runc: "mkdir ...: read-only file
system"), so every pod waited in CreateContainerError, a Job that never ended, and Forbid
then started no later run. Such a volume: the chart's config (a ConfigMap volume, always
read-only, holding cronsafe.yaml alone), an extra ConfigMap or Secret volume without
`items` (its files are its keys, never a directory), an emptyDir mounted readOnly. Inside
another read-only volume (a PVC) the directory may be there already: left alone. */ -}}
{{- $sealed := list (list "/etc/cronsafe" "where the chart mounts the config (cronsafe.yaml), a read-only ConfigMap volume holding that file alone") -}}
{{- range $i, $m := $v.extraVolumeMounts -}}
{{- if and (kindIs "map" $m) (not (get $m "subPath")) (not (get $m "subPathExpr")) (hasPrefix "/" (toString (get $m "mountPath"))) -}}
{{- $at := clean (toString (get $m "mountPath")) -}}
{{- $name := toString (get $m "name") -}}
{{- $what := "" -}}
{{- if eq $name "config" }}{{- $what = "the chart's config volume, a read-only ConfigMap volume holding cronsafe.yaml alone" }}{{- end -}}
{{- range $v.extraVolumes -}}
{{- if and (kindIs "map" .) (eq (toString (get . "name")) $name) -}}
{{- $vol := . -}}
{{- range $kind := list "configMap" "secret" -}}
{{- $src := get $vol $kind -}}
{{- if and (kindIs "map" $src) (not (get $src "items")) -}}
{{- $what = printf "a %s volume (extraVolumes %s), read-only and holding only its keys as files" $kind $name -}}
{{- end -}}
{{- end -}}
{{- if and (hasKey $vol "emptyDir") (eq (toString (get $m "readOnly")) "true") -}}
{{- $what = printf "an emptyDir (extraVolumes %s) mounted readOnly, so always empty" $name -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $what }}{{- $sealed = append $sealed (list $at (printf "extraVolumeMounts[%d].mountPath, %s" $i $what)) }}{{- end -}}
{{- end -}}
{{- end -}}
{{- range $mounts -}}
{{- $key := index . 0 -}}
{{- $at := clean (index . 1) -}}
{{- range $sealed -}}
{{- $outer := index . 0 -}}
{{- if hasPrefix (printf "%s/" (trimSuffix "/" $outer)) $at -}}
{{- fail (printf "%s (%s) is inside %s, %s: the container runtime cannot make the mount point there (mkdir: read-only file system), so every pod would wait in CreateContainerError, a Job that never ends (and concurrencyPolicy Forbid then starts no later run). Mount it outside %s, such as %s-%s" $key $at $outer (index . 1) $outer $outer (base $at)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* With a read-only root file system (the default), what cronsafe writes (the output
directory, the SQLite ledger's directory, the lock file) must be on a writable volume: the
data volume, the /tmp emptyDir, the runtime's /dev/shm, or an extraVolumeMounts entry without
readOnly (the deepest mount holding the path decides). Elsewhere every run failed with EROFS (exit 1), which the
Job retried up to backoffLimit; NOTES said of such a ledger that it was "lost after every run". */ -}}
{{- if get ($v.securityContext | default dict) "readOnlyRootFilesystem" -}}
{{- $volumes := list (list (clean $v.persistence.mountPath) false) (list "/tmp" false) (list "/dev/shm" false) -}}
{{- range $v.extraVolumeMounts -}}
{{- if and (kindIs "map" .) (hasPrefix "/" (toString (get . "mountPath"))) -}}
{{- $volumes = append $volumes (list (clean (toString (get . "mountPath"))) (eq (toString (get . "readOnly")) "true")) -}}
{{- end -}}
{{- end -}}
{{- $writes := list -}}
{{- with $v.config.output.directory -}}
{{- $writes = append $writes (list "config.output.directory" (clean (include "cronsafe.dataPath" (list $ .))) (clean (include "cronsafe.dataPath" (list $ .)))) -}}
{{- end -}}
{{- if not $postgres -}}
{{- $ledger := clean (include "cronsafe.dataPath" (list . $v.config.state.sqlite)) -}}
{{- $writes = append $writes (list "config.state.sqlite" $ledger (dir $ledger)) -}}
{{- with $v.config.lock.path -}}
{{- $lock := clean (include "cronsafe.dataPath" (list $ .)) -}}
{{- $writes = append $writes (list "config.lock.path" $lock (dir $lock)) -}}
{{- end -}}
{{- end -}}
{{- range $writes -}}
{{- $key := index . 0 -}}{{- $path := index . 1 -}}{{- $in := index . 2 -}}
{{- $depth := -1 -}}{{- $readOnly := true -}}
{{- range $volumes -}}
{{- $at := index . 0 -}}
{{- if and (or (eq $at $in) (hasPrefix (printf "%s/" (trimSuffix "/" $at)) $in)) (gt (len $at) $depth) -}}
{{- $depth = len $at -}}{{- $readOnly = index . 1 -}}
{{- end -}}
{{- end -}}
{{- if lt $depth 0 -}}
{{- fail (printf "%s (%s) is on no volume, and the container's root file system is read-only (securityContext.readOnlyRootFilesystem): every run would fail (EROFS). Use a path relative to persistence.mountPath (%s), or mount a volume there with extraVolumes and extraVolumeMounts" $key $path $v.persistence.mountPath) -}}
{{- else if $readOnly -}}
{{- fail (printf "%s (%s) is on an extraVolumeMounts entry with readOnly: true: every run would fail (EROFS). Mount it writable, or use a path relative to persistence.mountPath (%s)" $key $path $v.persistence.mountPath) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* runAsUser 0 with runAsNonRoot (each from the container's securityContext, else the
pod's; values.yaml sets runAsNonRoot in both): the API server takes it, and the kubelet then
refuses to start the containers (CreateContainerConfigError). The pod waited forever, the
Job never failed, and Forbid started no later run. */ -}}
{{- $podSc := $v.podSecurityContext | default dict -}}
{{- $sc := $v.securityContext | default dict -}}
{{- $user := list "podSecurityContext.runAsUser" (get $podSc "runAsUser") -}}
{{- if and (hasKey $sc "runAsUser") (not (kindIs "invalid" (get $sc "runAsUser"))) }}{{- $user = list "securityContext.runAsUser" (get $sc "runAsUser") }}{{- end -}}
{{- $nonRoot := list "podSecurityContext.runAsNonRoot" (get $podSc "runAsNonRoot") -}}
{{- if and (hasKey $sc "runAsNonRoot") (not (kindIs "invalid" (get $sc "runAsNonRoot"))) }}{{- $nonRoot = list "securityContext.runAsNonRoot" (get $sc "runAsNonRoot") }}{{- end -}}
{{- if and (eq (toString (index $nonRoot 1)) "true") (eq (toString (index $user 1)) "0") -}}
{{- fail (printf "%s is 0 (root) and %s is true: the kubelet refuses to start the containers (CreateContainerConfigError), the pod waits forever, the Job never ends and concurrencyPolicy Forbid starts no later run. Set a non-zero runAsUser (the image's user is 65532), or, to run as root, runAsNonRoot: false in both securityContext and podSecurityContext" (index $user 0) (index $nonRoot 0)) -}}
{{- end -}}
{{- if and $v.metrics.podMonitor.enabled (not $v.metrics.enabled) -}}
{{- fail "metrics.podMonitor.enabled needs metrics.enabled (the pod serves /metrics only then)" -}}
{{- end -}}
{{- /* A short name is resolved by each node's runtime (docker.io on containerd, refused
or searched on CRI-O): a default install would render fine and every Job would then fail
with ErrImagePull. */ -}}
{{- $repo := $v.image.repository -}}
{{- /* A reference's grammar (distribution/reference): a tag or digest goes in image.tag /
image.digest, never in the repository, or the chart would render "repo:tag:appVersion". */ -}}
{{- if not (regexMatch "^[a-zA-Z0-9][a-zA-Z0-9.-]*(:[0-9]+)?(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)+$|^[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*$" $repo) -}}
{{- fail (printf "image.repository %q is not an image repository: expected a registry host and a lowercase path, such as ghcr.io/cronsafe/cronsafe, with no scheme, spaces, tag (set image.tag) or digest (set image.digest)" $repo) -}}
{{- end -}}
{{- if not (regexMatch "^([^/]*[.:][^/]*|localhost)/" $repo) -}}
{{- $pulled := ternary (printf "docker.io/%s" $repo) (printf "docker.io/library/%s" $repo) (contains "/" $repo) -}}
{{- fail (printf "image.repository %q has no registry host, so nodes would pull %s (or refuse a short name). Set image.repository to the image's full path: ghcr.io/cronsafe/cronsafe (the default), your own image built FROM it (e.g. registry.example.com/team/cronsafe), or %s if that is really the one" $repo $pulled $pulled) -}}
{{- end -}}
{{- $name := include "cronsafe.configName" . -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $name) -}}
{{- if .Values.config.name -}}
{{- fail (printf "config.name %q: expected lowercase letters, digits and \"-\", starting and ending with a letter or digit" $name) -}}
{{- else -}}
{{- /* A release name may hold a dot (qc.v2), which cronsafe's name may not: said of a key the user never set, it misled. */ -}}
{{- fail (printf "config.name is not set, and its default, the release's full name %q, is not a cronsafe job name (lowercase letters, digits and \"-\", starting and ending with a letter or digit): set config.name (e.g. %q)" $name (replace "." "-" $name)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "true" when an argument of handler.command uses the {output} placeholder. */}}
{{- define "cronsafe.usesOutput" -}}
{{- range .Values.config.handler.command -}}{{- if contains "{output}" . -}}true{{- end -}}{{- end -}}
{{- end -}}

{{/*
"true" when the ledger is known to be PostgreSQL: the URL from config.state.postgres.existingSecret
or an extraEnv CRONSAFE_STATE_POSTGRES (extraEnvFrom may or may not carry it). "" otherwise.
*/}}
{{- define "cronsafe.postgresLedger" -}}
{{- if .Values.config.state.postgres.existingSecret -}}true
{{- else -}}
{{- range .Values.extraEnv }}{{- if eq (toString .name) "CRONSAFE_STATE_POSTGRES" }}true{{- end }}{{- end -}}
{{- end -}}
{{- end -}}

{{/*
"true" when the chart's own PVC may be mounted by pods on several nodes (ReadWriteMany):
on such a (network) volume a flock is unreliable and SQLite is unsafe. "" otherwise.
An existingClaim's modes are unknown here: cronsafe's own start-up check (statfs) decides.
*/}}
{{- define "cronsafe.sharedVolume" -}}
{{- $p := .Values.persistence -}}
{{- if and $p.enabled (not $p.existingClaim) (has "ReadWriteMany" $p.accessModes) -}}true{{- end -}}
{{- end -}}
