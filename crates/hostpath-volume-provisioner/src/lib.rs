//! PersistentVolumes as directories on a node: the [`VolumeProvisioner`] of the
//! `hostpath-volume-provisioner` binary, one instance per node.
//!
//! - [`store`]: the directories under the root and the record of each, resolved beneath the root
//!   without following links.
//! - [`backing`]: what a volume is made of (directory, btrfs subvolume, loop-mounted image) and
//!   the crash-safe steps that make, grow and remove each; [`btrfs`] and [`loopback`] run the
//!   filesystem programs, through [`tools`] (which also holds the tests' crash points);
//!   [`btrfs_output`] reads what `btrfs` prints.
//! - [`nesting`]: subvolumes a pod makes inside its btrfs volume, counted against the volume.
//! - [`pattern`]: where a claim's directory goes (`pathPattern`).
//! - [`capacity`]: what the root's filesystem can do about a plain directory's capacity.
//! - [`usage`]: bytes used per volume, as metrics.
//!
//! StorageClass parameters: `pathPattern` (default `{pvName}`; also `{namespace}` and `{name}`),
//! `directoryMode` (octal, default `0777`: pods run as any user and the kubelet does not change
//! hostPath ownership), `directoryOwner` (`uid:gid`), `backing` and `fsType`:
//!
//! | `backing` | volume | capacity |
//! |---|---|---|
//! | `auto` (default) | a btrfs subvolume where the root is on btrfs, else a directory | a quota group limit on btrfs, on a group holding the volume and the subvolumes made inside it (quotas are turned on at start when `--btrfs-quota=enable`); else not enforced |
//! | `directory` | a directory | not enforced |
//! | `loop` | an image of `fsType` (`ext4`, default, or `xfs`, at least 300 MiB) under `<root>/.provisioner/images/`, loop-mounted on the volume's directory | the image's size |
//!
//! Every volume can grow (classes with `allowVolumeExpansion: true`): the limit is raised, the
//! image grown and its filesystem resized while mounted.

pub mod backing;
pub mod backing_kind;
pub mod btrfs;
pub mod btrfs_output;
pub mod capacity;
pub mod loopback;
pub mod nesting;
pub mod overcommit;
pub mod pattern;
pub mod store;
pub mod tools;
pub mod usage;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PersistentVolume, PersistentVolumeSpec, VolumeNodeAffinity,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use volume_provisioner::BackendError;
use volume_provisioner::{ProvisionedVolume, VolumeOptions, VolumeProvisioner, quantity_bytes};

use crate::backing::Backing;
use crate::capacity::Enforcement;
use crate::loopback::FsType;
use crate::overcommit::Overcommit;
use crate::pattern::{DEFAULT_PATTERN, Names};
use crate::store::{Ownership, StoreError, VolumeStore};

/// On every PV: the identity (node) that made it. Only that identity deletes it.
pub const ANNOTATION_IDENTITY: &str = "hostpath-volume.bucket-provisioner.io/identity";
/// On every PV: whether its capacity is enforced, and why not.
pub const ANNOTATION_CAPACITY: &str = "hostpath-volume.bucket-provisioner.io/capacity";
/// The node label the PV's node affinity names.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// Every StorageClass parameter this provisioner accepts (see the crate's documentation); any
/// other is refused.
pub const PARAMETERS: [&str; 5] =
    ["pathPattern", "directoryMode", "directoryOwner", "backing", "fsType"];

/// Volumes of one [`VolumeStore`].
#[derive(Clone, Debug)]
pub struct HostPathVolumes {
    store: Arc<VolumeStore>,
    reclaim_policy: Option<String>,
    enforcement: Enforcement,
    btrfs: Option<BtrfsRoot>,
}

/// A root on btrfs: volumes of the `auto` backing are subvolumes.
#[derive(Clone, Debug)]
struct BtrfsRoot {
    /// Why quotas are off, when they are.
    quotas_off: Option<String>,
}

/// What the StorageClass asks a volume to be made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Asked {
    Auto,
    Directory,
    Loop(FsType),
}

/// The parameters of one class, checked.
struct Parameters {
    pattern: String,
    ownership: Ownership,
    asked: Asked,
}

/// Whether the provisioner turns btrfs quotas on for its root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BtrfsQuota {
    /// Turn them on at start (`btrfs quota enable`), if they are off.
    Enable,
    /// Use them if they are on; otherwise report capacities as not enforced.
    Existing,
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
    let fs = match given.get("fsType") {
        None => None,
        Some(text) => Some(FsType::parse(text).ok_or_else(|| {
            BackendError::invalid_parameter(format!("fsType {text:?} is neither ext4 nor xfs"))
        })?),
    };
    let asked = match (given.get("backing").map(String::as_str), fs) {
        (None | Some("auto"), None) => Asked::Auto,
        (Some("directory"), None) => Asked::Directory,
        (Some("loop"), fs) => Asked::Loop(fs.unwrap_or_default()),
        (None | Some("auto" | "directory"), Some(_)) => {
            return Err(BackendError::invalid_parameter(
                "fsType is only for backing \"loop\"".to_owned(),
            ));
        }
        (Some(other), _) => {
            return Err(BackendError::invalid_parameter(format!(
                "backing {other:?} is none of auto, directory, loop"
            )));
        }
    };
    Ok(Parameters { pattern, ownership: Ownership { mode, owner }, asked })
}

/// The bytes of a claim's request.
fn requested_bytes(capacity: Option<&Quantity>) -> Result<Option<u64>, BackendError> {
    match capacity {
        None => Ok(None),
        Some(q) => quantity_bytes(q).map(Some).map_err(|why| {
            BackendError::permanent("InvalidCapacity", format!("capacity {:?} {why}", q.0))
        }),
    }
}

fn backend_error(e: StoreError) -> BackendError {
    let reason = match &e {
        StoreError::Io { .. } => return BackendError::transient(e.to_string()),
        StoreError::Tool(tool) if tool.missing => "ToolMissing",
        StoreError::Tool(_) => return BackendError::transient(e.to_string()),
        StoreError::Refused(_) => "Refused",
        StoreError::CannotGrow(_) => "ExpansionNotPermitted",
        StoreError::PathTaken { .. } | StoreError::Unrecorded(_) => "PathTaken",
        StoreError::NotADirectory(_) => "PathNotADirectory",
        StoreError::NoLastSegment { .. } => "BadRecord",
        StoreError::NotOurs { .. } => "NotOurs",
    };
    BackendError::permanent(reason, e.to_string())
}

impl HostPathVolumes {
    /// Volumes in `store`; `reclaim_policy` (`Delete` or `Retain`) overrides the classes'. On a
    /// btrfs root, quotas are turned on when `quota` says so.
    pub fn new(store: Arc<VolumeStore>, reclaim_policy: Option<String>, quota: BtrfsQuota) -> Self {
        let root = store.root();
        let mount = capacity::root_mount(root);
        let enforcement = capacity::enforcement(root, mount.as_ref());
        let btrfs = mount.filter(|m| m.fs_type == "btrfs").map(|_| {
            let enabled = match quota {
                BtrfsQuota::Enable => btrfs::enable_quota(root).map_err(|e| e.to_string()),
                BtrfsQuota::Existing => Ok(()),
            };
            let quotas_off = match enabled {
                Ok(()) if btrfs::quota_enabled(root) => None,
                Ok(()) => Some(format!("btrfs quotas are off on {}", root.display())),
                Err(e) => Some(format!(
                    "btrfs quotas are off on {} and could not be turned on: {e}",
                    root.display()
                )),
            };
            BtrfsRoot { quotas_off }
        });
        match &btrfs {
            Some(BtrfsRoot { quotas_off: None }) => tracing::info!(root = %root.display(),
                "volume root on btrfs: volumes are subvolumes limited by quota groups"),
            Some(BtrfsRoot { quotas_off: Some(why) }) => tracing::warn!(root = %root.display(),
                "volume root on btrfs, capacities not enforced: {why}"),
            None => tracing::info!(root = %root.display(), capacity = %enforcement.note(),
                "volume root"),
        }
        Self { store, reclaim_policy, enforcement, btrfs }
    }

    /// What a volume of a class asking `asked` is made of here, and why its capacity is not
    /// enforced when it is not.
    fn backing(&self, asked: Asked) -> (Backing, Option<String>) {
        match (asked, &self.btrfs) {
            (Asked::Loop(fs), _) => (Backing::Loop { fs }, None),
            (Asked::Auto, Some(root)) => (
                Backing::Subvolume { id: None, limited: root.quotas_off.is_none() },
                root.quotas_off.clone(),
            ),
            (Asked::Auto, None) => (Backing::Directory, Some(self.enforcement.reason().to_owned())),
            (Asked::Directory, _) => (
                Backing::Directory,
                Some("the StorageClass asks for plain directories (backing: directory)".into()),
            ),
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<VolumeStore> {
        &self.store
    }

    /// The warning when the root's loop images together overcommit its filesystem (logged
    /// here; the caller puts it in the claim's Event).
    async fn loop_overcommit(&self) -> Option<String> {
        let root = self.store.root().to_owned();
        let read = tokio::task::spawn_blocking(move || Overcommit::of(&root)).await.ok()?;
        let warning = match read {
            Ok(overcommit) => overcommit.warning()?,
            Err(e) => {
                tracing::warn!(error = %e, "could not tell whether loop images overcommit the root");
                return None;
            }
        };
        tracing::warn!(root = %self.store.root().display(), "{warning}");
        Some(warning)
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
        if let Asked::Loop(fs) = parameters.asked {
            let bytes = requested_bytes(options.capacity.as_ref())?.unwrap_or(0);
            if bytes < fs.minimum() {
                return Err(BackendError::permanent(
                    "CapacityTooSmall",
                    format!(
                        "a loop-backed {} volume needs at least {} bytes; the claim asks for {bytes}",
                        fs.as_str(),
                        fs.minimum()
                    ),
                ));
            }
        }
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
        let (backing, why_not) = self.backing(parameters.asked);
        let capacity = requested_bytes(options.capacity.as_ref())?;
        let made = tokio::task::spawn_blocking(move || {
            store.make(&volume, &path, &claim, parameters.ownership, backing, capacity)
        })
        .await
        .map_err(|e| BackendError::transient(format!("making the volume: {e}")))?
        .map_err(backend_error)?;
        // What the record says (an earlier call's choice) is what the volume is.
        let overcommitted = match made.backing {
            Backing::Loop { .. } => self.loop_overcommit().await,
            _ => None,
        };
        let (capacity_note, note) = match made.backing.enforcement() {
            Some(how) => match overcommitted {
                Some(warning) => (how.clone(), format!("its capacity is {how}; but {warning}")),
                None => (how.clone(), format!("its capacity is {how}")),
            },
            None => {
                let why = match why_not {
                    Some(why) if made.backing == backing => why,
                    _ => self.not_enforced_reason(made.backing),
                };
                (format!("not enforced: {why}"), format!("its capacity is not enforced: {why}"))
            }
        };
        Ok(ProvisionedVolume {
            spec: PersistentVolumeSpec {
                host_path: Some(HostPathVolumeSource {
                    path: self.store.root().join(&made.path).display().to_string(),
                    // Never made again by the kubelet if it went: the pod fails instead.
                    type_: Some("Directory".into()),
                }),
                node_affinity: Some(self.node_affinity()),
                persistent_volume_reclaim_policy: self.reclaim_policy.clone(),
                ..Default::default()
            },
            annotations: BTreeMap::from([
                (ANNOTATION_IDENTITY.to_owned(), self.store.identity().to_owned()),
                (ANNOTATION_CAPACITY.to_owned(), capacity_note),
            ]),
            note: Some(note),
        })
    }

    async fn delete(&self, volume: &PersistentVolume) -> Result<(), BackendError> {
        let name = self.check_ours(volume)?;
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.remove(&name))
            .await
            .map_err(|e| BackendError::transient(format!("removing the volume: {e}")))?
            .map_err(backend_error)
    }

    async fn expand(
        &self,
        volume: &PersistentVolume,
        capacity: &Quantity,
    ) -> Result<(), BackendError> {
        let name = self.check_ours(volume)?;
        let bytes = requested_bytes(Some(capacity))?.unwrap_or(0);
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || backing::grow(&store, &name, bytes))
            .await
            .map_err(|e| BackendError::transient(format!("growing the volume: {e}")))?
            .map_err(backend_error)
    }
}

impl HostPathVolumes {
    /// Why a volume of `backing` is not held to its capacity.
    fn not_enforced_reason(&self, backing: Backing) -> String {
        match (backing, &self.btrfs) {
            (Backing::Subvolume { .. }, Some(BtrfsRoot { quotas_off: Some(why) })) => why.clone(),
            (Backing::Subvolume { .. }, _) => "btrfs quotas were off when it was made".into(),
            _ => {
                self.backing(Asked::Auto).1.unwrap_or_else(|| self.enforcement.reason().to_owned())
            }
        }
    }

    /// The PV's name, if the identity it records is ours; a permanent refusal otherwise.
    fn check_ours(&self, volume: &PersistentVolume) -> Result<String, BackendError> {
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
        Ok(name)
    }
}

fn names(options: &VolumeOptions) -> Names<'_> {
    Names {
        pv_name: &options.pv_name,
        namespace: options.claim.metadata.namespace.as_deref().unwrap_or_default(),
        name: options.claim.metadata.name.as_deref().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn options(parameters: BTreeMap<String, String>) -> VolumeOptions {
        VolumeOptions {
            pv_name: "pvc-1".into(),
            claim: Default::default(),
            storage_class_name: "class".into(),
            parameters,
            reclaim_policy: "Delete".into(),
            capacity: None,
            selected_node: None,
        }
    }

    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            "[+-]?[0-7]{0,6}",
            "[+-]?(4294967295|[0-9]{0,10}):[+-]?(4294967295|[0-9]{0,10})",
            "(auto|directory|loop|ext4|xfs|\\{pvName\\}|\\{namespace\\}/\\{name\\})",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Whatever a class sets is judged without a panic, and what is accepted is a mode
        /// chmod takes and ids chown changes.
        #[test]
        fn any_class_parameters_are_judged(
            given in prop::collection::btree_map(
                prop_oneof![prop::sample::select(PARAMETERS.to_vec()).prop_map(String::from),
                    any::<String>()],
                value(),
                0..6,
            ),
        ) {
            if let Ok(read) = parameters(&options(given)) {
                prop_assert!(read.ownership.mode <= 0o7777);
                if let Some((uid, gid)) = read.ownership.owner {
                    prop_assert!(uid != u32::MAX && gid != u32::MAX);
                }
            }
        }
    }
}
