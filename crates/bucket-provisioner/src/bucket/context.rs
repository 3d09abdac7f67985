//! What every reconcile of the bucket controller shares: the client, the backend, the caches,
//! Events, metrics, health, backoff, and the claims parked on a permanent failure.

use std::collections::HashMap;
use std::sync::Mutex;

use bucket_api::ObjectBucketClaim;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::EventType;
use kube::{Client, Resource, ResourceExt};

use crate::bucket::rotation_record::requested;
use crate::kubernetes::backoff::Backoff;
use crate::kubernetes::cache::Caches;
use crate::kubernetes::events::{Events, publish};
use crate::kubernetes::failure::Operation;
use crate::kubernetes::health::Health;
use crate::kubernetes::log_limit::SharedThrottle;
use crate::kubernetes::telemetry::Metrics;

/// Shared state of all reconciles.
pub(crate) struct Context<P> {
    pub(crate) client: Client,
    pub(crate) provisioner: P,
    pub(crate) name: String,
    pub(crate) events: Events,
    pub(crate) metrics: Metrics,
    pub(crate) health: Health,
    pub(crate) caches: Caches,
    pub(crate) backoff: Backoff,
    /// Reconciles failing with the Kubernetes API: told once a minute, not once a retry.
    pub(crate) api_failing: SharedThrottle,
    pub(crate) parked: Mutex<HashMap<String, Inputs>>,
    /// Claims whose Secret or ConfigMap name was found taken by an object not theirs.
    pub(crate) blocked: Mutex<std::collections::HashSet<String>>,
}

/// What a permanent failure depended on: the claim's spec, its rotation request (an annotation,
/// which leaves the generation as it is) and its StorageClass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Inputs {
    generation: Option<i64>,
    rotation_request: Option<String>,
    class_version: Option<String>,
}

impl<P> Context<P> {
    pub(crate) fn inputs(&self, claim: &ObjectBucketClaim) -> Inputs {
        let class = self.caches.class(&claim.spec.storage_class_name);
        Inputs {
            generation: claim.metadata.generation,
            rotation_request: requested(claim).map(str::to_owned),
            class_version: class.and_then(|c| c.resource_version()),
        }
    }

    /// Remembers that the claim failed permanently with these inputs. Our own status writes wake
    /// the claim up again; parking keeps that from calling the backend until something changed.
    /// (After a restart a parked claim is tried once more, which is harmless.)
    pub(crate) fn park(&self, key: &str, claim: &ObjectBucketClaim) {
        let inputs = self.inputs(claim);
        self.parked.lock().unwrap_or_else(|e| e.into_inner()).insert(key.to_string(), inputs);
    }

    /// Whether the claim failed permanently and neither it nor its StorageClass changed since.
    pub(crate) fn is_parked(&self, key: &str, claim: &ObjectBucketClaim) -> bool {
        let mut parked = self.parked.lock().unwrap_or_else(|e| e.into_inner());
        let Some(inputs) = parked.get(key) else { return false };
        if claim.meta().deletion_timestamp.is_none() && *inputs == self.inputs(claim) {
            return true;
        }
        parked.remove(key);
        false
    }

    /// Whether the claim was found blocked by a foreign Secret or ConfigMap; `Some(blocked)`
    /// records a new finding.
    pub(crate) fn blocked(&self, key: &str, blocked: Option<bool>) -> bool {
        let mut set = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
        match blocked {
            Some(true) => set.insert(key.to_owned()),
            Some(false) => set.remove(key),
            None => set.contains(key),
        }
    }

    /// Publishes an Event on the claim; a failure to publish is logged, never fatal.
    pub(crate) async fn event(
        &self,
        claim: &ObjectBucketClaim,
        type_: EventType,
        reason: &str,
        note: &str,
        operation: Operation,
    ) {
        self.publish(&claim.object_ref(&()), type_, reason, note, operation).await;
    }

    /// Publishes an Event on any object; a failure to publish is logged, never fatal.
    pub(crate) async fn publish(
        &self,
        subject: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: &str,
        operation: Operation,
    ) {
        publish(&self.events, subject, type_, reason, note, &format!("{operation:?}")).await;
    }
}
