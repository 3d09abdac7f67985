//! The smallest volume backend: each PersistentVolume is a directory under `--root` on the one
//! node this process runs on. Everything Kubernetes — watching claims, the PV pre-bound to its
//! claim, the finalizer that keeps the asset until it is removed, reclaim policies, Events,
//! retries, leader election, metrics — comes from the library's volume side.
//!
//! Run it against a cluster with a StorageClass whose provisioner is `example.com/directory`:
//! `cargo run -p bucket-provisioner --example volume-backend -- --root /srv/volumes --node $(hostname)
//! --kubeconfig ~/.kube/config`

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use clap::Parser;
use k8s_openapi::api::core::v1::{HostPathVolumeSource, PersistentVolume, PersistentVolumeSpec};
use kube::ResourceExt;
use volume_provisioner::BackendError;
use volume_provisioner::runtime::{
    ControllerArgs, RunError, init_logging, run_volumes, shutdown_signal,
};
use volume_provisioner::{
    ProvisionedVolume, VolumeControllerConfig, VolumeOptions, VolumeProvisioner,
};

/// Directories under one root, and the backend's own record of which it made: a PV is written
/// by whoever may write PVs, so only this record decides what `delete` may remove.
struct Directories {
    root: PathBuf,
    made: Mutex<BTreeMap<String, PathBuf>>,
}

impl VolumeProvisioner for Directories {
    fn validate(&self, options: &VolumeOptions) -> Result<(), BackendError> {
        match options.parameters.keys().next() {
            Some(key) => Err(BackendError::invalid_parameter(format!("unknown parameter {key:?}"))),
            None => Ok(()),
        }
    }

    async fn provision(&self, options: &VolumeOptions) -> Result<ProvisionedVolume, BackendError> {
        // Named after the PV, which every retry shares: a repeated call finds the same directory.
        let path = self.root.join(&options.pv_name);
        std::fs::create_dir_all(&path).map_err(|e| BackendError::transient(e.to_string()))?;
        self.made.lock().unwrap().insert(options.pv_name.clone(), path.clone());
        Ok(ProvisionedVolume {
            spec: PersistentVolumeSpec {
                host_path: Some(HostPathVolumeSource {
                    path: path.display().to_string(),
                    type_: Some("Directory".into()),
                }),
                ..Default::default()
            },
            annotations: BTreeMap::new(),
            note: Some("capacity is not enforced: a directory has no size".into()),
        })
    }

    async fn delete(&self, volume: &PersistentVolume) -> Result<(), BackendError> {
        let Some(path) = self.made.lock().unwrap().get(&volume.name_any()).cloned() else {
            // Not in the record: made before a restart (this record is only memory) or by
            // someone else; never remove what the record does not name.
            return Err(BackendError::permanent("NotOurs", "no record of making this volume"));
        };
        match std::fs::remove_dir_all(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(BackendError::transient(e.to_string()))
            }
            _ => {
                self.made.lock().unwrap().remove(&volume.name_any());
                Ok(())
            }
        }
    }
}

#[derive(Parser)]
struct Args {
    /// Where the directories go.
    #[arg(long)]
    root: PathBuf,
    /// The node this process runs on: it serves only claims scheduled there.
    #[arg(long)]
    node: String,
    #[command(flatten)]
    controller: ControllerArgs,
}

#[tokio::main]
async fn main() -> Result<(), RunError> {
    let args = Args::parse();
    init_logging(args.controller.log_format);
    let backend = Directories { root: args.root, made: Mutex::default() };
    let mut config = VolumeControllerConfig::new("example.com/directory");
    config.node = Some(args.node);
    run_volumes(backend, config, &args.controller, shutdown_signal()).await
}
