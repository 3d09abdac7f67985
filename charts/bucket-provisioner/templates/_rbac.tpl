{{/* The ClusterRole, Role and bindings of a bucket provisioner (.name, .ctx). */}}
{{- define "bp.bucketRbac" -}}
{{- $root := .ctx.root }}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .name }}
  labels:
    {{- include "bp.labels" .ctx | nindent 4 }}
rules:
  - apiGroups: ["objectbucket.io"]
    resources: ["objectbucketclaims"]
    verbs: ["get", "list", "watch", "patch", "update"]
  - apiGroups: ["objectbucket.io"]
    resources: ["objectbucketclaims/status", "objectbucketclaims/finalizers"]
    verbs: ["get", "patch", "update"]
  - apiGroups: ["objectbucket.io"]
    resources: ["objectbuckets"]
    verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
  - apiGroups: ["objectbucket.io"]
    resources: ["objectbuckets/status"]
    verbs: ["get", "patch", "update"]
  - apiGroups: [""]
    resources: ["secrets", "configmaps"]
    verbs: ["get", "list", "watch", "create", "update", "delete"]
  - apiGroups: ["storage.k8s.io"]
    resources: ["storageclasses"]
    verbs: ["get", "list", "watch"]
  - apiGroups: [""]
    resources: ["namespaces"]
    verbs: ["get", "list", "watch"]
  - apiGroups: ["events.k8s.io"]
    resources: ["events"]
    verbs: ["create", "patch"]
  - apiGroups: ["sharing.objectbucket.io"]
    resources: ["bucketsharegrants"]
    verbs: ["get", "list", "watch"]
  - apiGroups: ["sharing.objectbucket.io"]
    resources: ["bucketsharegrants/status"]
    verbs: ["get", "patch", "update"]
---
{{ include "bp.bindings" . }}
{{- end -}}

{{/* A ClusterRoleBinding of ClusterRole .name, and the Lease Role and its binding. */}}
{{- define "bp.bindings" -}}
{{- $root := .ctx.root }}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ .name }}
  labels:
    {{- include "bp.labels" .ctx | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ .name }}
subjects:
  - kind: ServiceAccount
    name: {{ .name }}
    namespace: {{ $root.Release.Namespace }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .name }}-leader
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "bp.labels" .ctx | nindent 4 }}
rules:
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    verbs: ["get", "create", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .name }}-leader
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "bp.labels" .ctx | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ .name }}-leader
subjects:
  - kind: ServiceAccount
    name: {{ .name }}
    namespace: {{ $root.Release.Namespace }}
{{- end -}}
