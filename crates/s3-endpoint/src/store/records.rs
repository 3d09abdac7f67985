//! The records of buckets and access keys: what each file holds, their in-memory copy with its
//! indexes, and the transactions that change them (a file per record or key, written before
//! anyone can see the change).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::PoisonError;

use md5::{Digest, Md5};
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::durable::{file_change, persist_all, read_all};
use super::key_mode::KeyMode;
use super::{BucketStore, Inner, KEYS_DIR, Quota, RECORDS_DIR, StoreError};

/// What the store knows about a bucket it created.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketRecord {
    /// The bucket name (and directory name).
    pub name: String,
    /// Identity of the provisioner that created it; only that identity may delete it.
    pub owner: String,
    /// Whether the provisioner created the directory (rather than adopting one).
    pub created_by_provisioner: bool,
    /// When the record was written, in seconds since the Unix epoch.
    pub created_unix: u64,
    /// User id of the claim the bucket was created for: only that claim may provision it again
    /// or have it deleted. `None` for operator buckets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creator: Option<String>,
    /// Whether deleting the creating claim deletes the bucket (it was created under `Delete`).
    #[serde(default)]
    pub delete_with_claim: bool,
    /// Limits on everything the bucket holds, set by the claim that created it.
    #[serde(default, skip_serializing_if = "Quota::is_unlimited")]
    pub quota: Quota,
    /// The region the operator created the bucket for (its `LocationConstraint`); `None` for
    /// the default region and for claims' buckets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Which bucket-wide settings the creator's keys may change, as its StorageClass allows
    /// (see [`super::Settable`]); `None` in records written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settable: Option<super::Settable>,
}

/// The claim a bucket is created for, as the store records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Creator<'a> {
    /// The claim's user id.
    pub user_id: &'a str,
    /// Whether deleting the claim deletes the bucket.
    pub delete_with_claim: bool,
}

/// An access key pair and what it may reach. `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessKey {
    /// The access key id the client signs with.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
    /// Buckets this key may use; every other bucket is access denied.
    pub buckets: Vec<String>,
    /// The claim's user id the key was issued for.
    pub user_id: String,
    /// Limits on what this claim's user stores in the key's bucket.
    #[serde(default, skip_serializing_if = "Quota::is_unlimited")]
    pub quota: Quota,
    /// What the key may do in its buckets; absent (in records written before modes existed,
    /// and for every key with all access) means `ReadWrite`.
    #[serde(default, skip_serializing_if = "is_read_write")]
    pub mode: KeyMode,
    /// How many rotations before this key was issued for its claim (0: its first key). The
    /// claim's current key is its key with the highest generation.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: u32,
    /// The web identities that may trade their tokens for sessions of this key (see
    /// [`super::WebIdentityAccess`]); `None`: none may.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web_identity: Option<super::WebIdentityAccess>,
    /// For a session's key (see [`super::Session`]), the token every request signed with it must
    /// carry; never recorded.
    #[serde(skip)]
    pub session_token: Option<String>,
}

fn is_zero(generation: &u32) -> bool {
    *generation == 0
}

fn is_read_write(mode: &KeyMode) -> bool {
    *mode == KeyMode::ReadWrite
}

impl std::fmt::Debug for AccessKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessKey")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field("buckets", &self.buckets)
            .field("user_id", &self.user_id)
            .field("quota", &self.quota)
            .field("mode", &self.mode)
            .field("generation", &self.generation)
            .field("web_identity", &self.web_identity)
            .field("session", &self.session_token.is_some())
            .finish()
    }
}

impl AccessKey {
    /// Whether this key may use `bucket`.
    pub fn allows(&self, bucket: &str) -> bool {
        self.buckets.iter().any(|b| b == bucket)
    }
}

/// Every record and key, in memory, with indexes so that no operation on one claim looks at
/// every key.
#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) buckets: BTreeMap<String, BucketRecord>,
    /// By access key id.
    pub(super) keys: BTreeMap<String, AccessKey>,
    /// User id → its access key ids.
    pub(super) by_user: Index,
    /// Bucket → access key ids reaching it.
    pub(super) by_bucket: Index,
}

/// Access key ids by user or bucket. Almost every entry holds one id, kept without a list.
#[derive(Debug, Default)]
pub(super) struct Index(HashMap<String, Ids>);

#[derive(Debug)]
pub(super) enum Ids {
    One(String),
    /// Sorted.
    Many(Vec<String>),
}

impl Ids {
    fn as_slice(&self) -> &[String] {
        match self {
            Self::One(id) => std::slice::from_ref(id),
            Self::Many(ids) => ids,
        }
    }

    fn from_sorted(mut ids: Vec<String>) -> Option<Self> {
        match ids.len() {
            0 => None,
            1 => ids.pop().map(Self::One),
            _ => Some(Self::Many(ids)),
        }
    }
}

impl Index {
    pub(super) fn insert(&mut self, entry: &str, id: &str) {
        let Some(ids) = self.0.get_mut(entry) else {
            self.0.insert(entry.to_owned(), Ids::One(id.to_owned()));
            return;
        };
        let mut list = ids.as_slice().to_vec();
        if let Err(at) = list.binary_search_by(|i| i.as_str().cmp(id)) {
            list.insert(at, id.to_owned());
            *ids = Ids::Many(list);
        }
    }

    pub(super) fn remove(&mut self, entry: &str, id: &str) {
        let Some(ids) = self.0.get_mut(entry) else { return };
        let rest: Vec<String> = ids.as_slice().iter().filter(|i| *i != id).cloned().collect();
        match Ids::from_sorted(rest) {
            Some(rest) => *ids = rest,
            None => {
                self.0.remove(entry);
            }
        }
    }

    pub(super) fn get(&self, entry: &str) -> &[String] {
        self.0.get(entry).map(Ids::as_slice).unwrap_or_default()
    }
}

impl State {
    /// The record of `bucket` when the claim `user_id` created it, else
    /// [`StoreError::NotCreator`]: the one test every creator-only change passes.
    pub(super) fn created_by(
        &self,
        bucket: &str,
        user_id: &str,
    ) -> Result<&BucketRecord, StoreError> {
        self.buckets
            .get(bucket)
            .filter(|r| r.created_by_provisioner && r.creator.as_deref() == Some(user_id))
            .ok_or_else(|| StoreError::NotCreator(bucket.to_owned()))
    }

    pub(super) fn insert_key(&mut self, key: AccessKey) {
        self.by_user.insert(&key.user_id, &key.access_key_id);
        for bucket in &key.buckets {
            self.by_bucket.insert(bucket, &key.access_key_id);
        }
        self.keys.insert(key.access_key_id.clone(), key);
    }

    pub(super) fn remove_key(&mut self, id: &str) {
        let Some(key) = self.keys.remove(id) else { return };
        self.by_user.remove(&key.user_id, id);
        for bucket in &key.buckets {
            self.by_bucket.remove(bucket, id);
        }
    }

    /// The ids of `user_id`'s keys.
    pub(super) fn keys_of_user(&self, user_id: &str) -> Vec<String> {
        self.by_user.get(user_id).to_vec()
    }

    /// The keys of `user_id` for `bucket`: one, or two while a rotation overlaps them.
    pub(super) fn keys_of_claim(&self, user_id: &str, bucket: &str) -> Vec<&AccessKey> {
        let ids = self.by_user.get(user_id).iter();
        ids.filter_map(|id| self.keys.get(id)).filter(|k| k.allows(bucket)).collect()
    }

    /// The keys reaching `bucket`.
    pub(super) fn keys_of_bucket(&self, bucket: &str) -> impl Iterator<Item = &AccessKey> {
        self.by_bucket.get(bucket).iter().filter_map(|id| self.keys.get(id))
    }
}

impl BucketStore {
    /// Sets what the key of `user_id` for `bucket` (which must exist) may do. Writes the key's
    /// record only when the mode changes, so a claim with all access costs no write.
    pub async fn set_key_mode(
        &self,
        user_id: &str,
        bucket: &str,
        mode: KeyMode,
    ) -> Result<(), StoreError> {
        let (user_id, bucket) = (user_id.to_owned(), bucket.to_owned());
        self.blocking(move |store| {
            store.inner.mutate(|tx| {
                for key in claim_keys(tx, &user_id, &bucket)? {
                    if key.mode != mode {
                        tx.put_key(AccessKey { mode, ..key });
                    }
                }
                Ok(())
            })
        })
        .await
    }

    /// Issues a new key for `user_id` on `bucket` with the access of its key `keep`, after
    /// removing every other key of `user_id` there (left by an attempt whose answer was lost),
    /// and answers it; `keep` goes on working. Fails when `keep` is not a key of `user_id` on
    /// `bucket`, so that a claim never ends up without a key it knows.
    pub async fn rotate_key(
        &self,
        user_id: &str,
        bucket: &str,
        keep: &str,
    ) -> Result<AccessKey, StoreError> {
        let (user_id, bucket, keep) = (user_id.to_owned(), bucket.to_owned(), keep.to_owned());
        self.blocking(move |store| {
            store.inner.mutate(|tx| {
                let keys = claim_keys(tx, &user_id, &bucket)?;
                let Some(kept) = keys.iter().find(|k| k.access_key_id == keep).cloned() else {
                    return Err(StoreError::InvalidArgument(format!(
                        "{keep} is not a key of {user_id} for bucket {bucket:?}"
                    )));
                };
                let generation = keys.iter().map(|k| k.generation).max().unwrap_or(0) + 1;
                for stray in keys.iter().filter(|k| k.access_key_id != keep) {
                    tx.remove_key(&stray.access_key_id);
                }
                let key = AccessKey {
                    access_key_id: rotated_access_key_id(&user_id, &bucket, generation),
                    secret_access_key: random_secret(),
                    generation,
                    ..kept
                };
                tx.put_key(key.clone());
                Ok(key)
            })
        })
        .await
    }

    /// Removes the key `access_key_id` if it is one of `user_id`'s; answers whether it was
    /// there. A key of anyone else stays.
    pub async fn retire_key(&self, user_id: &str, access_key_id: &str) -> Result<bool, StoreError> {
        let (user_id, id) = (user_id.to_owned(), access_key_id.to_owned());
        self.blocking(move |store| {
            store.inner.mutate(|tx| {
                let ours = tx.state.keys.get(&id).is_some_and(|k| k.user_id == user_id);
                if ours {
                    tx.remove_key(&id);
                }
                Ok(ours)
            })
        })
        .await
    }
}

/// The keys of `user_id` for `bucket`, copied out of the transaction's state; none is an error.
pub(super) fn claim_keys(
    tx: &Tx<'_>,
    user_id: &str,
    bucket: &str,
) -> Result<Vec<AccessKey>, StoreError> {
    let keys: Vec<AccessKey> =
        tx.state.keys_of_claim(user_id, bucket).into_iter().cloned().collect();
    if keys.is_empty() {
        return Err(StoreError::InvalidArgument(format!(
            "{user_id} has no key for bucket {bucket:?}"
        )));
    }
    Ok(keys)
}

/// Changes decided under the writer lock, persisted before anyone can see them.
pub(super) struct Tx<'a> {
    pub(super) state: &'a State,
    pub(super) buckets: BTreeMap<String, Option<BucketRecord>>,
    pub(super) keys: BTreeMap<String, Option<AccessKey>>,
}

impl Tx<'_> {
    pub(super) fn put_bucket(&mut self, record: BucketRecord) {
        self.buckets.insert(record.name.clone(), Some(record));
    }

    pub(super) fn remove_bucket(&mut self, name: &str) {
        self.buckets.insert(name.to_owned(), None);
    }

    pub(super) fn put_key(&mut self, key: AccessKey) {
        self.keys.insert(key.access_key_id.clone(), Some(key));
    }

    pub(super) fn remove_key(&mut self, id: &str) {
        self.keys.insert(id.to_owned(), None);
    }
}

impl Inner {
    /// Lets `f` decide changes against the current state, then persists each changed record and
    /// key (a file each) before anyone can see them. Writers take turns; readers never wait on a
    /// file system write.
    pub(super) fn mutate<R>(
        &self,
        f: impl FnOnce(&mut Tx<'_>) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let _guard = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let (out, buckets, keys) = {
            let state = self.read();
            let mut tx = Tx { state: &state, buckets: BTreeMap::new(), keys: BTreeMap::new() };
            let out = f(&mut tx)?;
            (out, tx.buckets, tx.keys)
        };
        if buckets.is_empty() && keys.is_empty() {
            return Ok(out);
        }
        let dir = self.state_dir();
        let mut files = Vec::with_capacity(buckets.len() + keys.len());
        for (name, record) in &buckets {
            files.push(file_change(&dir.join(RECORDS_DIR), name, record.as_ref())?);
        }
        for (id, key) in &keys {
            files.push(file_change(&dir.join(KEYS_DIR), id, key.as_ref())?);
        }
        persist_all(&files)?;
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        for (name, record) in buckets {
            match record {
                Some(record) => state.buckets.insert(name, record),
                None => state.buckets.remove(&name),
            };
        }
        for (id, key) in keys {
            state.remove_key(&id);
            if let Some(key) = key {
                state.insert_key(key);
            }
        }
        Ok(out)
    }
}

/// The key of `user_id` for `bucket`: the newest issued before (a retry gets the same pair, and
/// a rotated claim its current key, never a third), or a new one recorded in `tx`.
pub(super) fn issue_in(tx: &mut Tx<'_>, user_id: &str, bucket: &str) -> AccessKey {
    let newest = tx.state.keys_of_claim(user_id, bucket).into_iter().max_by_key(|k| k.generation);
    if let Some(key) = newest {
        return key.clone();
    }
    let access_key_id = derive_access_key_id(user_id, bucket);
    let key = AccessKey {
        access_key_id,
        secret_access_key: random_secret(),
        buckets: vec![bucket.to_owned()],
        user_id: user_id.to_owned(),
        quota: Quota::default(),
        mode: KeyMode::ReadWrite,
        generation: 0,
        web_identity: None,
        session_token: None,
    };
    tx.put_key(key.clone());
    key
}

pub(super) fn load_state(state_dir: &Path) -> Result<State, StoreError> {
    let mut state = State::default();
    for record in read_all::<BucketRecord>(&state_dir.join(RECORDS_DIR))? {
        state.buckets.insert(record.name.clone(), record);
    }
    for key in read_all::<AccessKey>(&state_dir.join(KEYS_DIR))? {
        state.insert_key(key);
    }
    Ok(state)
}

/// A stable access key id for `user_id` on `bucket`, so that a retried issue finds the first.
pub(super) fn derive_access_key_id(user_id: &str, bucket: &str) -> String {
    let mut hash = Md5::new();
    hash.update(user_id.as_bytes());
    hash.update([0]);
    hash.update(bucket.as_bytes());
    let digest = hash.finalize();
    // 20 characters like AWS key ids: a fixed prefix and 16 upper-case hex digits.
    format!("HPAK{}", hex::encode_upper(&digest[..8]))
}

/// The access key id of `user_id`'s key on `bucket` after `generation` rotations: stable, so
/// that the key a rotation issued is found by its id, and never one of the claim's earlier ids.
pub(super) fn rotated_access_key_id(user_id: &str, bucket: &str, generation: u32) -> String {
    if generation == 0 {
        return derive_access_key_id(user_id, bucket);
    }
    let mut hash = Md5::new();
    hash.update(user_id.as_bytes());
    hash.update([0]);
    hash.update(bucket.as_bytes());
    hash.update([0]);
    hash.update(generation.to_be_bytes());
    let digest = hash.finalize();
    format!("HPAK{}", hex::encode_upper(&digest[..8]))
}

/// 40 random alphanumeric characters from a cryptographically secure generator.
pub(super) fn random_secret() -> String {
    rand::rng().sample_iter(rand::distr::Alphanumeric).take(40).map(char::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_index_keeps_ids_sorted_and_drops_empty_entries() {
        let mut index = Index::default();
        index.insert("user", "K2");
        assert_eq!(index.get("user"), ["K2"]);
        index.insert("user", "K1");
        index.insert("user", "K2");
        assert_eq!(index.get("user"), ["K1", "K2"]);
        index.remove("user", "K2");
        assert_eq!(index.get("user"), ["K1"]);
        index.remove("user", "K1");
        assert!(index.get("user").is_empty() && index.0.is_empty());
        index.remove("nobody", "K1");
    }
}
