{{/*
The alert rules of files/alerts.yml with this release's selectors, grouping, extra labels and
runbook URLs filled in, minus the alerts in alerts.disabled: a YAML document `groups: [...]`.
deploy/prometheus/render_alerts.py renders the plain Prometheus file from this same template.
*/}}
{{- define "resolver.alertGroups" -}}
{{- $a := .Values.alerts }}
{{- $source := .Files.Get "files/alerts.yml" | fromYaml }}
{{- if or (hasKey $source "Error") (not $source.groups) }}
{{- fail "files/alerts.yml is missing from the chart or is not a rules file with a groups: list" }}
{{- end }}
{{- $scope := "" }}
{{- if $a.selectRelease }}
{{- $scope = printf "namespace=%q, release=%q" .Release.Namespace .Release.Name }}
{{- end }}
{{- $worker := join ", " (compact (list $a.workerSelector $scope)) }}
{{- $api := join ", " (compact (list $a.apiSelector $scope)) }}
{{- $by := join ", " $a.groupBy }}
{{- $runbook := default (printf "%s/docs/runbook.md" (trimSuffix "/" .Chart.Home)) $a.runbookBaseUrl }}
{{- $groups := list }}
{{- range $group := $source.groups }}
{{- $rules := list }}
{{- range $rule := $group.rules }}
{{- if not (has $rule.alert $a.disabled) }}
{{- $expr := $rule.expr | replace "${worker}" $worker | replace "${api}" $api | replace "${by}" $by }}
{{- $labels := merge (dict) $rule.labels ($a.ruleLabels | default dict) }}
{{- $annotations := merge (dict "runbook_url" (printf "%s#%s" $runbook (lower $rule.alert))) $rule.annotations }}
{{- if and $a.consoleUrl $rule.console }}
{{- $annotations = merge (dict "console_url" (printf "%s%s" (trimSuffix "/" $a.consoleUrl) $rule.console)) $annotations }}
{{- end }}
{{- $rules = append $rules (merge (dict "expr" $expr "labels" $labels "annotations" $annotations) (omit $rule "expr" "labels" "annotations" "console")) }}
{{- end }}
{{- end }}
{{- $groups = append $groups (dict "name" $group.name "rules" $rules) }}
{{- end }}
{{- toYaml (dict "groups" $groups) }}
{{- end }}
