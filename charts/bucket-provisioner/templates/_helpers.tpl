{{/* The name of a component's objects: `namePrefix` then the component. */}}
{{- define "bp.name" -}}
{{- printf "%s%s" .root.Values.namePrefix .component -}}
{{- end -}}

{{/* The image every container runs. */}}
{{- define "bp.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Labels that select a component's pods; stable across upgrades. */}}
{{- define "bp.selector" -}}
app.kubernetes.io/name: {{ include "bp.name" . }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/* Labels of every object of a component. */}}
{{- define "bp.labels" -}}
{{ include "bp.selector" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{/* The downward-API variables the provisioners read. */}}
{{- define "bp.podEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end -}}

{{- define "bp.nodeEnv" -}}
- name: NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
{{- end -}}

{{/* The ServiceAccount token's mount, for a container of a pod that does not automount it. */}}
{{- define "bp.tokenMount" -}}
- name: token
  mountPath: /var/run/secrets/kubernetes.io/serviceaccount
  readOnly: true
{{- end -}}

{{/* What automounting would give every container, for the containers that mount it. */}}
{{- define "bp.tokenVolume" -}}
- name: token
  projected:
    sources:
      - serviceAccountToken:
          path: token
          expirationSeconds: 3607
      - configMap:
          name: kube-root-ca.crt
          items:
            - key: ca.crt
              path: ca.crt
      - downwardAPI:
          items:
            - path: namespace
              fieldRef:
                fieldPath: metadata.namespace
{{- end -}}

{{/* Common controller flags from a component's values (.values). */}}
{{- define "bp.controllerArgs" -}}
{{- if not .values.leaderElection.enabled }}
- --leader-elect=false
{{- else if ne (int .values.leaderElection.leaseSeconds) 15 }}
- --leader-lease-seconds={{ .values.leaderElection.leaseSeconds }}
{{- end }}
{{- if ne (int .values.workers) 4 }}
- --workers={{ .values.workers }}
{{- end }}
{{- if and (hasKey .values "usageIntervalSeconds") (ne (int .values.usageIntervalSeconds) 60) }}
- --usage-interval-seconds={{ .values.usageIntervalSeconds }}
{{- end }}
{{- with .values.extraArgs }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Scheduling, pull secrets and annotations of a component's pods. */}}
{{- define "bp.podPlacement" -}}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The StorageClasses of a component: .classes, .provisioner, and .extra (parameters added
to each class that does not set them). */}}
{{- define "bp.storageClasses" -}}
{{- range .classes }}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: {{ .name }}
  labels:
    {{- include "bp.labels" $.ctx | nindent 4 }}
  {{- with .annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
provisioner: {{ $.provisioner }}
reclaimPolicy: {{ .reclaimPolicy | default "Delete" }}
{{- with .volumeBindingMode }}
volumeBindingMode: {{ . }}
{{- end }}
{{- $parameters := merge (deepCopy (.parameters | default dict)) ($.extra | default dict) }}
{{- with $parameters }}
parameters:
  {{- range $key, $value := . }}
  {{ $key }}: {{ $value | toString | quote }}
  {{- end }}
{{- end }}
{{- end }}
{{- end -}}
