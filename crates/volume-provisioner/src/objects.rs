//! The objects of the out-of-tree provisioning contract: which claims are ours to provision, and
//! the PersistentVolume made for one. Pure functions of what the caches hold.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt};

use super::{ProvisionedVolume, VolumeOptions};
use provisioner_runtime::watch::label_value;

/// Set by the PV binder on a claim it leaves to an external provisioner: that provisioner's name.
pub const ANNOTATION_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// The same, as older binders set it.
const ANNOTATION_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// Set by the scheduler on a claim of a `WaitForFirstConsumer` class: the node of its first pod.
pub const ANNOTATION_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// On every PV we make: our provisioner name. The binder leaves its deletion to us.
pub const ANNOTATION_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// On PVs made by a controller serving one node: that node. Other nodes' controllers leave the PV
/// alone.
pub const ANNOTATION_NODE: &str = "bucket-provisioner.io/node";
/// Holds a PV of ours until its asset is gone (or kept on purpose).
pub const FINALIZER: &str = "bucket-provisioner.io/volume-asset";
/// On every PV we make, so that we watch only ours: the provisioner name as a label value.
pub const LABEL_PROVISIONER: &str = "bucket-provisioner.io/volume-provisioner";

/// The PV of the claim with this UID.
pub fn pv_name_for_claim(claim_uid: &str) -> String {
    format!("pvc-{claim_uid}")
}

/// Whether a claim waits for `provisioner` to make its volume, as far as the claim itself says:
/// handed to it by the binder, not bound, not being deleted.
pub(crate) fn awaits_volume(claim: &PersistentVolumeClaim, provisioner: &str) -> bool {
    let annotations = claim.annotations();
    let named = [ANNOTATION_STORAGE_PROVISIONER, ANNOTATION_BETA_STORAGE_PROVISIONER]
        .iter()
        .any(|a| annotations.get(*a).map(String::as_str) == Some(provisioner));
    let bound =
        claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).is_some_and(|v| !v.is_empty());
    named && !bound && claim.meta().deletion_timestamp.is_none()
}

/// The node the scheduler chose for the claim, if any.
pub(crate) fn selected_node(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim.annotations().get(ANNOTATION_SELECTED_NODE).map(String::as_str).filter(|n| !n.is_empty())
}

/// Whether the class delays binding until a pod is scheduled.
pub(crate) fn waits_for_consumer(class: &StorageClass) -> bool {
    class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
}

/// What the backend is handed for `claim` of `class`.
pub(crate) fn options(claim: &PersistentVolumeClaim, class: &StorageClass) -> VolumeOptions {
    let capacity = claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref()?.requests.as_ref()?.get("storage").cloned());
    VolumeOptions {
        pv_name: pv_name_for_claim(claim.uid().as_deref().unwrap_or_default()),
        claim: claim.clone(),
        storage_class_name: class.name_any(),
        parameters: class.parameters.clone().unwrap_or_default(),
        reclaim_policy: class.reclaim_policy.clone().unwrap_or_else(|| "Delete".into()),
        capacity,
        selected_node: selected_node(claim).map(str::to_owned),
    }
}

/// The PV for `options`, as the backend described it, pre-bound to the claim.
pub(crate) fn volume(
    options: &VolumeOptions,
    class: &StorageClass,
    provisioned: ProvisionedVolume,
    provisioner: &str,
    node: Option<&str>,
) -> PersistentVolume {
    let claim = &options.claim;
    let claim_spec = claim.spec.clone().unwrap_or_default();
    let mut annotations = provisioned.annotations;
    annotations.insert(ANNOTATION_PROVISIONED_BY.into(), provisioner.into());
    match node {
        Some(node) => annotations.insert(ANNOTATION_NODE.into(), node.into()),
        None => annotations.remove(ANNOTATION_NODE),
    };
    let backend = provisioned.spec;
    let capacity = backend.capacity.clone().or_else(|| {
        let requested = options.capacity.clone().unwrap_or_else(|| Quantity("0".into()));
        Some(BTreeMap::from([("storage".to_owned(), requested)]))
    });
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(options.pv_name.clone()),
            labels: Some(BTreeMap::from([(LABEL_PROVISIONER.into(), label_value(provisioner))])),
            annotations: Some(annotations),
            finalizers: Some(vec![FINALIZER.into()]),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("PersistentVolumeClaim".into()),
                namespace: claim.namespace(),
                name: Some(claim.name_any()),
                uid: claim.uid(),
                resource_version: claim.resource_version(),
                ..Default::default()
            }),
            storage_class_name: Some(options.storage_class_name.clone()),
            access_modes: claim_spec.access_modes,
            volume_mode: claim_spec.volume_mode,
            mount_options: class.mount_options.clone(),
            persistent_volume_reclaim_policy: backend
                .persistent_volume_reclaim_policy
                .clone()
                .or_else(|| Some(options.reclaim_policy.clone())),
            capacity,
            ..backend
        }),
        status: None,
    }
}

/// What becomes of one of our PVs.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Nothing to do.
    Keep,
    /// Remove the asset, then the finalizer, then the PV.
    Delete,
    /// Being deleted: remove the asset, then the finalizer.
    DeleteAsset,
    /// Being deleted under `Retain`: only the finalizer goes.
    Release,
}

/// What to do with `volume`, a PV of ours.
pub(crate) fn fate(volume: &PersistentVolume) -> Fate {
    let policy = volume.spec.as_ref().and_then(|s| s.persistent_volume_reclaim_policy.as_deref());
    let phase = volume.status.as_ref().and_then(|s| s.phase.as_deref());
    let delete = policy.unwrap_or("Delete") == "Delete";
    let held = volume.finalizers().iter().any(|f| f == FINALIZER);
    match (volume.meta().deletion_timestamp.is_some(), delete, phase) {
        (true, _, _) if !held => Fate::Keep,
        // Deleted by hand while its claim uses it: the asset waits for the claim to go.
        (true, true, Some("Bound")) => Fate::Keep,
        (true, true, _) => Fate::DeleteAsset,
        (true, false, _) => Fate::Release,
        (false, true, Some("Released")) => Fate::Delete,
        (false, _, _) => Fate::Keep,
    }
}

/// Whether `volume` was made by `provisioner` (and, for a per-node controller, on `node`).
pub(crate) fn is_ours(volume: &PersistentVolume, provisioner: &str, node: Option<&str>) -> bool {
    let annotations = volume.annotations();
    let by = annotations.get(ANNOTATION_PROVISIONED_BY).map(String::as_str);
    let on = annotations.get(ANNOTATION_NODE).map(String::as_str);
    by == Some(provisioner) && (node.is_none() || on == node)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        HostPathVolumeSource, PersistentVolumeClaimSpec, PersistentVolumeStatus,
        VolumeResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn claim(annotations: &[(&str, &str)]) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                namespace: Some("app".into()),
                uid: Some("1234".into()),
                resource_version: Some("7".into()),
                annotations: Some(
                    annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
                ),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                storage_class_name: Some("fast".into()),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([("storage".into(), Quantity("1Gi".into()))])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn class(mode: Option<&str>) -> StorageClass {
        StorageClass {
            metadata: ObjectMeta { name: Some("fast".into()), ..Default::default() },
            provisioner: "example.com/volumes".into(),
            reclaim_policy: Some("Retain".into()),
            mount_options: Some(vec!["noatime".into()]),
            volume_binding_mode: mode.map(Into::into),
            parameters: Some(BTreeMap::from([("a".into(), "b".into())])),
            ..Default::default()
        }
    }

    #[test]
    fn only_claims_handed_to_us_and_unbound_await_a_volume() {
        let ours = claim(&[(ANNOTATION_STORAGE_PROVISIONER, "example.com/volumes")]);
        assert!(awaits_volume(&ours, "example.com/volumes"));
        assert!(!awaits_volume(&ours, "example.com/other"));
        let beta = claim(&[(ANNOTATION_BETA_STORAGE_PROVISIONER, "example.com/volumes")]);
        assert!(awaits_volume(&beta, "example.com/volumes"));
        assert!(!awaits_volume(&claim(&[]), "example.com/volumes"), "not handed over yet");
        let mut bound = ours.clone();
        bound.spec.as_mut().unwrap().volume_name = Some("pv".into());
        assert!(!awaits_volume(&bound, "example.com/volumes"));
        let mut deleted = ours;
        deleted.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
        assert!(!awaits_volume(&deleted, "example.com/volumes"));
        assert!(waits_for_consumer(&class(Some("WaitForFirstConsumer"))));
        assert!(!waits_for_consumer(&class(None)));
    }

    #[test]
    fn the_volume_is_pre_bound_and_named_after_the_claim() {
        let claim = claim(&[(ANNOTATION_SELECTED_NODE, "node-a")]);
        let class = class(Some("WaitForFirstConsumer"));
        let options = options(&claim, &class);
        assert_eq!(options.pv_name, "pvc-1234");
        assert_eq!(options.selected_node.as_deref(), Some("node-a"));
        assert_eq!(options.reclaim_policy, "Retain");
        let provisioned = ProvisionedVolume {
            spec: PersistentVolumeSpec {
                host_path: Some(HostPathVolumeSource { path: "/v/pvc-1234".into(), type_: None }),
                claim_ref: Some(ObjectReference {
                    name: Some("forged".into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            annotations: BTreeMap::from([
                (ANNOTATION_PROVISIONED_BY.to_owned(), "forged".to_owned()),
                ("backend/identity".to_owned(), "node-a".to_owned()),
            ]),
            note: None,
        };
        let pv = volume(&options, &class, provisioned, "example.com/volumes", Some("node-a"));
        assert_eq!(pv.name_any(), "pvc-1234");
        assert_eq!(pv.finalizers(), [FINALIZER]);
        let annotations = pv.annotations();
        assert_eq!(annotations[ANNOTATION_PROVISIONED_BY], "example.com/volumes");
        assert_eq!(annotations[ANNOTATION_NODE], "node-a");
        assert_eq!(annotations["backend/identity"], "node-a");
        assert_eq!(pv.labels()[LABEL_PROVISIONER], "example.com_volumes");
        let spec = pv.spec.unwrap();
        let claim_ref = spec.claim_ref.unwrap();
        assert_eq!(
            (claim_ref.namespace.as_deref(), claim_ref.name.as_deref(), claim_ref.uid.as_deref()),
            (Some("app"), Some("data"), Some("1234"))
        );
        assert_eq!(spec.persistent_volume_reclaim_policy.as_deref(), Some("Retain"));
        assert_eq!(spec.mount_options, Some(vec!["noatime".into()]));
        assert_eq!(spec.access_modes, Some(vec!["ReadWriteOnce".into()]));
        assert_eq!(spec.capacity.unwrap()["storage"], Quantity("1Gi".into()));
        assert_eq!(spec.host_path.unwrap().path, "/v/pvc-1234");
        assert_eq!(spec.storage_class_name.as_deref(), Some("fast"));
    }

    #[test]
    fn a_backend_override_of_the_reclaim_policy_wins() {
        let claim = claim(&[]);
        let class = class(None);
        let options = options(&claim, &class);
        let provisioned = ProvisionedVolume {
            spec: PersistentVolumeSpec {
                persistent_volume_reclaim_policy: Some("Delete".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let pv = volume(&options, &class, provisioned, "p", None);
        assert!(!pv.annotations().contains_key(ANNOTATION_NODE));
        assert_eq!(pv.spec.unwrap().persistent_volume_reclaim_policy.as_deref(), Some("Delete"));
    }

    #[test]
    fn released_volumes_under_delete_go_and_retained_ones_stay() {
        let pv = |policy: &str, phase: &str, deleting: bool, held: bool| PersistentVolume {
            metadata: ObjectMeta {
                deletion_timestamp: deleting.then(|| Time(jiff::Timestamp::now())),
                finalizers: held.then(|| vec![FINALIZER.to_owned()]),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                persistent_volume_reclaim_policy: Some(policy.into()),
                ..Default::default()
            }),
            status: Some(PersistentVolumeStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        };
        assert_eq!(fate(&pv("Delete", "Released", false, true)), Fate::Delete);
        assert_eq!(fate(&pv("Retain", "Released", false, true)), Fate::Keep);
        assert_eq!(fate(&pv("Delete", "Bound", false, true)), Fate::Keep);
        assert_eq!(fate(&pv("Delete", "Bound", true, true)), Fate::Keep);
        assert_eq!(fate(&pv("Delete", "Available", true, true)), Fate::DeleteAsset);
        assert_eq!(fate(&pv("Retain", "Bound", true, true)), Fate::Release);
        assert_eq!(fate(&pv("Delete", "Released", true, false)), Fate::Keep);
    }
}
