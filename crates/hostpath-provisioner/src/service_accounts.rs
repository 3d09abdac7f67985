//! Ends the sessions of ServiceAccounts that are gone: deleted, or deleted and made again under
//! the same name (another uid), for the life of the process. Sessions were minted for a
//! ServiceAccount the apiserver vouched for (see [`crate::token_review`]); once it is gone, so
//! are they, on their next request rather than at their expiry. A relist after a lost watch
//! sweeps every session whose ServiceAccount is not in it.

use std::collections::HashMap;
use std::sync::Arc;

use bucket_provisioner::kubernetes::watch::resilient_watch;
use bucket_provisioner::runtime::Process;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::runtime::watcher::{self, Event};
use kube::{Api, ResourceExt};

use crate::BucketStore;

/// The watch's name on `/healthz` and in logs.
pub const SERVICE_ACCOUNT_WATCH: &str = "ServiceAccounts";

/// The subject a ServiceAccount's tokens carry, and its uid.
fn identity_of(account: &ServiceAccount) -> (String, Option<String>) {
    let namespace = account.namespace().unwrap_or_default();
    let subject = format!("system:serviceaccount:{namespace}:{}", account.name_any());
    (subject, account.uid())
}

/// Follows every ServiceAccount until the process stops, ending the sessions of those gone; an
/// `Err` only if the watch ended, which it never does while the process runs.
pub async fn follow_service_accounts(
    process: Process,
    store: Arc<BucketStore>,
) -> Result<(), String> {
    let accounts: Api<ServiceAccount> = Api::all(process.client.clone());
    // A streaming list, as the controller's watches: one relist costs no list of every
    // ServiceAccount in the cluster at once.
    let config = watcher::Config::default().streaming_lists();
    let events = resilient_watch(accounts, config, SERVICE_ACCOUNT_WATCH, process.health.clone());
    let mut events = events.take_until(process.stop.wait()).boxed();
    // The ServiceAccounts of a relist, until it is complete.
    let mut listed: HashMap<String, Option<String>> = HashMap::new();
    while let Some(event) = events.next().await {
        let ended = match event {
            Ok(Event::Init) => {
                listed.clear();
                continue;
            }
            Ok(Event::InitApply(account)) => {
                let (subject, uid) = identity_of(&account);
                store.identity_heard(&subject, uid.clone());
                listed.insert(subject, uid);
                continue;
            }
            Ok(Event::InitDone) => {
                let alive = std::mem::take(&mut listed);
                store
                    .retain_sessions(move |s| {
                        !s.subject.starts_with("system:serviceaccount:")
                            || alive.get(&s.subject).is_some_and(|uid| same(uid, &s.subject_uid))
                    })
                    .await
            }
            Ok(Event::Apply(account)) => {
                let (subject, uid) = identity_of(&account);
                store.identity_heard(&subject, uid.clone());
                store
                    .retain_sessions(move |s| s.subject != subject || same(&uid, &s.subject_uid))
                    .await
            }
            Ok(Event::Delete(account)) => {
                let (subject, _) = identity_of(&account);
                store.identity_heard(&subject, None);
                store.retain_sessions(move |s| s.subject != subject).await
            }
            // Errors were reported by the watch itself.
            Err(_) => continue,
        };
        match ended {
            Ok(0) => {}
            Ok(ended) => tracing::info!(ended, "sessions of ServiceAccounts that are gone ended"),
            Err(e) => tracing::warn!(error = %e, "could not end the sessions of a ServiceAccount"),
        }
    }
    if process.stop.is_given() {
        Ok(())
    } else {
        Err(format!("the watch of {SERVICE_ACCOUNT_WATCH} ended"))
    }
}

/// Whether a session minted for `session_uid` belongs to the ServiceAccount of `uid`; a session
/// or account without a uid is matched by name alone.
fn same(uid: &Option<String>, session_uid: &Option<String>) -> bool {
    match (uid, session_uid) {
        (Some(uid), Some(session_uid)) => uid == session_uid,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_belongs_to_the_account_of_its_uid() {
        let some = |s: &str| Some(s.to_owned());
        assert!(same(&some("a"), &some("a")));
        assert!(!same(&some("b"), &some("a")));
        assert!(same(&None, &some("a")));
        assert!(same(&some("a"), &None));
    }
}
