{{/* The enabled components: a list of dicts with the component name (.component). */}}
{{- define "bp.components" -}}
{{- $list := list }}
{{- if .Values.hostpath.enabled }}{{ $list = append $list "hostpath-bucket-provisioner" }}{{ end }}
{{- if .Values.s3.enabled }}{{ $list = append $list "s3-bucket-provisioner" }}{{ end }}
{{- if .Values.hostpathVolumes.enabled }}{{ $list = append $list "hostpath-volume-provisioner" }}{{ end }}
{{- toJson $list }}
{{- end -}}

{{/* Whether the cluster serves the Prometheus Operator's kind .kind. */}}
{{- define "bp.hasMonitoring" -}}
{{- if .root.Capabilities.APIVersions.Has (printf "monitoring.coreos.com/v1/%s" .kind) }}true{{ end }}
{{- end -}}
