//! Ends the sessions of ServiceAccounts that are gone: deleted, or deleted and made again under
//! the same name (another uid), for the life of the process. Sessions were minted for a
//! ServiceAccount the apiserver vouched for (see [`crate::token_review`]); once it is gone, so
//! are they, on their next request rather than at their expiry. A relist after a lost watch
//! sweeps every session whose ServiceAccount is not in it.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use bucket_provisioner::kubernetes::watch::resilient_watch;
use bucket_provisioner::runtime::Process;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::runtime::watcher::{self, Event};
use kube::{Api, ResourceExt};

use crate::store_link::{SessionsKept, StoreLink};

/// The watch's name on `/healthz` and in logs.
pub const SERVICE_ACCOUNT_WATCH: &str = "ServiceAccounts";

/// The subject a ServiceAccount's tokens carry, and its uid.
fn identity_of(account: &ServiceAccount) -> (String, Option<String>) {
    let namespace = account.namespace().unwrap_or_default();
    let subject = format!("system:serviceaccount:{namespace}:{}", account.name_any());
    (subject, account.uid())
}

/// What the endpoint's store is to hear, in order; kept until it has (its process may be
/// restarting), at most [`MAX_PENDING`] before they are folded into one sweep.
#[derive(Default)]
struct Pending {
    changes: VecDeque<Change>,
    /// Every ServiceAccount as the watch last saw them, for the sweep that replaces too many
    /// changes.
    accounts: HashMap<String, Option<String>>,
    /// Whether the last hand-over failed: a failure is logged once, not at every retry.
    failing: bool,
}

enum Change {
    Heard(String, Option<String>),
    Retain(SessionsKept),
}

/// Changes held for the store before they are folded into one sweep.
const MAX_PENDING: usize = 1000;

/// How often changes the store could not take are offered again.
const RETRY: Duration = Duration::from_secs(5);

impl Pending {
    fn push(&mut self, change: Change) {
        self.changes.push_back(change);
        if self.changes.len() > MAX_PENDING {
            self.changes.clear();
            self.changes.push_back(Change::Retain(SessionsKept::Listed(self.accounts.clone())));
        }
    }

    /// Hands the changes to `store` in order, until one fails.
    async fn flush(&mut self, store: &StoreLink) {
        while let Some(change) = self.changes.front() {
            let done = match change {
                Change::Heard(subject, uid) => store.identity_heard(subject, uid.clone()).await,
                Change::Retain(kept) => match store.retain_sessions(kept.clone()).await {
                    Ok(0) => Ok(()),
                    Ok(ended) => {
                        tracing::info!(ended, "sessions of ServiceAccounts that are gone ended");
                        Ok(())
                    }
                    Err(e) => Err(e),
                },
            };
            if let Err(e) = done {
                if !self.failing {
                    tracing::warn!(error = %e, pending = self.changes.len(),
                        "could not end the sessions of a ServiceAccount yet; trying again");
                }
                self.failing = true;
                return;
            }
            self.failing = false;
            self.changes.pop_front();
        }
    }
}

/// Follows every ServiceAccount until the process stops, ending the sessions of those gone; an
/// `Err` only if the watch ended, which it never does while the process runs.
pub async fn follow_service_accounts(process: Process, store: StoreLink) -> Result<(), String> {
    let accounts: Api<ServiceAccount> = Api::all(process.client.clone());
    // A streaming list, as the controller's watches: one relist costs no list of every
    // ServiceAccount in the cluster at once.
    let config = watcher::Config::default().streaming_lists();
    let events = resilient_watch(accounts, config, SERVICE_ACCOUNT_WATCH, process.health.clone());
    let mut events = events.take_until(process.stop.wait()).boxed();
    // The ServiceAccounts of a relist, until it is complete.
    let mut listed: HashMap<String, Option<String>> = HashMap::new();
    let mut pending = Pending::default();
    let mut retry = tokio::time::interval(RETRY);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let event = tokio::select! {
            event = events.next() => match event {
                Some(event) => event,
                None => break,
            },
            _ = retry.tick() => {
                pending.flush(&store).await;
                continue;
            }
        };
        match event {
            Ok(Event::Init) => listed.clear(),
            Ok(Event::InitApply(account)) => {
                let (subject, uid) = identity_of(&account);
                pending.push(Change::Heard(subject.clone(), uid.clone()));
                listed.insert(subject, uid);
            }
            Ok(Event::InitDone) => {
                pending.accounts = std::mem::take(&mut listed);
                pending.push(Change::Retain(SessionsKept::Listed(pending.accounts.clone())));
            }
            Ok(Event::Apply(account)) => {
                let (subject, uid) = identity_of(&account);
                pending.accounts.insert(subject.clone(), uid.clone());
                pending.push(Change::Heard(subject.clone(), uid.clone()));
                pending.push(Change::Retain(SessionsKept::Account { subject, uid }));
            }
            Ok(Event::Delete(account)) => {
                let (subject, _) = identity_of(&account);
                pending.accounts.remove(&subject);
                pending.push(Change::Heard(subject.clone(), None));
                pending.push(Change::Retain(SessionsKept::Gone { subject }));
            }
            // Errors were reported by the watch itself.
            Err(_) => continue,
        }
        pending.flush(&store).await;
    }
    if process.stop.is_given() {
        Ok(())
    } else {
        Err(format!("the watch of {SERVICE_ACCOUNT_WATCH} ended"))
    }
}
