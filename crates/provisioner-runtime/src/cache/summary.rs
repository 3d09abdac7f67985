//! What the controller keeps of its Secrets and ConfigMaps: whose each is and a digest of what it
//! holds, never the data itself. A reconcile only asks whether the claim controls the object and
//! whether its data is what would be written, so a few dozen bytes per object answer it where
//! the objects themselves took kilobytes, and the Secrets' credentials stay out of the cache.

use std::fmt::Debug;
use std::sync::Arc;

use bucket_api::contract;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Resource;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use crate::cache::compact::Compact;
use crate::cache::{Versioned, Writes, key_of};

/// One Secret or ConfigMap, as the caches keep it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// The resourceVersion as a number: etcd's revisions are.
    resource_version: Option<u64>,
    /// A digest of the UID in its controller reference.
    controller: Option<[u8; 16]>,
    /// A digest of its `data`.
    data: [u8; 16],
    /// For a Secret holding both credential keys: SHA-256 of them, as
    /// the bucket side's `credentials_digest` computes it.
    credentials: Option<[u8; 32]>,
}

impl Versioned for Summary {
    fn version(&self) -> Option<u64> {
        self.resource_version
    }

    /// The library deletes a Secret or ConfigMap only to take back what it wrote for a refused
    /// claim, and writes none under that name until the claim is tried again (which records
    /// its write), so summaries need no UID to tell a deleted object from a new one.
    fn object_uid(&self) -> Option<&str> {
        None
    }
}

/// The first half of SHA-256: compared, never read back, in half the memory. Finding other
/// data with the same half is still a search through 2^128 digests.
fn half_digest(hasher: Sha256) -> [u8; 16] {
    let digest: [u8; 32] = hasher.finalize().into();
    let mut half = [0; 16];
    half.copy_from_slice(&digest[..16]);
    half
}

fn uid_digest(uid: &str) -> [u8; 16] {
    half_digest(Sha256::new_with_prefix(uid.as_bytes()))
}

impl Summary {
    /// Whether the object with `owner_uid` controls it.
    pub fn controlled_by(&self, owner_uid: &str) -> bool {
        self.controller == Some(uid_digest(owner_uid))
    }

    /// The resourceVersion, to guard a replacement with.
    pub fn resource_version(&self) -> Option<String> {
        self.resource_version.map(|version| version.to_string())
    }

    /// Whether it holds exactly the data `object` holds.
    pub fn same_data<K: Summarized>(&self, object: &K) -> bool {
        self.data == object.data_digest()
    }

    /// The digest of the Secret's credentials, when it holds both keys, non-empty.
    pub fn credentials(&self) -> Option<&[u8; 32]> {
        self.credentials.as_ref()
    }
}

/// A kind cached as [`Summary`]s.
pub trait Summarized:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
    /// A digest of the object's `data`.
    fn data_digest(&self) -> [u8; 16];

    /// The digest of the credentials it holds, if it is a Secret with both keys.
    fn credentials(&self) -> Option<[u8; 32]> {
        None
    }

    /// What the caches keep of it.
    fn summary(&self) -> Summary {
        let meta = self.meta();
        let controller =
            meta.owner_references.iter().flatten().find(|o| o.controller == Some(true));
        Summary {
            resource_version: meta.resource_version.as_deref().and_then(|v| v.parse().ok()),
            controller: controller.map(|o| uid_digest(&o.uid)),
            data: self.data_digest(),
            credentials: self.credentials(),
        }
    }
}

/// Length-prefixed, so that no two different maps hash alike.
fn digest_entries<'a>(entries: impl Iterator<Item = (&'a str, &'a [u8])>) -> [u8; 16] {
    let mut hasher = Sha256::new();
    for (key, value) in entries {
        hasher.update((key.len() as u64).to_le_bytes());
        hasher.update(key.as_bytes());
        hasher.update((value.len() as u64).to_le_bytes());
        hasher.update(value);
    }
    half_digest(hasher)
}

impl Summarized for Secret {
    fn data_digest(&self) -> [u8; 16] {
        digest_entries(self.data.iter().flatten().map(|(k, v)| (k.as_str(), v.0.as_slice())))
    }

    fn credentials(&self) -> Option<[u8; 32]> {
        let value = |key: &str| {
            let bytes = self.data.as_ref()?.get(key)?;
            std::str::from_utf8(&bytes.0).ok().filter(|v| !v.is_empty())
        };
        let access_key_id = value(contract::SECRET_ACCESS_KEY_ID)?;
        let secret_access_key = value(contract::SECRET_SECRET_ACCESS_KEY)?;
        Some(credentials_hash(access_key_id, secret_access_key))
    }
}

impl Summarized for ConfigMap {
    fn data_digest(&self) -> [u8; 16] {
        digest_entries(self.data.iter().flatten().map(|(k, v)| (k.as_str(), v.as_bytes())))
    }
}

/// The summaries of every object one watch sees, corrected by our own writes the watch has not
/// delivered yet.
pub struct Summaries<K> {
    cache: Compact<K, Summary>,
    writes: Writes<Summary>,
}

impl<K: Summarized> Default for Summaries<K> {
    fn default() -> Self {
        let summarize = |object: &K| Some(object.summary());
        Self { cache: Compact::new(Box::new(summarize)), writes: Writes::default() }
    }
}

impl<K: Summarized> Summaries<K> {
    /// Takes in one watch event.
    pub fn apply(&self, event: &watcher::Event<K>) {
        self.cache.apply(event);
    }

    /// The newest known summary of `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<Summary>> {
        let cached = self.cache.get(namespace, name).map(Arc::new);
        self.writes.newest(namespace, name, cached)
    }

    /// Remembers `object` as just written.
    pub fn wrote(&self, object: &K) -> Arc<Summary> {
        self.writes.wrote_as(key_of(object.meta()), object.summary())
    }

    /// Remembers that `namespace/name` was just deleted by us.
    pub fn deleted(&self, namespace: &str, name: &str) {
        self.writes.deleted_as((namespace.to_owned(), name.to_owned()));
    }

    /// How many objects the cache holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.cache.keys().len()
    }
}

/// The digest of a key pair, as a Secret summary keeps it; hex-encoded, the ObjectBucket records
/// it as the bucket side's `credentials_digest`.
pub fn credentials_hash(access_key_id: &str, secret_access_key: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(access_key_id.as_bytes());
    hasher.update(b"\n");
    hasher.update(secret_access_key.as_bytes());
    hasher.finalize().into()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::api::ObjectMeta;

    use super::*;

    fn secret(name: &str, version: &str, owner: &str, key_id: &str) -> Secret {
        let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
        Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                resource_version: Some(version.into()),
                uid: Some(format!("uid-{name}")),
                owner_references: Some(vec![OwnerReference {
                    uid: owner.into(),
                    controller: Some(true),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            data: Some(BTreeMap::from([
                (contract::SECRET_ACCESS_KEY_ID.into(), bytes(key_id)),
                (contract::SECRET_SECRET_ACCESS_KEY.into(), bytes("secret")),
            ])),
            ..Default::default()
        }
    }

    #[test]
    fn summaries_tell_owner_data_and_credentials_without_keeping_them() {
        let one = secret("a", "5", "claim-1", "AK1");
        let summary = one.summary();
        assert!(summary.controlled_by("claim-1"));
        assert!(!summary.controlled_by("claim-2"));
        assert!(summary.same_data(&one));
        assert!(!summary.same_data(&secret("a", "5", "claim-1", "AK2")));
        assert_eq!(summary.credentials(), Some(&credentials_hash("AK1", "secret")));
        let mut emptied = one.clone();
        emptied
            .data
            .as_mut()
            .unwrap()
            .insert(contract::SECRET_SECRET_ACCESS_KEY.into(), ByteString(Vec::new()));
        assert_eq!(emptied.summary().credentials(), None);
        let mut unowned = one.clone();
        unowned.metadata.owner_references.as_mut().unwrap()[0].controller = None;
        assert!(!unowned.summary().controlled_by("claim-1"));
        // Keys and values cannot trade bytes and hash alike.
        let shifted = |k: &str, v: &str| ConfigMap {
            data: Some(BTreeMap::from([(k.to_owned(), v.to_owned())])),
            ..Default::default()
        };
        assert_ne!(shifted("ab", "c").data_digest(), shifted("a", "bc").data_digest());
    }

    #[test]
    fn a_relist_replaces_everything_and_our_writes_win_until_seen() {
        let summaries = Summaries::<Secret>::default();
        summaries.apply(&watcher::Event::Apply(secret("a", "5", "c", "AK1")));
        summaries.apply(&watcher::Event::Apply(secret("b", "6", "c", "AK1")));
        assert_eq!(summaries.len(), 2);

        summaries.wrote(&secret("a", "9", "c", "AK2"));
        let newest = summaries.get("ns", "a").unwrap();
        assert!(newest.same_data(&secret("a", "9", "c", "AK2")), "our write is newer");

        // A relist that no longer shows `b` drops it, but only once complete.
        summaries.apply(&watcher::Event::Init);
        summaries.apply(&watcher::Event::InitApply(secret("a", "10", "c", "AK3")));
        assert!(summaries.get("ns", "b").is_some(), "the old list serves until the new one is in");
        summaries.apply(&watcher::Event::InitDone);
        assert!(summaries.get("ns", "b").is_none());
        let newest = summaries.get("ns", "a").unwrap();
        assert!(newest.same_data(&secret("a", "10", "c", "AK3")), "the cache caught up");

        summaries.apply(&watcher::Event::Delete(secret("a", "11", "c", "AK3")));
        assert_eq!(summaries.len(), 0);
    }

    #[test]
    fn our_deletion_hides_the_object_whether_or_not_the_watch_saw_it() {
        let summaries = Summaries::<Secret>::default();
        // Written and deleted before the watch delivered either.
        summaries.wrote(&secret("a", "5", "c", "AK1"));
        summaries.deleted("ns", "a");
        assert!(summaries.get("ns", "a").is_none());
        // Seen by the watch, deleted by us, and the watch not caught up yet.
        summaries.apply(&watcher::Event::Apply(secret("b", "6", "c", "AK1")));
        summaries.deleted("ns", "b");
        assert!(summaries.get("ns", "b").is_none());
        summaries.apply(&watcher::Event::Delete(secret("b", "7", "c", "AK1")));
        assert!(summaries.get("ns", "b").is_none());
        // Written again afterwards: ours again.
        summaries.wrote(&secret("b", "8", "c", "AK2"));
        assert!(summaries.get("ns", "b").unwrap().same_data(&secret("b", "8", "c", "AK2")));
    }
}
