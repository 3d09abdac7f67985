//! What the controller knows of the cluster without asking: the watch caches of claims,
//! ObjectBuckets, our Secrets and ConfigMaps (as summaries), the StorageClasses, the
//! BucketShareGrants and the Namespaces' labels, each corrected by the controller's own writes that its watch has not
//! delivered yet.
//!
//! A reconcile reads only from here. A write answers with the object as written, which is kept
//! until the cache holds that version (or a newer one), so the next reconcile never acts on a copy
//! older than what it wrote itself: no duplicate ObjectBucket, no undone finalizer, no status
//! written twice.

use std::sync::Arc;

use bucket_api::{BucketShareGrant, ObjectBucket, ObjectBucketClaim};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::watch;

pub mod claims;
pub mod compact;
pub mod summary;
pub mod writes;

use claims::CachedClaim;
use compact::Packed;
use summary::Summaries;
pub use writes::{Key, Recent, Versioned, Writes, key, key_of, reference_key};

/// Every cache a reconcile reads.
pub struct Caches {
    /// Claims as the cache holds them, packed (with malformed ones).
    pub claim_store: Store<CachedClaim>,
    /// Our own writes of claims.
    pub claims: Writes<ObjectBucketClaim>,
    /// ObjectBuckets of this provisioner, packed.
    pub buckets: Arc<Packed<ObjectBucket>>,
    /// Secrets of this provisioner (labelled), summarized.
    pub secrets: Arc<Summaries<Secret>>,
    /// ConfigMaps of this provisioner (labelled), summarized.
    pub config_maps: Arc<Summaries<ConfigMap>>,
    /// Every StorageClass.
    pub classes: Store<StorageClass>,
    /// Every BucketShareGrant: the consents to share a bucket across namespaces.
    pub grants: Store<BucketShareGrant>,
    /// Every Namespace, with its labels alone: where a StorageClass limits sharing across
    /// namespaces to those of given labels.
    pub namespaces: Store<Namespace>,
    /// Whether every cache holds its first list.
    pub listed: watch::Receiver<bool>,
}

impl Caches {
    /// The newest known version of the claim the controller handed over; `None` once we let it
    /// go (removed the last finalizer of a deleted claim) even if the cache still shows it.
    pub fn claim(&self, cached: &ObjectBucketClaim) -> Option<Arc<ObjectBucketClaim>> {
        let (namespace, name) = key_of(&cached.metadata);
        self.claims.newest(&namespace, &name, Some(Arc::new(cached.clone())))
    }

    /// The StorageClass `name`, if the cache has it.
    pub fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.classes.get(&ObjectRef::new(name))
    }

    /// The labels of Namespace `name`, if the cache has it.
    pub fn namespace_labels(
        &self,
        name: &str,
    ) -> Option<std::collections::BTreeMap<String, String>> {
        let namespace = self.namespaces.get(&ObjectRef::new(name))?;
        Some(namespace.metadata.labels.clone().unwrap_or_default())
    }

    /// Waits until every cache holds its first list: before that, a missing object proves nothing.
    pub async fn until_listed(&self) {
        let mut listed = self.listed.clone();
        let _ = listed.wait_for(|l| *l).await;
    }
}
