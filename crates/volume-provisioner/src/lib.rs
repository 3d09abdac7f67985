//! The volume side: dynamic provisioning of PersistentVolumes for PersistentVolumeClaims, on the
//! same runtime as the bucket side.
//!
//! # Writing a volume backend
//!
//! A backend implements [`VolumeProvisioner`]: make the storage of one volume and say how pods
//! reach it, and remove it again. The library follows the contract kube-controller-manager's
//! PersistentVolume binder expects of an out-of-tree provisioner, and the backend never talks to
//! Kubernetes:
//!
//! | event | library does | backend called |
//! |---|---|---|
//! | a claim the binder hands to us (`volume.kubernetes.io/storage-provisioner`), not bound, of a class naming us; for `WaitForFirstConsumer` once the scheduler chose a node (`volume.kubernetes.io/selected-node`) | creates the PV `pvc-<claim uid>`, pre-bound to the claim (`claimRef`), with the class's reclaim policy and mount options, `pv.kubernetes.io/provisioned-by` and a finalizer; the binder then binds both | [`VolumeProvisioner::provision`] |
//! | a PV of ours `Released` under `Delete` | removes the asset, then the finalizer, then the PV | [`VolumeProvisioner::delete`] |
//! | a PV of ours deleted by hand (under `Delete`, not bound) | removes the asset, then the finalizer | [`VolumeProvisioner::delete`] |
//! | a PV of ours deleted by hand under `Retain` | removes the finalizer; the asset stays | — |
//! | a bound claim of one of our PVs asking for more than its `status.capacity` (its class has `allowVolumeExpansion: true`; its `volume.kubernetes.io/storage-resizer` annotation absent or naming us) | marks the claim `Resizing`, then writes the new size into the PV's `spec.capacity` and the claim's `status.capacity`; a request below the PV's capacity is refused (see [`expansion`](self#expansion)) | [`VolumeProvisioner::expand`] |
//!
//! ## Every call may be repeated
//! The process can stop between any two steps, and a retry gets **the same**
//! [`VolumeOptions::pv_name`]. Name the asset after it, never after randomness or time, so
//! `provision` of a volume that an earlier call made succeeds with the same answer, and `delete`
//! of something already gone succeeds.
//!
//! ## Ownership is yours to check
//! A PV carries what anyone with the right to write PVs put there. Keep your own record of what
//! you made (and where), and let `delete` remove only what that record names; a volume made by
//! another instance of your backend (another node's, say) is a [`BackendError::permanent`]
//! refusal, and the library leaves the PV alone.
//!
//! ## Errors say whether retrying helps
//! As for buckets: [`BackendError::permanent`] for what only a change of the claim or the
//! StorageClass can fix (an unknown parameter), reported as a Warning Event with your reason and
//! not retried until one of them changes; [`BackendError::transient`] for the rest, retried with
//! exponential backoff. Every failure is an Event (on the claim while provisioning, on the PV
//! while deleting) and a log line.
//!
//! ## Expansion
//! The library is the resizer of the volumes it provisioned, following the contract
//! kube-controller-manager's expand controller leaves to out-of-tree resizers: the claim is
//! marked `Resizing` with `status.allocatedResources` and `allocatedResourceStatuses`
//! (`ControllerResizeInProgress`), the backend grows the volume, the PV's `spec.capacity` and
//! then the claim's `status.capacity` take the new size, and the resize marks go
//! (`VolumeResizeSuccessful` Event). A backend that cannot grow volumes keeps the default
//! [`VolumeProvisioner::expand`], a permanent `ExpansionNotSupported` refusal; the claim is then
//! marked `ControllerResizeInfeasible`. Shrinking is never asked of a backend: a request below
//! the PV's capacity is refused with a `VolumeResizeFailed` Event (reason `ShrinkRefused` in the
//! log and the error metric). The ServiceAccount needs `patch` on `persistentvolumeclaims/status`.
//!
//! ## What to return
//! [`ProvisionedVolume::spec`] holds the volume source (`hostPath`, `local`, `nfs`, `csi`, ...)
//! and, where the backend knows better than the claim, `capacity`, `nodeAffinity` or the reclaim
//! policy (an operator's override); the library fills in the claim reference, class, access
//! modes, volume mode and mount options. [`ProvisionedVolume::annotations`] go on the PV: record
//! there what `delete` needs to find your record.

mod controller;
mod error;
mod expansion;
mod objects;
mod run;

/// Flags, client, logging and the supervised run of the volume side, for a backend's `main`.
pub mod runtime {
    pub use crate::run::run_volumes;
    pub use provisioner_runtime::runtime::*;
}

use std::collections::BTreeMap;
use std::future::Future;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

pub use controller::{VolumeControllerConfig, run_volume_controller};
pub use expansion::{ANNOTATION_STORAGE_RESIZER, quantity_bytes};
pub use objects::{
    ANNOTATION_NODE, ANNOTATION_PROVISIONED_BY, ANNOTATION_SELECTED_NODE,
    ANNOTATION_STORAGE_PROVISIONER, FINALIZER, LABEL_PROVISIONER, pv_name_for_claim,
};
pub use provisioner_runtime::BackendError;

/// What a backend needs to make one volume.
#[derive(Clone, Debug)]
pub struct VolumeOptions {
    /// The PV's name, `pvc-<claim uid>`: the same on every retry. Name the asset after it.
    pub pv_name: String,
    /// The claim.
    pub claim: PersistentVolumeClaim,
    /// Name of the claim's StorageClass.
    pub storage_class_name: String,
    /// The StorageClass parameters.
    pub parameters: BTreeMap<String, String>,
    /// The StorageClass's reclaim policy (`Delete` or `Retain`).
    pub reclaim_policy: String,
    /// What the claim asks for (`spec.resources.requests.storage`), if anything.
    pub capacity: Option<Quantity>,
    /// The node the scheduler chose for the claim's first pod (`WaitForFirstConsumer`).
    pub selected_node: Option<String>,
}

/// What `provision` hands back to the library.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProvisionedVolume {
    /// The volume source, and optionally `capacity`, `nodeAffinity` and
    /// `persistentVolumeReclaimPolicy` (which then win over the claim's and class's). Claim
    /// reference, class, access modes, volume mode and mount options are the library's.
    pub spec: PersistentVolumeSpec,
    /// Annotations for the PV (the library's own cannot be overridden).
    pub annotations: BTreeMap<String, String>,
    /// Something the claim's owner should know although provisioning succeeded (a capacity that
    /// cannot be enforced, say); it goes into the `ProvisioningSucceeded` Event.
    pub note: Option<String>,
}

/// A volume backend driven by the volume controller. See the [module documentation](self) for
/// the rules every implementation follows. Write the methods as `async fn` in your `impl`.
pub trait VolumeProvisioner: Send + Sync + 'static {
    /// Checks the StorageClass parameters before anything is made. Return
    /// [`BackendError::invalid_parameter`] for anything unknown or malformed.
    fn validate(&self, options: &VolumeOptions) -> Result<(), BackendError> {
        let _ = options;
        Ok(())
    }

    /// Makes the volume `options.pv_name` (or finds the one an earlier call made) and says how
    /// pods reach it.
    fn provision(
        &self,
        options: &VolumeOptions,
    ) -> impl Future<Output = Result<ProvisionedVolume, BackendError>> + Send;

    /// Removes the volume's asset, if the backend's own record says it made it; a volume already
    /// gone counts as removed. Refuse (permanently) to touch what another instance made.
    fn delete(
        &self,
        volume: &PersistentVolume,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Holds the volume to `capacity` from now on, growing what backs it (the claim asked for
    /// more; `capacity` is never below the PV's `spec.capacity`). Like every call it may be
    /// repeated, and must succeed again once done. The default refuses: expansion not supported.
    fn expand(
        &self,
        volume: &PersistentVolume,
        capacity: &Quantity,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        let _ = (volume, capacity);
        std::future::ready(Err(BackendError::permanent(
            "ExpansionNotSupported",
            "this provisioner cannot expand volumes",
        )))
    }
}

/// A shared backend is a backend: the runtime keeps one across leadership terms.
impl<P: VolumeProvisioner> VolumeProvisioner for std::sync::Arc<P> {
    fn validate(&self, options: &VolumeOptions) -> Result<(), BackendError> {
        (**self).validate(options)
    }

    fn provision(
        &self,
        options: &VolumeOptions,
    ) -> impl Future<Output = Result<ProvisionedVolume, BackendError>> + Send {
        (**self).provision(options)
    }

    fn delete(
        &self,
        volume: &PersistentVolume,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        (**self).delete(volume)
    }

    fn expand(
        &self,
        volume: &PersistentVolume,
        capacity: &Quantity,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        (**self).expand(volume, capacity)
    }
}
