{{/*
The API calls each component makes, one values-free list per component. tests/chart/test_rbac_matches_code.py
runs each component against a test API server and fails on any grant its requests do not use, or lack.
Names are passed in (they depend on the release), never read from values.
*/}}

{{/*
Informers list and watch (the volume plugins' claims, volumes, StorageClasses and CSINodes too); a direct read
happens only for a pod whose gate removal lost a race (a PodGroup whose status write conflicted waits for its watch
instead, and so does a volume or claim whose write did). VolumeBinding's PreBind patches a PersistentVolume's
claimRef (a static volume bound to a WaitForFirstConsumer claim) and a claim's volume.kubernetes.io/selected-node
annotation (a volume to provision). DynamicResources' PreBind patches a ResourceClaim's finalizer
(resource.kubernetes.io/delete-protection) and its status (allocation, reservedFor); kube-apiserver 1.36 also checks
`patch` of the `resourceclaims/binding` subresource, at cluster scope, for every change of those two fields (a Role
would not do). Events are only ever created. The native scheduling.k8s.io/v1alpha2 PodGroups are watched when the
cluster serves them; granting them on a cluster that does not is harmless.
*/}}
{{- define "phalanx.scheduler.clusterRules" -}}
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, patch, delete]
- apiGroups: [""]
  resources: [pods/binding]
  verbs: [create]
- apiGroups: [""]
  resources: [pods/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [nodes]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
- apiGroups: [scheduling.k8s.io]
  resources: [priorityclasses]
  verbs: [list, watch]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [persistentvolumeclaims, persistentvolumes]
  verbs: [list, watch, patch]
- apiGroups: [storage.k8s.io]
  resources: [storageclasses, csinodes]
  verbs: [list, watch]
- apiGroups: [resource.k8s.io]
  resources: [deviceclasses, resourceslices]
  verbs: [list, watch]
- apiGroups: [resource.k8s.io]
  resources: [resourceclaims]
  verbs: [list, watch, patch]
- apiGroups: [resource.k8s.io]
  resources: [resourceclaims/status, resourceclaims/binding]
  verbs: [patch]
- apiGroups: [scheduling.phalanx.dev]
  resources: [workloads, queues]
  verbs: [list, watch]
- apiGroups: [scheduling.phalanx.dev]
  resources: [podgroups]
  verbs: [list, watch, patch]
- apiGroups: [scheduling.phalanx.dev]
  resources: [podgroups/status]
  verbs: [patch]
- apiGroups: [scheduling.k8s.io]
  resources: [podgroups]
  verbs: [list, watch, patch]
- apiGroups: [scheduling.k8s.io]
  resources: [podgroups/status]
  verbs: [patch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create]
{{- end }}

{{/* The explain API (scheduler/serve): a SubjectAccessReview decides whether each request's user may read it. */}}
{{- define "phalanx.scheduler.explainClusterRules" -}}
- apiGroups: [authorization.k8s.io]
  resources: [subjectaccessreviews]
  verbs: [create]
{{- end }}

{{/*
The explain API trusts the front proxy as kube-apiserver describes it in kube-system (kube/front_proxy.py): a Role
there, bound to the scheduler (the built-in extension-apiserver-authentication-reader grants list and watch too).
*/}}
{{- define "phalanx.scheduler.frontProxyRules" -}}
- apiGroups: [""]
  resources: [configmaps]
  resourceNames: [extension-apiserver-authentication]
  verbs: [get]
{{- end }}

{{/* Call with (dict "lease" <name>). `create` cannot be limited by name in RBAC. */}}
{{- define "phalanx.scheduler.namespacedRules" -}}
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [create]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [{{ .lease }}]
  verbs: [get, update]
{{- end }}

{{/*
What `kubectl phalanx explain|status` asks the scheduler's explain API (phalanx/kubectl/served.py): a unit's
explanation, in its namespace (`get` on the subresource, named), and the pending work of a namespace (`list`; bound
cluster-wide, of every namespace for `status -A`). Discovery, which finds the API, is every user's.
*/}}
{{- define "phalanx.viewer.explainRules" -}}
- apiGroups: [explain.phalanx.dev]
  resources: [pods/explanation, podgroups/explanation]
  verbs: [get]
- apiGroups: [explain.phalanx.dev]
  resources: [pendingwork]
  verbs: [list]
{{- end }}

{{/*
Without the explain API: what `kubectl phalanx explain|status` reads to compute its answer (phalanx/kubectl/live.py): one LIST of each kind the scheduler
reads (native scheduling.k8s.io/v1alpha2 PodGroups where the cluster serves them), the namespace asked
about (and every namespace, whose labels a namespaceSelector reads), and the scheduler's ConfigMap (its configuration). Only get and list: the plugin writes nothing, and
lists only, never watches. Call with (dict "configMap" <name>).
*/}}
{{- define "phalanx.viewer.clusterRules" -}}
- apiGroups: [""]
  resources: [pods, nodes]
  verbs: [list]
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get, list]
- apiGroups: [""]
  resources: [configmaps]
  resourceNames: [{{ .configMap }}]
  verbs: [get]
- apiGroups: [scheduling.k8s.io]
  resources: [priorityclasses, podgroups]
  verbs: [list]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [list]
- apiGroups: [""]
  resources: [persistentvolumeclaims, persistentvolumes]
  verbs: [list]
- apiGroups: [storage.k8s.io]
  resources: [storageclasses, csinodes]
  verbs: [list]
- apiGroups: [resource.k8s.io]
  resources: [deviceclasses, resourceslices, resourceclaims]
  verbs: [list]
- apiGroups: [scheduling.phalanx.dev]
  resources: [podgroups, queues]
  verbs: [list]
{{- end }}

{{/*
What admission looks up (webhook/lookups.py informers). The native scheduling.k8s.io/v1alpha2 kinds are
watched when the cluster serves them; granting them on a cluster that does not is harmless.
*/}}
{{- define "phalanx.webhook.clusterRules" -}}
- apiGroups: [scheduling.k8s.io]
  resources: [priorityclasses, workloads, podgroups]
  verbs: [get, list, watch]
- apiGroups: [scheduling.phalanx.dev]
  resources: [workloads, podgroups, queues]
  verbs: [get, list, watch]
{{- end }}

{{/*
self-managed certificates: caBundle injection, a read then a replace guarded by resourceVersion.
Call with (dict "mutating" <name> "validating" <name>).
*/}}
{{- define "phalanx.webhook.certificateClusterRules" -}}
- apiGroups: [admissionregistration.k8s.io]
  resources: [mutatingwebhookconfigurations]
  resourceNames: [{{ .mutating }}]
  verbs: [get, update]
- apiGroups: [admissionregistration.k8s.io]
  resources: [validatingwebhookconfigurations]
  resourceNames: [{{ .validating }}]
  verbs: [get, update]
{{- end }}

{{/* self-managed certificates and the explain API: its APIService's caBundle. Call with (dict "apiService" <name>). */}}
{{- define "phalanx.webhook.apiServiceRules" -}}
- apiGroups: [apiregistration.k8s.io]
  resources: [apiservices]
  resourceNames: [{{ .apiService }}]
  verbs: [get, update]
{{- end }}

{{/* self-managed certificates: the Secret. Call with (dict "secret" <name>). */}}
{{- define "phalanx.webhook.certificateNamespacedRules" -}}
- apiGroups: [""]
  resources: [secrets]
  verbs: [create]
- apiGroups: [""]
  resources: [secrets]
  resourceNames: [{{ .secret }}]
  verbs: [get, update]
{{- end }}

{{/* The pre-delete hook: call with (dict "mutating" <name> "validating" <name>). */}}
{{- define "phalanx.cleanup.clusterRules" -}}
- apiGroups: [admissionregistration.k8s.io]
  resources: [mutatingwebhookconfigurations]
  resourceNames: [{{ .mutating }}]
  verbs: [delete]
- apiGroups: [admissionregistration.k8s.io]
  resources: [validatingwebhookconfigurations]
  resourceNames: [{{ .validating }}]
  verbs: [delete]
{{- end }}

{{/* Call with (dict "secret" <name>). */}}
{{- define "phalanx.cleanup.namespacedRules" -}}
- apiGroups: [""]
  resources: [secrets]
  resourceNames: [{{ .secret }}]
  verbs: [delete]
{{- end }}
