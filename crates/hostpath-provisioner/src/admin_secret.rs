//! Keeps the operator credential in step with its Secret, for the life of the process: loaded
//! when the Secret appears or changes, dropped when it is deleted or no longer valid. The watch
//! comes back after apiserver outages and is reported on `/healthz` like the controller's. The
//! credential is handed to the store again every few seconds: an endpoint in a process of its
//! own keeps it only in memory, and may restart alone.

use std::time::Duration;

use bucket_provisioner::kubernetes::watch::resilient_watch;
use bucket_provisioner::runtime::Process;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::runtime::watcher::{self, Event};

use crate::AdminCredentials;
use crate::store_link::StoreLink;

/// The watch's name on `/healthz` and in logs.
pub const ADMIN_SECRET_WATCH: &str = "operator Secret";

/// How often the credential is handed to the store again.
const AGAIN: Duration = Duration::from_secs(5);

/// Hands `admin` to `store`; a failure is logged when it follows a success (`*failing` says
/// whether the last one failed), not every few seconds.
async fn hand_over(store: &StoreLink, admin: Option<AdminCredentials>, failing: &mut bool) {
    match store.set_admin(admin).await {
        Ok(()) => *failing = false,
        Err(e) if !*failing => {
            *failing = true;
            tracing::warn!(error = %e,
                "could not hand the operator credential to the endpoint; trying again");
        }
        Err(_) => {}
    }
}

/// Follows Secret `namespace/name` into `store` until the process stops; an `Err` only if the
/// watch ended, which it never does while the process runs.
pub async fn follow_admin_secret(
    process: Process,
    namespace: String,
    name: String,
    store: StoreLink,
) -> Result<(), String> {
    let secrets: Api<Secret> = Api::namespaced(process.client.clone(), &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let origin = format!("Secret {namespace}/{name}");
    let events = resilient_watch(secrets, config, ADMIN_SECRET_WATCH, process.health.clone());
    let mut events = events.take_until(process.stop.wait()).boxed();
    // What the Secret says now; `None` until it is read.
    let mut wanted: Option<Option<AdminCredentials>> = None;
    let mut failing = false;
    let mut again = tokio::time::interval(AGAIN);
    again.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let event = tokio::select! {
            event = events.next() => match event {
                Some(event) => event,
                None => break,
            },
            _ = again.tick() => {
                if let Some(admin) = &wanted {
                    hand_over(&store, admin.clone(), &mut failing).await;
                }
                continue;
            }
        };
        match event {
            Ok(Event::Apply(secret) | Event::InitApply(secret)) => {
                let entries =
                    secret.data.iter().flatten().map(|(k, v)| (k.as_str(), v.0.as_slice()));
                match AdminCredentials::from_entries(&origin, entries) {
                    Ok(admin) => {
                        tracing::info!(secret = %origin, "operator credential loaded");
                        wanted = Some(Some(admin));
                    }
                    Err(e) => {
                        tracing::warn!(secret = %origin, error = %e, "operator credential disabled");
                        wanted = Some(None);
                    }
                }
            }
            Ok(Event::Delete(_)) => {
                tracing::warn!(secret = %origin, "Secret deleted; operator credential disabled");
                wanted = Some(None);
            }
            // Errors were reported by the watch itself.
            Ok(Event::Init | Event::InitDone) | Err(_) => continue,
        }
        if let Some(admin) = &wanted {
            hand_over(&store, admin.clone(), &mut failing).await;
        }
    }
    if process.stop.is_given() { Ok(()) } else { Err(format!("the watch of {origin} ended")) }
}
