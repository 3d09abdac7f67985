//! Keeps the operator credential in step with its Secret, for the life of the process: loaded
//! when the Secret appears or changes, dropped when it is deleted or no longer valid. The watch
//! comes back after apiserver outages and is reported on `/healthz` like the controller's.

use std::sync::Arc;

use bucket_provisioner::kubernetes::watch::resilient_watch;
use bucket_provisioner::runtime::Process;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::runtime::watcher::{self, Event};

use crate::{AdminCredentials, BucketStore};

/// The watch's name on `/healthz` and in logs.
pub const ADMIN_SECRET_WATCH: &str = "operator Secret";

/// Follows Secret `namespace/name` into `store` until the process stops; an `Err` only if the
/// watch ended, which it never does while the process runs.
pub async fn follow_admin_secret(
    process: Process,
    namespace: String,
    name: String,
    store: Arc<BucketStore>,
) -> Result<(), String> {
    let secrets: Api<Secret> = Api::namespaced(process.client.clone(), &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let origin = format!("Secret {namespace}/{name}");
    let events = resilient_watch(secrets, config, ADMIN_SECRET_WATCH, process.health.clone());
    let mut events = events.take_until(process.stop.wait()).boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Apply(secret) | Event::InitApply(secret)) => {
                let entries =
                    secret.data.iter().flatten().map(|(k, v)| (k.as_str(), v.0.as_slice()));
                match AdminCredentials::from_entries(&origin, entries) {
                    Ok(admin) => {
                        tracing::info!(secret = %origin, "operator credential loaded");
                        store.set_admin(Some(admin));
                    }
                    Err(e) => {
                        tracing::warn!(secret = %origin, error = %e, "operator credential disabled");
                        store.set_admin(None);
                    }
                }
            }
            Ok(Event::Delete(_)) => {
                tracing::warn!(secret = %origin, "Secret deleted; operator credential disabled");
                store.set_admin(None);
            }
            // Errors were reported by the watch itself.
            Ok(Event::Init | Event::InitDone) | Err(_) => {}
        }
    }
    if process.stop.is_given() { Ok(()) } else { Err(format!("the watch of {origin} ended")) }
}
