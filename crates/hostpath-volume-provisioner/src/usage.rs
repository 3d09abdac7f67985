//! Bytes used per volume, for Prometheus: the kubelet reports no volume statistics for hostPath
//! volumes, so the provisioner does. [`collect`] reads every volume's usage (the quota group's
//! referenced bytes on btrfs, the mounted image's used blocks for loop volumes; plain
//! directories have none), [`render`] writes them in the Prometheus text format as
//! `hostpath_volume_used_bytes{pv}` and `hostpath_volume_capacity_bytes{pv}`, and [`serve`]
//! answers `GET /metrics` with the last collection.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::backing::used_bytes;
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
    store
        .records()
        .into_iter()
        .filter(|(_, record)| record.identity == store.identity())
        .filter_map(|(volume, record)| {
            let used = used_bytes(store, &record)?;
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

/// The last collection, shared between the collecting loop and the server.
pub type Shared = Arc<Mutex<BTreeMap<String, Usage>>>;

/// Collects the usage of `store` into `shared` every `interval`, forever.
pub async fn collect_every(store: Arc<VolumeStore>, shared: Shared, interval: Duration) {
    loop {
        let from = store.clone();
        if let Ok(usage) = tokio::task::spawn_blocking(move || collect(&from)).await {
            *shared.lock().unwrap_or_else(|e| e.into_inner()) = usage;
        }
        tokio::time::sleep(interval).await;
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
}
