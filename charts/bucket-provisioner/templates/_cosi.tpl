{{/* COSI (objectstorage.k8s.io) beside a provisioner, when cosi.enabled: the upstream sidecar
in the same pod, the two talking over a socket on an emptyDir. */}}

{{/* The socket's directory in both containers. */}}
{{- define "bp.cosiDir" -}}/var/lib/cosi{{- end -}}

{{/* The provisioner's COSI flags (.root, .driverName, and .parameters: the store a backend
that serves several is to use, as a StorageClass would name it). */}}
{{- define "bp.cosiArgs" -}}
{{- if .root.Values.cosi.enabled }}
- --cosi-endpoint=unix://{{ include "bp.cosiDir" . }}/cosi.sock
{{- with .driverName }}
- --cosi-driver-name={{ . }}
{{- end }}
{{- range $key, $value := .parameters }}
- {{ printf "--cosi-parameter=%s=%s" $key (toString $value) | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The socket's mount in either container. */}}
{{- define "bp.cosiMount" -}}
{{- if .Values.cosi.enabled }}
- name: cosi-socket
  mountPath: {{ include "bp.cosiDir" . }}
{{- end }}
{{- end -}}

{{/* The socket's volume, private to the pod. */}}
{{- define "bp.cosiVolume" -}}
{{- if .Values.cosi.enabled }}
- name: cosi-socket
  emptyDir: {}
{{- end }}
{{- end -}}

{{/* The upstream sidecar container: it watches Buckets and BucketAccesses and calls the driver
over the socket. (.root; .token: mount the ServiceAccount token, where the pod does not
automount it.) */}}
{{- define "bp.cosiSidecar" -}}
{{- if .root.Values.cosi.enabled }}
{{- $s := .root.Values.cosi.sidecar }}
- name: cosi-sidecar
  image: {{ $s.image }}
  imagePullPolicy: {{ $s.pullPolicy }}
  env:
    - name: DRIVER_ADDR # v1alpha1 (v0.2.2)
      value: unix://{{ include "bp.cosiDir" . }}/cosi.sock
    - name: COSI_ENDPOINT # v1alpha2 (main)
      value: unix://{{ include "bp.cosiDir" . }}/cosi.sock
    - name: POD_NAMESPACE # where the v1alpha1 sidecar keeps its leader Lease
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
  resources:
    {{- toYaml $s.resources | nindent 4 }}
  securityContext:
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    capabilities:
      drop: ["ALL"]
  volumeMounts:
    {{- include "bp.cosiMount" .root | trim | nindent 4 }}
    {{- if .token }}
    {{- include "bp.tokenMount" .root | nindent 4 }}
    {{- end }}
{{- end }}
{{- end -}}

{{/* What the sidecar and the driver's COSI side do as the pod's ServiceAccount (.ctx, .name,
and .webIdentity where the driver serves accesses of authenticationType IAM):
the rules of 10-rbac.yaml in each deploy/cosi folder. Its leader Lease is covered by the provisioner's own
Role in the same namespace. */}}
{{- define "bp.cosiRbac" -}}
{{- $root := .ctx.root }}
{{- if $root.Values.cosi.enabled }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .name }}-cosi
  labels:
    {{- include "bp.labels" .ctx | nindent 4 }}
rules:
  - apiGroups: ["objectstorage.k8s.io"]
    resources: ["buckets"]
    verbs: ["get", "list", "watch", "update"]
  - apiGroups: ["objectstorage.k8s.io"]
    resources: ["buckets/status"]
    verbs: ["update"]
  - apiGroups: ["objectstorage.k8s.io"]
    resources: ["bucketaccesses"]
    verbs: ["get", "list", "watch", "update", "delete"]
  - apiGroups: ["objectstorage.k8s.io"]
    resources: ["bucketaccesses/status"]
    verbs: ["update"]
  - apiGroups: ["objectstorage.k8s.io"]
    resources: ["bucketclaims"]
    verbs: ["get", "list", "watch", "update"]
  - apiGroups: ["objectstorage.k8s.io"]
    resources: ["bucketclaims/status"]
    verbs: ["update", "patch"]
  - apiGroups: ["objectstorage.k8s.io"]
    resources: ["bucketclasses", "bucketaccessclasses"]
    verbs: ["get"]
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["get", "list", "watch", "create", "update", "delete"]
  - apiGroups: [""]
    resources: ["events"]
    verbs: ["create", "update", "patch"]
{{- if .webIdentity }}
  # v1alpha1 accesses of authenticationType IAM (hostPath): tokens reviewed, ServiceAccounts
  # followed.
  - apiGroups: ["authentication.k8s.io"]
    resources: ["tokenreviews"]
    verbs: ["create"]
  - apiGroups: [""]
    resources: ["serviceaccounts"]
    verbs: ["get", "list", "watch"]
{{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ .name }}-cosi
  labels:
    {{- include "bp.labels" .ctx | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ .name }}-cosi
subjects:
  - kind: ServiceAccount
    name: {{ .name }}
    namespace: {{ $root.Release.Namespace }}
{{- end }}
{{- end -}}
