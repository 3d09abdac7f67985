//! Watch caches that keep each object in a compact form rather than as its Rust struct, whose
//! maps and optional fields cost several times the object's own size: a [`Summary`] of what a
//! reconcile asks of our Secrets and ConfigMaps, or the JSON of an ObjectBucket, decoded only
//! when a reader asks for that one object. Each is corrected by our own writes the watch has not
//! delivered yet, as [`crate::cache`] explains.
//!
//! [`Summary`]: crate::summary::Summary

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use kube::Resource;
use kube::runtime::watcher;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cache::{Key, Writes, key_of};

/// Every object one watch sees, by `namespace/name`, each as `V`.
pub(crate) struct Compact<K, V> {
    entries: RwLock<HashMap<Key, V>>,
    /// A relist in progress: it replaces `entries` whole once complete.
    relisting: Mutex<Option<HashMap<Key, V>>>,
    compact: fn(&K) -> V,
}

impl<K: Resource, V: Clone> Compact<K, V> {
    /// An empty cache keeping objects as `compact` makes them.
    pub(crate) fn new(compact: fn(&K) -> V) -> Self {
        Self { entries: RwLock::default(), relisting: Mutex::default(), compact }
    }

    /// Takes in one watch event.
    pub(crate) fn apply(&self, event: &watcher::Event<K>) {
        match event {
            watcher::Event::Apply(object) => {
                let value = (self.compact)(object);
                self.write().insert(key_of(object.meta()), value);
            }
            watcher::Event::Delete(object) => {
                self.write().remove(&key_of(object.meta()));
            }
            watcher::Event::Init => *self.relisting() = Some(HashMap::new()),
            watcher::Event::InitApply(object) => {
                let value = (self.compact)(object);
                self.relisting().get_or_insert_default().insert(key_of(object.meta()), value);
            }
            watcher::Event::InitDone => {
                if let Some(listed) = self.relisting().take() {
                    *self.write() = listed;
                }
            }
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<Key, V>> {
        self.entries.write().unwrap_or_else(|e| e.into_inner())
    }

    fn relisting(&self) -> MutexGuard<'_, Option<HashMap<Key, V>>> {
        self.relisting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the cache holds of `namespace/name`.
    pub(crate) fn get(&self, namespace: &str, name: &str) -> Option<V> {
        let key = (namespace.to_owned(), name.to_owned());
        self.entries.read().unwrap_or_else(|e| e.into_inner()).get(&key).cloned()
    }

    /// The keys of every object the cache holds.
    pub(crate) fn keys(&self) -> Vec<Key> {
        self.entries.read().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect()
    }
}

/// Objects kept as the JSON of their trimmed selves; a read decodes the one object it asks for.
pub(crate) struct Packed<K> {
    cache: Compact<K, Arc<[u8]>>,
    writes: Writes<K>,
}

impl<K: Resource + Serialize + DeserializeOwned> Packed<K> {
    /// An empty cache.
    pub(crate) fn new() -> Self {
        Self { cache: Compact::new(pack::<K>), writes: Writes::default() }
    }

    /// Takes in one watch event.
    pub(crate) fn apply(&self, event: &watcher::Event<K>) {
        self.cache.apply(event);
    }

    /// The newest known `namespace/name` (`namespace` empty for cluster-scoped kinds).
    pub(crate) fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        let cached = self.cache.get(namespace, name).and_then(|packed| unpack(&packed));
        self.writes.newest(namespace, name, cached)
    }

    /// The keys of every object the cache holds.
    pub(crate) fn keys(&self) -> Vec<Key> {
        self.cache.keys()
    }

    /// Remembers `object` as just written.
    pub(crate) fn wrote(&self, object: K) -> Arc<K> {
        self.writes.wrote(object)
    }

    /// Remembers that `object` was just deleted.
    pub(crate) fn deleted(&self, object: &K) {
        self.writes.deleted(object)
    }
}

fn pack<K: Serialize>(object: &K) -> Arc<[u8]> {
    serde_json::to_vec(object).unwrap_or_default().into()
}

fn unpack<K: DeserializeOwned>(packed: &[u8]) -> Option<Arc<K>> {
    match serde_json::from_slice(packed) {
        Ok(object) => Some(Arc::new(object)),
        Err(e) => {
            tracing::error!(error = %e, "a cached object does not decode; treating it as absent");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use bucket_api::{ObjectBucket, ObjectBucketSpec};
    use kube::api::ObjectMeta;

    use super::*;

    fn bucket(name: &str, version: &str, class: &str) -> ObjectBucket {
        ObjectBucket {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some(version.into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: ObjectBucketSpec { storage_class_name: class.into(), ..Default::default() },
            status: None,
        }
    }

    #[test]
    fn packed_objects_come_back_whole_and_our_writes_win_until_seen() {
        let packed = Packed::<ObjectBucket>::new();
        packed.apply(&watcher::Event::Apply(bucket("a", "5", "first")));
        assert_eq!(packed.get("", "a").as_deref(), Some(&bucket("a", "5", "first")));

        packed.wrote(bucket("a", "7", "second"));
        assert_eq!(packed.get("", "a").unwrap().spec.storage_class_name, "second");
        packed.apply(&watcher::Event::Apply(bucket("a", "7", "second")));
        packed.deleted(&bucket("a", "7", "second"));
        assert_eq!(packed.get("", "a"), None, "deleted, though the cache still shows it");

        packed.apply(&watcher::Event::Init);
        packed.apply(&watcher::Event::InitApply(bucket("b", "9", "third")));
        assert_eq!(packed.keys(), [(String::new(), "a".to_owned())], "relist not complete yet");
        packed.apply(&watcher::Event::InitDone);
        assert_eq!(packed.keys(), [(String::new(), "b".to_owned())]);
    }
}
