//! Bytes used per volume, for Prometheus: the kubelet reports no volume statistics for hostPath
//! volumes, so the provisioner does. [`collect`] reads every volume's usage (the volume group's
//! referenced bytes on btrfs, after a [`nesting::sweep`] so that subvolumes made inside a volume
//! count; the mounted image's used blocks for loop volumes; plain directories have none), [`render`] writes them in the Prometheus text format as
//! `hostpath_volume_used_bytes{pv}` and `hostpath_volume_capacity_bytes{pv}`, and [`serve`]
//! answers `GET /metrics` with the last collection. [`collect_every`] also writes the used bytes
//! on each PV ([`ANNOTATION_USED_BYTES`]) when they moved by at least 1 MiB and 1% of the
//! capacity since last written, so that `kubectl get pv -o yaml` shows them without flooding
//! the apiserver with writes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::backing::{Backing, used_bytes_in};
use crate::btrfs;
use crate::nesting;
use crate::store::VolumeStore;

/// The usage of one volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Bytes used, as the mechanism holding the volume to its capacity counts them.
    pub used: u64,
    /// The capacity it is held to.
    pub capacity: Option<u64>,
}

/// The usage of every volume of `store` made by its identity that has one, by PV name.
pub fn collect(store: &VolumeStore) -> BTreeMap<String, Usage> {
    let records = store.records();
    let limited = records.values().any(|r| matches!(r.backing, Backing::Subvolume { .. }));
    if limited && let Err(e) = nesting::sweep(store) {
        tracing::warn!(error = %e, "sweeping for nested subvolumes");
    }
    let groups = limited.then(|| btrfs::qgroups(store.root()).ok()).flatten();
    records
        .into_iter()
        .filter(|(_, record)| record.identity == store.identity())
        .filter_map(|(volume, record)| {
            let used = used_bytes_in(store, &record, groups.as_deref())?;
            Some((volume, Usage { used, capacity: record.capacity }))
        })
        .collect()
}

/// The Prometheus text exposition of `usage`.
pub fn render(usage: &BTreeMap<String, Usage>) -> String {
    let mut text = String::new();
    text.push_str("# HELP hostpath_volume_used_bytes Bytes used in each volume, as the mechanism that enforces its capacity counts them.\n");
    text.push_str("# TYPE hostpath_volume_used_bytes gauge\n");
    for (pv, usage) in usage {
        let _ = writeln!(text, "hostpath_volume_used_bytes{{pv=\"{pv}\"}} {}", usage.used);
    }
    text.push_str("# HELP hostpath_volume_capacity_bytes The capacity each volume is held to.\n");
    text.push_str("# TYPE hostpath_volume_capacity_bytes gauge\n");
    for (pv, usage) in usage {
        if let Some(capacity) = usage.capacity {
            let _ = writeln!(text, "hostpath_volume_capacity_bytes{{pv=\"{pv}\"}} {capacity}");
        }
    }
    text
}

/// On PVs with a usage: the bytes used, as last written.
pub const ANNOTATION_USED_BYTES: &str = "hostpath-volume.bucket-provisioner.io/used-bytes";

/// The last collection, shared between the collecting loop and the server.
pub type Shared = Arc<Mutex<BTreeMap<String, Usage>>>;

/// Whether a usage moved far enough from the one last written to be written again.
pub fn worth_writing(last: Option<u64>, now: Usage) -> bool {
    let Some(last) = last else { return true };
    let step = (now.capacity.unwrap_or(0) / 100).max(1 << 20);
    last.abs_diff(now.used) >= step
}

/// Collects the usage of `store` into `shared` every `interval`, forever, and writes it on the
/// PVs through `client` when it moved enough.
pub async fn collect_every(
    store: Arc<VolumeStore>,
    shared: Shared,
    interval: Duration,
    client: Option<kube::Client>,
) {
    let mut written: BTreeMap<String, u64> = BTreeMap::new();
    loop {
        let from = store.clone();
        if let Ok(usage) = tokio::task::spawn_blocking(move || collect(&from)).await {
            if let Some(client) = &client {
                annotate(client, &usage, &mut written).await;
            }
            *shared.lock().unwrap_or_else(|e| e.into_inner()) = usage;
        }
        tokio::time::sleep(interval).await;
    }
}

async fn annotate(
    client: &kube::Client,
    usage: &BTreeMap<String, Usage>,
    written: &mut BTreeMap<String, u64>,
) {
    use k8s_openapi::api::core::v1::PersistentVolume;
    use kube::api::{Api, Patch, PatchParams};
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    written.retain(|pv, _| usage.contains_key(pv));
    for (pv, now) in usage {
        if !worth_writing(written.get(pv).copied(), *now) {
            continue;
        }
        let patch = serde_json::json!({"metadata": {"annotations": {
            ANNOTATION_USED_BYTES: now.used.to_string(),
        }}});
        match volumes.patch(pv, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => {
                written.insert(pv.clone(), now.used);
            }
            Err(e) => tracing::debug!(volume = %pv, error = %e, "writing the volume's usage"),
        }
    }
}

/// Serves `GET /metrics` on `listener` with the last collection in `shared`.
pub async fn serve(listener: tokio::net::TcpListener, shared: Shared) -> std::io::Result<()> {
    async fn metrics(State(shared): State<Shared>) -> impl IntoResponse {
        let text = render(&shared.lock().unwrap_or_else(|e| e.into_inner()));
        ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text)
    }
    let app = Router::new().route("/metrics", get(metrics)).with_state(shared);
    axum::serve(listener, app).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_rendered_per_volume() {
        let usage = BTreeMap::from([
            ("pvc-a".to_owned(), Usage { used: 4096, capacity: Some(65536) }),
            ("pvc-b".to_owned(), Usage { used: 0, capacity: None }),
        ]);
        let text = render(&usage);
        assert!(text.contains("hostpath_volume_used_bytes{pv=\"pvc-a\"} 4096\n"), "{text}");
        assert!(text.contains("hostpath_volume_used_bytes{pv=\"pvc-b\"} 0\n"), "{text}");
        assert!(text.contains("hostpath_volume_capacity_bytes{pv=\"pvc-a\"} 65536\n"), "{text}");
        assert!(!text.contains("capacity_bytes{pv=\"pvc-b\"}"), "{text}");
    }

    #[test]
    fn usage_is_written_again_only_when_it_moved_enough() {
        let gib = Some(1 << 30);
        assert!(worth_writing(None, Usage { used: 0, capacity: gib }));
        assert!(!worth_writing(Some(0), Usage { used: 5 << 20, capacity: gib }), "under 1%");
        assert!(worth_writing(Some(0), Usage { used: 11 << 20, capacity: gib }));
        assert!(!worth_writing(Some(0), Usage { used: 1 << 19, capacity: None }), "under 1 MiB");
        assert!(worth_writing(Some(2 << 20), Usage { used: 0, capacity: None }), "down too");
    }
}
