//! Expansion of bound volumes, as an out-of-tree resizer does it for kube-controller-manager.
//!
//! kube-controller-manager's expand controller resizes only volumes of in-tree plugins that can
//! expand; for every other volume it leaves the claim to an external resizer (and names it in
//! the claim's `volume.kubernetes.io/storage-resizer` annotation where it knows it, as for CSI
//! drivers). The apiserver lets a claim's `spec.resources.requests.storage` grow only when its
//! StorageClass has `allowVolumeExpansion: true`. This controller is the resizer of the volumes
//! it provisioned: for a bound claim of one of our PVs whose request exceeds its
//! `status.capacity`, and whose resizer annotation is absent or names us, it
//!
//! 1. marks the claim `Resizing` (condition), with `status.allocatedResources` the new size and
//!    `status.allocatedResourceStatuses.storage` `ControllerResizeInProgress`;
//! 2. asks the backend ([`VolumeProvisioner::expand`]) to hold the volume to the new size;
//! 3. writes the new size into the PV's `spec.capacity`;
//! 4. writes it into the claim's `status.capacity`, drops the resize conditions and the
//!    allocated resource status, and tells the claim (`VolumeResizeSuccessful`).
//!
//! Each step may be repeated, so a crash between two of them is healed by the next reconcile. A
//! request below the PV's capacity is refused (`VolumeResizeFailed`, Warning, and a log line):
//! volumes never shrink. A backend's permanent refusal marks the claim
//! `ControllerResizeInfeasible`; the apiserver then lets its owner lower the request again.

use std::collections::BTreeMap;

use bucket_api::quantity::{QuantityError, parse_bytes};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use super::VolumeProvisioner;
use super::objects::is_ours;
use provisioner_runtime::backoff::Backoff;
use provisioner_runtime::cache::Recent;
use provisioner_runtime::events::{Events, publish};
use provisioner_runtime::telemetry::Metrics;

/// Set on a claim by kube-controller-manager: the resizer expected to expand its volume.
pub const ANNOTATION_STORAGE_RESIZER: &str = "volume.kubernetes.io/storage-resizer";
/// `status.allocatedResourceStatuses.storage` while the resizer works on it.
const IN_PROGRESS: &str = "ControllerResizeInProgress";
/// `status.allocatedResourceStatuses.storage` once the resizer refused the size for good.
const INFEASIBLE: &str = "ControllerResizeInfeasible";

/// The bytes a quantity stands for (`64Mi`, `1G`, `1.5Gi`, `100`), read as quotas are
/// ([`bucket_api::quantity::parse_bytes`]): a fraction of a byte, a negative size or one
/// beyond `u64` is an error saying so.
pub fn quantity_bytes(quantity: &Quantity) -> Result<u64, QuantityError> {
    parse_bytes(&quantity.0)
}

fn storage(resources: Option<&BTreeMap<String, Quantity>>) -> Option<u64> {
    resources.and_then(|r| r.get("storage")).and_then(|q| quantity_bytes(q).ok())
}

/// What one claim asks of its volume.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Wanted {
    /// The claim's PV, from our cache.
    pub(super) volume: std::sync::Arc<PersistentVolume>,
    /// `spec.resources.requests.storage`, as written.
    pub(super) request: Quantity,
}

/// The expansion `claim` waits for from this controller, if any: bound to a PV of ours (made by
/// `provisioner`, on `node` for a per-node controller), its resizer annotation absent or naming
/// us, asking for more than its `status.capacity`.
pub(super) fn wanted(
    claim: &PersistentVolumeClaim,
    volumes: &Recent<PersistentVolume>,
    provisioner: &str,
    node: Option<&str>,
) -> Option<Wanted> {
    if claim.meta().deletion_timestamp.is_some() {
        return None;
    }
    let resizer = claim.annotations().get(ANNOTATION_STORAGE_RESIZER);
    if resizer.is_some_and(|r| r != provisioner) {
        return None;
    }
    let status = claim.status.as_ref()?;
    if status.phase.as_deref() != Some("Bound") {
        return None;
    }
    let spec = claim.spec.as_ref()?;
    let request = spec.resources.as_ref()?.requests.as_ref()?.get("storage")?.clone();
    let requested = quantity_bytes(&request).ok()?;
    if requested <= storage(status.capacity.as_ref()).unwrap_or(0) {
        return None;
    }
    // Refused for good at this size: only a change of the request (or of the claim) retries.
    let state = status.allocated_resource_statuses.as_ref().and_then(|s| s.get("storage"));
    if state.map(String::as_str) == Some(INFEASIBLE)
        && storage(status.allocated_resources.as_ref()) == Some(requested)
    {
        return None;
    }
    let volume = volumes.get("", spec.volume_name.as_deref().filter(|v| !v.is_empty())?)?;
    let bound_to_it = volume.spec.as_ref()?.claim_ref.as_ref()?.uid == claim.uid();
    let ours = is_ours(&volume, provisioner, node) && volume.meta().deletion_timestamp.is_none();
    (bound_to_it && ours).then_some(Wanted { volume, request })
}

/// What the expansion needs of the controller's context.
pub(super) struct Resizer<'a, P> {
    pub(super) client: &'a Client,
    pub(super) provisioner: &'a P,
    pub(super) events: &'a Events,
    pub(super) metrics: &'a Metrics,
    pub(super) volumes: &'a Recent<PersistentVolume>,
    pub(super) backoff: &'a Backoff,
}

/// A failed expansion step: what to say and whether a retry helps.
struct Failure {
    reason: String,
    message: String,
    permanent: bool,
}

impl From<kube::Error> for Failure {
    fn from(e: kube::Error) -> Self {
        Self { reason: "KubernetesApiError".into(), message: e.to_string(), permanent: false }
    }
}

impl<P: VolumeProvisioner> Resizer<'_, P> {
    /// Expands the volume of `claim` as `wanted` says, or reports why not.
    pub(super) async fn expand(&self, claim: &PersistentVolumeClaim, wanted: Wanted) -> Action {
        let key = format!("{}/{}", claim.namespace().unwrap_or_default(), claim.name_any());
        match self.steps(claim, &wanted).await {
            Ok(()) => {
                self.backoff.reset(&key);
                Action::await_change()
            }
            Err(failure) => {
                self.metrics.error(&failure.reason);
                let volume = wanted.volume.name_any();
                tracing::warn!(claim = %key, volume = %volume, reason = %failure.reason,
                    permanent = failure.permanent, "expansion: {}", failure.message);
                let note = format!("expanding volume {volume}: {}", failure.message);
                publish(
                    self.events,
                    &claim.object_ref(&()),
                    EventType::Warning,
                    "VolumeResizeFailed",
                    &note,
                    "Resize",
                )
                .await;
                if failure.permanent {
                    Action::await_change()
                } else {
                    Action::requeue(self.backoff.next(&key))
                }
            }
        }
    }

    async fn steps(&self, claim: &PersistentVolumeClaim, wanted: &Wanted) -> Result<(), Failure> {
        let volume = &wanted.volume;
        let name = volume.name_any();
        let requested = quantity_bytes(&wanted.request).unwrap_or(0);
        let current = volume.spec.as_ref().and_then(|s| storage(s.capacity.as_ref())).unwrap_or(0);
        if requested < current {
            return Err(Failure {
                reason: "ShrinkRefused".into(),
                message: format!(
                    "the claim asks for {} but the volume holds {current} bytes; volumes are \
                     never shrunk",
                    wanted.request.0
                ),
                permanent: true,
            });
        }
        let claims: Api<PersistentVolumeClaim> =
            Api::namespaced(self.client.clone(), &claim.namespace().unwrap_or_default());
        let params = PatchParams::default();
        let conditions = kept_conditions(claim);
        // Marked once per size: marking again (a new transition time) would wake this very
        // reconcile again while the backend keeps failing.
        if !marked(claim, requested) {
            let mut resizing = conditions.clone();
            resizing.push(json!({
                "type": "Resizing",
                "status": "True",
                "lastTransitionTime": Time(k8s_openapi::jiff::Timestamp::now()),
            }));
            let mark = json!({"status": {
                "conditions": resizing,
                "allocatedResources": {"storage": wanted.request},
                "allocatedResourceStatuses": {"storage": IN_PROGRESS},
            }});
            claims.patch_status(&claim.name_any(), &params, &Patch::Merge(&mark)).await?;
        }
        let result = self.provisioner.expand(volume, &wanted.request).await;
        if let Err(source) = result {
            if source.is_permanent() {
                let infeasible = json!({"status": {
                    "conditions": conditions,
                    "allocatedResourceStatuses": {"storage": INFEASIBLE},
                }});
                claims.patch_status(&claim.name_any(), &params, &Patch::Merge(&infeasible)).await?;
            }
            let reason = match &source {
                provisioner_runtime::BackendError::Permanent { reason, .. } => reason.clone(),
                provisioner_runtime::BackendError::Transient { .. } => "ExpansionFailed".into(),
            };
            let permanent = source.is_permanent();
            return Err(Failure { reason, message: source.to_string(), permanent });
        }
        let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
        let capacity = json!({"spec": {"capacity": {"storage": wanted.request}}});
        let written = pvs.patch(&name, &params, &Patch::Merge(&capacity)).await?;
        self.volumes.wrote(written);
        let done = json!({"status": {
            "capacity": {"storage": wanted.request},
            "conditions": conditions,
            "allocatedResourceStatuses": {"storage": null},
        }});
        claims.patch_status(&claim.name_any(), &params, &Patch::Merge(&done)).await?;
        let from = claim
            .status
            .as_ref()
            .and_then(|s| s.capacity.as_ref()?.get("storage"))
            .map_or("nothing", |q| q.0.as_str());
        let note = format!("volume {name} expanded from {from} to {}", wanted.request.0);
        tracing::info!(claim = %claim.name_any(), volume = %name, "{note}");
        publish(
            self.events,
            &claim.object_ref(&()),
            EventType::Normal,
            "VolumeResizeSuccessful",
            &note,
            "Resize",
        )
        .await;
        Ok(())
    }
}

/// Whether the claim is marked as being resized to `requested` bytes already.
fn marked(claim: &PersistentVolumeClaim, requested: u64) -> bool {
    let Some(status) = claim.status.as_ref() else { return false };
    let state = status.allocated_resource_statuses.as_ref().and_then(|s| s.get("storage"));
    let resizing = status.conditions.iter().flatten().any(|c| c.type_ == "Resizing");
    state.map(String::as_str) == Some(IN_PROGRESS)
        && storage(status.allocated_resources.as_ref()) == Some(requested)
        && resizing
}

/// The claim's conditions other than those of a resize.
fn kept_conditions(claim: &PersistentVolumeClaim) -> Vec<serde_json::Value> {
    let conditions = claim.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    conditions
        .into_iter()
        .filter(|c| !matches!(c.type_.as_str(), "Resizing" | "FileSystemResizePending"))
        .filter_map(|c| serde_json::to_value(c).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_are_read_as_kubernetes_writes_them() {
        let bytes = |s: &str| quantity_bytes(&Quantity(s.into())).ok();
        assert_eq!(bytes("64Mi"), Some(64 << 20));
        assert_eq!(bytes("1Gi"), Some(1 << 30));
        assert_eq!(bytes("1.5Gi"), Some(3 << 29));
        assert_eq!(bytes("2G"), Some(2_000_000_000));
        assert_eq!(bytes("100"), Some(100));
        assert_eq!(bytes("1e3"), Some(1000));
        assert_eq!(bytes("20Ei"), None, "beyond u64");
        assert_eq!(bytes("-1"), None);
        assert_eq!(bytes("lots"), None);
        assert_eq!(bytes(""), None);
    }

    #[test]
    fn volume_sizes_read_as_quotas_do() {
        let bytes = |s: &str| quantity_bytes(&Quantity(s.into())).ok();
        assert_eq!(bytes("+1G"), Some(1_000_000_000), "a sign is part of the grammar");
        assert_eq!(bytes("1e+3"), Some(1000));
        assert_eq!(bytes("1500m"), None, "a fraction of a byte is refused, as in quotas");
        assert_eq!(bytes(&format!("0.{}1", "0".repeat(127))), None);
    }

    fn claim_with(status: serde_json::Value) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": "data", "namespace": "ns"},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn a_claim_is_marked_once_per_size_and_keeps_its_other_conditions() {
        let marked_for = |size: &str| {
            claim_with(json!({
                "phase": "Bound",
                "allocatedResources": {"storage": size},
                "allocatedResourceStatuses": {"storage": IN_PROGRESS},
                "conditions": [
                    {"type": "Resizing", "status": "True"},
                    {"type": "ModifyingVolume", "status": "True"},
                ],
            }))
        };
        assert!(marked(&marked_for("64Mi"), 64 << 20));
        assert!(!marked(&marked_for("64Mi"), 128 << 20), "a new size is marked again");
        let refused = claim_with(json!({
            "allocatedResources": {"storage": "64Mi"},
            "allocatedResourceStatuses": {"storage": INFEASIBLE},
        }));
        assert!(!marked(&refused, 64 << 20));
        let kept = kept_conditions(&marked_for("64Mi"));
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0]["type"], "ModifyingVolume");
    }
}
