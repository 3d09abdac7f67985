//! Watch caches that keep each object in a compact form rather than as its Rust struct, whose
//! maps and optional fields cost several times the object's own size: a [`Summary`] of what a
//! reconcile asks of our Secrets and ConfigMaps, or an ObjectBucket or claim packed (compressed
//! JSON), decoded only when a reader asks for that one object. Each is corrected by our own writes the watch has not
//! delivered yet, as [`crate::cache`] explains.
//!
//! [`Summary`]: crate::cache::summary::Summary

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};

use kube::Resource;
use kube::api::ObjectMeta;
use kube::runtime::watcher;
use lz4_flex::block::{
    compress_prepend_size, compress_prepend_size_with_dict, decompress_size_prepended,
    decompress_size_prepended_with_dict,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cache::{Key, Writes};

/// Every object one watch sees, by `namespace/name`, each as `V`.
pub struct Compact<K, V> {
    entries: RwLock<Entries<V>>,
    /// A relist in progress: it replaces `entries` whole once complete.
    relisting: Mutex<Option<Entries<V>>>,
    compact: Compactor<K, V>,
}

/// By `namespace/name` in one string (neither may hold a `/`): one allocation per key, not two.
type Entries<V> = HashMap<Box<str>, V>;

fn joined(namespace: &str, name: &str) -> Box<str> {
    format!("{namespace}/{name}").into()
}

fn joined_key(meta: &ObjectMeta) -> Box<str> {
    joined(meta.namespace.as_deref().unwrap_or_default(), meta.name.as_deref().unwrap_or_default())
}

/// Makes the compact form of an object; `None` leaves it out of the cache.
pub type Compactor<K, V> = Box<dyn Fn(&K) -> Option<V> + Send + Sync>;

impl<K: Resource, V: Clone> Compact<K, V> {
    /// An empty cache keeping objects as `compact` makes them.
    pub fn new(compact: Compactor<K, V>) -> Self {
        Self { entries: RwLock::default(), relisting: Mutex::default(), compact }
    }

    /// Takes in one watch event.
    pub fn apply(&self, event: &watcher::Event<K>) {
        match event {
            watcher::Event::Apply(object) => {
                let key = joined_key(object.meta());
                match (self.compact)(object) {
                    Some(value) => self.write().insert(key, value),
                    None => self.write().remove(&key),
                };
            }
            watcher::Event::Delete(object) => {
                self.write().remove(&joined_key(object.meta()));
            }
            watcher::Event::Init => *self.relisting() = Some(HashMap::new()),
            watcher::Event::InitApply(object) => {
                if let Some(value) = (self.compact)(object) {
                    self.relisting()
                        .get_or_insert_default()
                        .insert(joined_key(object.meta()), value);
                }
            }
            watcher::Event::InitDone => {
                if let Some(listed) = self.relisting().take() {
                    *self.write() = listed;
                }
            }
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Entries<V>> {
        self.entries.write().unwrap_or_else(|e| e.into_inner())
    }

    fn relisting(&self) -> MutexGuard<'_, Option<Entries<V>>> {
        self.relisting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the cache holds of `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<V> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries.get(&joined(namespace, name)).cloned()
    }

    /// The keys of every object the cache holds.
    pub fn keys(&self) -> Vec<Key> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        let split = |key: &str| {
            let (namespace, name) = key.split_once('/').unwrap_or_default();
            (namespace.to_owned(), name.to_owned())
        };
        entries.keys().map(|key| split(key)).collect()
    }
}

/// Objects kept packed (see [`Dictionary`]); a read decodes the one object it asks for.
pub struct Packed<K> {
    cache: Compact<K, Arc<[u8]>>,
    dictionary: Arc<Dictionary>,
    writes: Writes<K>,
}

impl<K: Resource + Serialize + DeserializeOwned> Default for Packed<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Resource + Serialize + DeserializeOwned> Packed<K> {
    /// An empty cache.
    pub fn new() -> Self {
        let dictionary = Arc::new(Dictionary::new());
        let packing = dictionary.clone();
        let pack = move |object: &K| match packing.pack(object) {
            Ok(packed) => Some(packed),
            Err(e) => {
                tracing::error!(object = %object.meta().name.as_deref().unwrap_or(""), error = %e,
                    "an object does not encode; it is left out of the cache");
                None
            }
        };
        Self { cache: Compact::new(Box::new(pack)), dictionary, writes: Writes::default() }
    }

    /// Takes in one watch event.
    pub fn apply(&self, event: &watcher::Event<K>) {
        self.cache.apply(event);
    }

    /// The newest known `namespace/name` (`namespace` empty for cluster-scoped kinds).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        let cached = self.cache.get(namespace, name).and_then(|packed| {
            self.dictionary
                .unpack(&packed)
                .map(Arc::new)
                .inspect_err(|e| {
                    tracing::error!(object = name, error = %e,
                    "a cached object does not decode; treating it as absent")
                })
                .ok()
        });
        self.writes.newest(namespace, name, cached)
    }

    /// The keys of every object the cache holds.
    pub fn keys(&self) -> Vec<Key> {
        self.cache.keys()
    }

    /// Remembers `object` as just written.
    pub fn wrote(&self, object: K) -> Arc<K> {
        self.writes.wrote(object)
    }

    /// Remembers that `object` was just deleted.
    pub fn deleted(&self, object: &K) {
        self.writes.deleted(object)
    }
}

/// Packed objects are JSON compressed against a dictionary: the first object of the kind packed
/// that is small enough. Objects of one kind differ mostly in names, UIDs and digests, so each
/// takes a fifth of its JSON. Which object it was changes only how well others compress.
pub struct Dictionary(OnceLock<Box<[u8]>>);

/// The largest JSON taken as a dictionary: LZ4 looks back 64 KiB at most, and a typical object
/// is about 1 KiB.
const DICTIONARY_MAX: usize = 4096;

/// The first byte of a packed object: whether it was compressed against the dictionary (an
/// object packed before there was one was not).
const PLAIN: u8 = 0;
const AGAINST_DICTIONARY: u8 = 1;

impl Default for Dictionary {
    fn default() -> Self {
        Self::new()
    }
}

impl Dictionary {
    /// No dictionary yet: the first small object packed becomes it.
    pub const fn new() -> Self {
        Self(OnceLock::new())
    }

    /// `object` as compressed JSON.
    pub fn pack<K: Serialize>(&self, object: &K) -> Result<Arc<[u8]>, serde_json::Error> {
        let json = serde_json::to_vec(object)?;
        if json.len() <= DICTIONARY_MAX {
            self.0.get_or_init(|| json.as_slice().into());
        }
        let (flag, compressed) = match self.0.get() {
            Some(dictionary) => {
                (AGAINST_DICTIONARY, compress_prepend_size_with_dict(&json, dictionary))
            }
            None => (PLAIN, compress_prepend_size(&json)),
        };
        Ok([&[flag], compressed.as_slice()].concat().into())
    }

    /// The object [`Dictionary::pack`] packed.
    pub fn unpack<K: DeserializeOwned>(&self, packed: &[u8]) -> Result<K, String> {
        let (flag, compressed) = packed.split_first().ok_or("empty")?;
        let json = match (*flag, self.0.get()) {
            (PLAIN, _) => decompress_size_prepended(compressed),
            (AGAINST_DICTIONARY, Some(dictionary)) => {
                decompress_size_prepended_with_dict(compressed, dictionary)
            }
            _ => return Err("packed against a dictionary the cache does not have".into()),
        };
        let json = json.map_err(|e| e.to_string())?;
        serde_json::from_slice(&json).map_err(|e| e.to_string())
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

    #[test]
    fn objects_compress_against_the_first_small_one_and_all_decode() {
        let dictionary = Dictionary::new();
        let large = bucket(&"x".repeat(DICTIONARY_MAX), "1", "class");
        let packed_large = dictionary.pack(&large).unwrap();
        assert_eq!(packed_large[0], PLAIN, "too large to be the dictionary");

        let first = bucket("obc-team-photos-a1gr3fdhkxs3", "2", "standard");
        let second = bucket("obc-team-videos-01t69jtzgqli", "3", "standard");
        let packed_first = dictionary.pack(&first).unwrap();
        let packed_second = dictionary.pack(&second).unwrap();
        assert_eq!(packed_second[0], AGAINST_DICTIONARY);
        let json = serde_json::to_vec(&second).unwrap().len();
        assert!(packed_second.len() * 2 < json, "{} of {json} bytes", packed_second.len());

        for (packed, object) in
            [(&packed_large, &large), (&packed_first, &first), (&packed_second, &second)]
        {
            assert_eq!(dictionary.unpack::<ObjectBucket>(packed).as_ref(), Ok(object));
        }
        let other = Dictionary::new();
        assert!(other.unpack::<ObjectBucket>(&packed_second).is_err(), "no such dictionary");
    }
}
