//! `hostpath-volume-provisioner`: PersistentVolumes as directories under `--root` on this node,
//! for every claim of a StorageClass naming this provisioner that the scheduler placed here.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use hostpath_volume_provisioner::store::VolumeStore;
use hostpath_volume_provisioner::{BtrfsQuota, HostPathVolumes, backing, nesting, usage};
use volume_provisioner::VolumeControllerConfig;
use volume_provisioner::runtime::{
    ControllerArgs, hostname, init_logging, lease_name, run_volumes, shutdown_signal,
};

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
    /// On a btrfs root: `enable` turns quotas on at start (each volume is then held to its
    /// capacity by a quota group limit); `existing` uses them only if they are on already.
    #[arg(long, env = "BTRFS_QUOTA", default_value = "enable", value_parser = ["enable", "existing"])]
    btrfs_quota: String,
    /// Seconds between sweeps that add subvolumes a pod made inside its btrfs volume to the
    /// volume's quota group: until then they count against no limit (1 to 3600).
    #[arg(long, env = "NESTED_SUBVOLUME_SWEEP_SECONDS", default_value_t = 1,
        value_parser = clap::value_parser!(u64).range(1..=3600))]
    nested_subvolume_sweep_seconds: u64,
    /// Where `GET /metrics` answers each volume's used bytes (`hostpath_volume_used_bytes{pv}`)
    /// and capacity, read every `--usage-interval-seconds`; `off` serves nothing.
    #[arg(long, env = "USAGE_METRICS_ADDRESS", default_value = "0.0.0.0:8081")]
    usage_metrics_address: String,
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
    let store = Arc::new(store);
    let quota =
        if args.btrfs_quota == "enable" { BtrfsQuota::Enable } else { BtrfsQuota::Existing };
    let backend = HostPathVolumes::new(store.clone(), args.reclaim_policy.clone(), quota);
    tracing::info!(root = %args.root.display(), node = %node, "volume store open");
    // Loop-backed volumes are mounted again before any claim is served: after a node restart
    // their directories are empty until then.
    let remounting = store.clone();
    let remounted = tokio::task::spawn_blocking(move || backing::remount_all(&remounting)).await?;
    if remounted > 0 {
        tracing::info!(remounted, "loop-backed volumes mounted again");
    }
    // Volumes made before volume groups get theirs before any claim is served.
    let migrating = store.clone();
    let migrated = tokio::task::spawn_blocking(move || nesting::migrate(&migrating)).await?;
    if migrated > 0 {
        tracing::info!(migrated, "btrfs volumes given a volume group holding their limit");
    }
    let sweep = Duration::from_secs(args.nested_subvolume_sweep_seconds);
    tokio::spawn(nesting::sweep_every(store.clone(), sweep));
    if args.usage_metrics_address != "off" {
        let address: SocketAddr = args.usage_metrics_address.parse()?;
        let listener = tokio::net::TcpListener::bind(address).await?;
        tracing::info!(address = %listener.local_addr()?, "serving volume usage on /metrics");
        let shared = usage::Shared::default();
        let interval = Duration::from_secs(args.controller.usage_interval_seconds.max(1));
        let client = volume_provisioner::runtime::client(&args.controller).await?;
        tokio::spawn(usage::collect_every(store.clone(), shared.clone(), interval, Some(client)));
        tokio::spawn(async move {
            if let Err(e) = usage::serve(listener, shared).await {
                tracing::error!(error = %e, "the volume usage endpoint stopped");
            }
        });
    }
    let mut config = VolumeControllerConfig::new(&args.provisioner_name);
    config.node = Some(node);
    config.serve_unscheduled = args.serve_immediate;
    run_volumes(backend, config, &args.controller, shutdown_signal()).await?;
    Ok(())
}
