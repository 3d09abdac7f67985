//! What every reconcile of the bucket controller shares: the client, the backend, the caches,
//! Events, metrics, health, backoff, the claims parked on a permanent failure and those
//! waiting on their backend.

use std::collections::HashMap;
use std::sync::Mutex;

use bucket_api::{AccessMode, ObjectBucketClaim};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, Resource, ResourceExt};

use crate::bucket::error::Error;
use crate::kubernetes::backoff::Backoff;
use crate::kubernetes::cache::Caches;
use crate::kubernetes::cache::claims::CachedClaim;
use crate::kubernetes::events::{Events, publish};
use crate::kubernetes::failure::{Failure, Operation};
use crate::kubernetes::health::Health;
use crate::kubernetes::log_limit::SharedThrottle;
use crate::kubernetes::telemetry::Metrics;
use crate::kubernetes::waiting::Waiting;

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
    /// Claims waiting on their backend (grouped by StorageClass), retried promptly once it
    /// answers again.
    pub(crate) waiting: Waiting<ObjectRef<CachedClaim>>,
}

/// What a permanent failure depended on: the claim's spec, its rotation request (an annotation,
/// which leaves the generation as it is), its StorageClass (the one a bound claim's
/// ObjectBucket records) and, for a bound claim sharing a bucket, what narrows or revokes its
/// key whatever the claim says: so that a claim its tenant broke still has its key narrowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Inputs {
    pub(crate) generation: Option<i64>,
    pub(crate) rotation_request: Option<String>,
    pub(crate) class_version: Option<String>,
    /// The mode the claim it shares from allows, and whether consent to share is withdrawn.
    pub(crate) sharing: Option<(Option<AccessMode>, bool)>,
}

impl<P> Context<P> {
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

    /// The retry of `claim` (`key`) after `error`. A transient failure of the backend notes the
    /// claim as waiting on its StorageClass's backend; any other answer of the backend is an
    /// answer, and retries the claims that wait on the same one.
    pub(crate) fn retry_after(
        &self,
        claim: &ObjectBucketClaim,
        error: &Error,
        key: &str,
    ) -> Action {
        let delay = self.backoff.delay(error.retry(), key);
        match (error, delay) {
            (Error::Backend { source, .. }, Some(delay)) if !source.is_permanent() => {
                let target = ObjectRef::new(&claim.name_any())
                    .within(&claim.namespace().unwrap_or_default());
                self.waiting.failed(key, &claim.spec.storage_class_name, target, delay);
            }
            (Error::Backend { .. }, _) => self.backend_answered(key),
            _ => self.waiting.left(key),
        }
        delay.map_or_else(Action::await_change, Action::requeue)
    }

    /// `key`'s reconcile got an answer from its backend: if it was waiting on it, so are others
    /// perhaps, and they are retried now.
    pub(crate) fn backend_answered(&self, key: &str) {
        let woken = self.waiting.answered(key);
        if woken > 0 {
            tracing::info!(claim = %key, woken,
                "the backend answered again; retrying the claims that waited on it");
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
