//! PersistentVolumes as directories on a node: the [`VolumeProvisioner`] of the
//! `hostpath-volume-provisioner` binary, one instance per node.
//!
//! - [`store`]: the directories under the root and the record of each, resolved beneath the root
//!   without following links.
//! - [`pattern`]: where a claim's directory goes (`pathPattern`).
//! - [`capacity`]: what the root's filesystem can do about a volume's capacity.
//!
//! StorageClass parameters: `pathPattern` (default `{pvName}`; also `{namespace}` and `{name}`),
//! `directoryMode` (octal, default `0777`: pods run as any user and the kubelet does not change
//! hostPath ownership) and `directoryOwner` (`uid:gid`).

pub mod capacity;
pub mod pattern;
pub mod store;

use std::collections::BTreeMap;
use std::sync::Arc;

use bucket_provisioner::BackendError;
use bucket_provisioner::volume::{ProvisionedVolume, VolumeOptions, VolumeProvisioner};
use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PersistentVolume, PersistentVolumeSpec, VolumeNodeAffinity,
};

use crate::capacity::Enforcement;
use crate::pattern::{DEFAULT_PATTERN, Names};
use crate::store::{Ownership, StoreError, VolumeStore};

/// On every PV: the identity (node) that made it. Only that identity deletes it.
pub const ANNOTATION_IDENTITY: &str = "hostpath-volume.bucket-provisioner.io/identity";
/// On every PV: whether its capacity is enforced, and why not.
pub const ANNOTATION_CAPACITY: &str = "hostpath-volume.bucket-provisioner.io/capacity";
/// The node label the PV's node affinity names.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

const PARAMETERS: [&str; 3] = ["pathPattern", "directoryMode", "directoryOwner"];

/// Volumes as directories of one [`VolumeStore`].
#[derive(Clone, Debug)]
pub struct HostPathVolumes {
    store: Arc<VolumeStore>,
    reclaim_policy: Option<String>,
    enforcement: Enforcement,
}

/// The parameters of one class, checked.
struct Parameters {
    pattern: String,
    ownership: Ownership,
}

fn parameters(options: &VolumeOptions) -> Result<Parameters, BackendError> {
    let given = &options.parameters;
    if let Some(unknown) = given.keys().find(|k| !PARAMETERS.contains(&k.as_str())) {
        return Err(BackendError::invalid_parameter(format!(
            "unknown StorageClass parameter {unknown:?}; known are {}",
            PARAMETERS.join(", ")
        )));
    }
    let mode = match given.get("directoryMode") {
        None => 0o777,
        Some(text) => {
            u32::from_str_radix(text, 8).ok().filter(|m| *m <= 0o7777).ok_or_else(|| {
                BackendError::invalid_parameter(format!(
                    "directoryMode {text:?} is not an octal mode such as 0770"
                ))
            })?
        }
    };
    let owner = match given.get("directoryOwner") {
        None => None,
        Some(text) => Some(
            text.split_once(':')
                .and_then(|(u, g)| Some((u.parse::<u32>().ok()?, g.parse::<u32>().ok()?)))
                .filter(|(u, g)| *u != u32::MAX && *g != u32::MAX)
                .ok_or_else(|| {
                    BackendError::invalid_parameter(format!(
                        "directoryOwner {text:?} is not numeric uid:gid such as 1000:1000"
                    ))
                })?,
        ),
    };
    let pattern = given.get("pathPattern").cloned().unwrap_or_else(|| DEFAULT_PATTERN.into());
    Ok(Parameters { pattern, ownership: Ownership { mode, owner } })
}

fn backend_error(e: StoreError) -> BackendError {
    let reason = match &e {
        StoreError::Io { .. } => return BackendError::transient(e.to_string()),
        StoreError::PathTaken { .. } | StoreError::Unrecorded(_) => "PathTaken",
        StoreError::NotADirectory(_) => "PathNotADirectory",
        StoreError::NotOurs { .. } => "NotOurs",
    };
    BackendError::permanent(reason, e.to_string())
}

impl HostPathVolumes {
    /// Volumes in `store`; `reclaim_policy` (`Delete` or `Retain`) overrides the classes'.
    pub fn new(store: Arc<VolumeStore>, reclaim_policy: Option<String>) -> Self {
        let enforcement = capacity::probe(store.root());
        tracing::info!(root = %store.root().display(), capacity = %enforcement.note(),
            "volume root");
        Self { store, reclaim_policy, enforcement }
    }

    /// The store.
    pub fn store(&self) -> &Arc<VolumeStore> {
        &self.store
    }

    fn node_affinity(&self) -> VolumeNodeAffinity {
        VolumeNodeAffinity {
            required: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: HOSTNAME_LABEL.into(),
                        operator: "In".into(),
                        values: Some(vec![self.store.identity().to_owned()]),
                    }]),
                    match_fields: None,
                }],
            }),
        }
    }
}

impl VolumeProvisioner for HostPathVolumes {
    fn validate(&self, options: &VolumeOptions) -> Result<(), BackendError> {
        let parameters = parameters(options)?;
        let names = names(options);
        pattern::expand(&parameters.pattern, names)
            .map_err(|e| BackendError::invalid_parameter(e.to_string()))?;
        if matches!(
            options.claim.spec.as_ref().and_then(|s| s.volume_mode.as_deref()),
            Some("Block")
        ) {
            return Err(BackendError::permanent(
                "UnsupportedVolumeMode",
                "hostPath volumes are directories; volumeMode Block is not supported",
            ));
        }
        Ok(())
    }

    async fn provision(&self, options: &VolumeOptions) -> Result<ProvisionedVolume, BackendError> {
        let parameters = parameters(options)?;
        let path = pattern::expand(&parameters.pattern, names(options))
            .map_err(|e| BackendError::invalid_parameter(e.to_string()))?;
        let claim = format!(
            "{}/{}",
            options.claim.metadata.namespace.as_deref().unwrap_or_default(),
            options.claim.metadata.name.as_deref().unwrap_or_default()
        );
        let store = self.store.clone();
        let volume = options.pv_name.clone();
        let made = tokio::task::spawn_blocking(move || {
            store.make(&volume, &path, &claim, parameters.ownership)
        })
        .await
        .map_err(|e| BackendError::transient(format!("making the directory: {e}")))?
        .map_err(backend_error)?;
        let note = self.enforcement.note();
        Ok(ProvisionedVolume {
            spec: PersistentVolumeSpec {
                host_path: Some(HostPathVolumeSource {
                    path: self.store.root().join(made).display().to_string(),
                    // Never made again by the kubelet if it went: the pod fails instead.
                    type_: Some("Directory".into()),
                }),
                node_affinity: Some(self.node_affinity()),
                persistent_volume_reclaim_policy: self.reclaim_policy.clone(),
                ..Default::default()
            },
            annotations: BTreeMap::from([
                (ANNOTATION_IDENTITY.to_owned(), self.store.identity().to_owned()),
                (
                    ANNOTATION_CAPACITY.to_owned(),
                    format!("not enforced: {}", self.enforcement.reason()),
                ),
            ]),
            note: Some(note),
        })
    }

    async fn delete(&self, volume: &PersistentVolume) -> Result<(), BackendError> {
        let name = volume.metadata.name.clone().unwrap_or_default();
        let ours = self.store.identity();
        let annotations = volume.metadata.annotations.clone().unwrap_or_default();
        let recorded = annotations.get(ANNOTATION_IDENTITY).map(String::as_str).unwrap_or("");
        if recorded != ours {
            return Err(BackendError::permanent(
                "NotOurs",
                format!(
                    "volume {name} was provisioned by {recorded:?}, not by this provisioner \
                     ({ours:?}); it was left alone"
                ),
            ));
        }
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.remove(&name))
            .await
            .map_err(|e| BackendError::transient(format!("removing the directory: {e}")))?
            .map_err(backend_error)
    }
}

fn names(options: &VolumeOptions) -> Names<'_> {
    Names {
        pv_name: &options.pv_name,
        namespace: options.claim.metadata.namespace.as_deref().unwrap_or_default(),
        name: options.claim.metadata.name.as_deref().unwrap_or_default(),
    }
}
