//! `hostpath-volume-provisioner`: PersistentVolumes as directories under `--root` on this node,
//! for every claim of a StorageClass naming this provisioner that the scheduler placed here.

use std::path::PathBuf;
use std::sync::Arc;

use bucket_provisioner::runtime::{
    ControllerArgs, hostname, init_logging, lease_name, run_volumes, shutdown_signal,
};
use bucket_provisioner::volume::VolumeControllerConfig;
use clap::Parser;
use hostpath_volume_provisioner::HostPathVolumes;
use hostpath_volume_provisioner::store::VolumeStore;

/// PersistentVolumes as directories on this node, one instance per node.
#[derive(Parser, Debug)]
#[command(name = "hostpath-volume-provisioner", version)]
struct Args {
    /// Directory holding the volumes and the provisioner's records. It must be mounted at the
    /// same path as on the host, since PVs name it for the kubelet.
    #[arg(long, env = "VOLUME_ROOT", default_value = "/var/lib/hostpath-volumes")]
    root: PathBuf,
    /// The StorageClass `provisioner` value to answer to.
    #[arg(long, env = "PROVISIONER_NAME", default_value = "bucket-provisioner.io/hostpath-volume")]
    provisioner_name: String,
    /// This node's name: volumes are made only for claims scheduled here, get node affinity to
    /// it (label kubernetes.io/hostname), and only volumes made under it are ever deleted
    /// (default: $NODE_NAME, else the host name).
    #[arg(long, env = "NODE_NAME")]
    node_name: Option<String>,
    /// Reclaim policy for every volume made here (`Delete` or `Retain`), over the classes' own.
    #[arg(long, env = "RECLAIM_POLICY", value_parser = ["Delete", "Retain"])]
    reclaim_policy: Option<String>,
    /// Also make volumes for claims of `Immediate` classes (no node chosen), here. For a single
    /// instance only (a Deployment pinned to a node), never with one instance per node.
    #[arg(long, env = "SERVE_IMMEDIATE", default_value_t = false, action = clap::ArgAction::Set)]
    serve_immediate: bool,
    #[command(flatten)]
    controller: ControllerArgs,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let mut args = Args::parse();
    init_logging(args.controller.log_format);
    let node = args.node_name.clone().unwrap_or_else(hostname);
    // One instance per node: each node elects within its own Lease.
    if args.controller.leader_election_name.is_none() {
        args.controller.leader_election_name =
            Some(lease_name(&format!("{}-{node}", args.provisioner_name)));
    }
    let root = args.root.clone();
    let identity = node.clone();
    let store = tokio::task::spawn_blocking(move || VolumeStore::open(root, identity))
        .await?
        .map_err(|e| format!("opening the volume root {}: {e}", args.root.display()))?;
    let backend = HostPathVolumes::new(Arc::new(store), args.reclaim_policy.clone());
    tracing::info!(root = %args.root.display(), node = %node, "volume store open");
    let mut config = VolumeControllerConfig::new(&args.provisioner_name);
    config.node = Some(node);
    config.serve_unscheduled = args.serve_immediate;
    run_volumes(backend, config, &args.controller, shutdown_signal()).await?;
    Ok(())
}
