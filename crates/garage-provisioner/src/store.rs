//! The Garage operations the backend is made of, each idempotent, each failure mapped.

use bucket_api::ReclaimPolicy;
use bucket_provisioner::{BackendError, Credentials};

use crate::admin::Admin;
use crate::api::{
    AddGlobalAlias, AddLocalAlias, BucketInfo, CleanupUploads, CreateBucket, ImportKey, KeyBuckets,
    KeyInfo, LocalAlias, PermissionChange, Permissions, Quotas, UpdateQuotas,
};
use crate::names::{SERVICE_KEY_NAME, new_secret, ownership_alias, read_ownership_alias};

/// Operations on one Garage cluster.
pub struct Store<'a> {
    /// Its admin API with the token.
    pub admin: Admin<'a>,
}

/// What creating a bucket found.
#[derive(Debug)]
pub enum Created {
    /// Made now, or by an earlier attempt of the same claim.
    Mine(BucketInfo),
    /// The name belongs to a bucket this claim did not create (or nothing records who did).
    Taken,
}

impl Store<'_> {
    /// The bucket whose global alias is `name`, if any.
    pub async fn bucket(&self, name: &str) -> Result<Option<BucketInfo>, BackendError> {
        match self.admin.get("GetBucketInfo", &[("globalAlias", name)]).await {
            Ok(info) => Ok(Some(info)),
            Err(e) if e.code() == Some("NoSuchBucket") => Ok(None),
            Err(e) => Err(self.admin.error(&format!("GetBucketInfo {name}"), e)),
        }
    }

    /// The bucket with id `id`, if any.
    pub async fn bucket_by_id(&self, id: &str) -> Result<Option<BucketInfo>, BackendError> {
        match self.admin.get("GetBucketInfo", &[("id", id)]).await {
            Ok(info) => Ok(Some(info)),
            Err(e) if e.code() == Some("NoSuchBucket") => Ok(None),
            Err(e) => Err(self.admin.error(&format!("GetBucketInfo id {id}"), e)),
        }
    }

    /// Creates bucket `name` for the claim `user_id` under `policy`, in two steps that each
    /// survive being cut off (Garage drops a request whose client went away, between any two of
    /// its writes): first a bucket holding only the ownership record, in the provisioner key
    /// `service_key`'s namespace, with every permission for that key ([`Store::recorded`]); then
    /// its name. A name held by any other bucket is taken, and the bucket made for it is deleted
    /// again.
    pub async fn create_bucket(
        &self,
        name: &str,
        user_id: &str,
        policy: ReclaimPolicy,
        service_key: &str,
    ) -> Result<Created, BackendError> {
        let id = self.recorded(service_key, &ownership_alias(user_id, policy)).await?;
        let body = AddGlobalAlias { bucket_id: &id, global_alias: name };
        let added = self.admin.post::<_, BucketInfo>("AddBucketAlias", &[], Some(&body)).await;
        let refused = match added {
            Ok(info) => return Ok(Created::Mine(info)),
            Err(e) => e,
        };
        match self.bucket(name).await? {
            Some(info) if info.id == id => Ok(Created::Mine(info)),
            Some(_) => {
                // Ours, empty and nameless: made for this attempt only.
                self.delete_bucket(&BucketInfo { id, ..Default::default() }).await?;
                Ok(Created::Taken)
            }
            None => Err(self.admin.error(&format!("AddBucketAlias {name}"), refused)),
        }
    }

    /// The id of the bucket `record` names in `service_key`'s namespace, with every permission
    /// for that key: made now when no attempt made it before, finished when one was cut off.
    ///
    /// `CreateBucket` writes the bucket, then the record on the key's side, then on the
    /// bucket's side, then the permissions; Garage drops it between any two when its client
    /// goes away. Each state left is finished here:
    /// - nothing, or a bucket with no alias (which no name or record leads to, and which stays:
    ///   nothing proves whose it is): a new bucket with the record;
    /// - the record on both sides: that bucket, given the permissions again;
    /// - the record on the key's side only: a new bucket takes the record if it points nowhere
    ///   (the remains of a bucket deleted since); if it points to a bucket, re-adding the record
    ///   succeeds on that bucket only, so it is tried on each bucket the key lists without one.
    pub async fn recorded(&self, service_key: &str, record: &str) -> Result<String, BackendError> {
        let local_alias =
            LocalAlias { access_key_id: service_key, alias: record, allow: Permissions::ALL };
        let body = CreateBucket { global_alias: None, local_alias: Some(local_alias) };
        let refused = match self.admin.post::<_, BucketInfo>("CreateBucket", &[], Some(&body)).await
        {
            Ok(info) => return Ok(info.id),
            Err(e) if e.is_bad_request() => e,
            Err(e) => return Err(self.admin.error(&format!("CreateBucket for {record}"), e)),
        };
        let (found, unrecorded) = self.key_buckets(service_key, record).await?;
        if let Some(id) = found {
            return self.with_all_permissions(id, service_key).await;
        }
        let body = CreateBucket { global_alias: None, local_alias: None };
        let fresh: BucketInfo = self
            .admin
            .post("CreateBucket", &[], Some(&body))
            .await
            .map_err(|e| self.admin.error(&format!("CreateBucket for {record}"), e))?;
        for id in std::iter::once(&fresh.id).chain(&unrecorded) {
            let body =
                AddLocalAlias { bucket_id: id, access_key_id: service_key, local_alias: record };
            match self.admin.post::<_, BucketInfo>("AddBucketAlias", &[], Some(&body)).await {
                Ok(_) => {
                    if *id != fresh.id {
                        self.delete_bucket(&fresh).await?;
                    }
                    return self.with_all_permissions(id.clone(), service_key).await;
                }
                Err(e) if e.is_bad_request() => {}
                Err(e) => {
                    return Err(self.admin.error(&format!("AddBucketAlias {record} on {id}"), e));
                }
            }
        }
        self.delete_bucket(&fresh).await?;
        Err(self.admin.error(&format!("CreateBucket for {record}"), refused))
    }

    async fn with_all_permissions(
        &self,
        id: String,
        service_key: &str,
    ) -> Result<String, BackendError> {
        let bucket = BucketInfo { id, ..Default::default() };
        self.allow(&bucket, service_key, Permissions::ALL).await?;
        Ok(bucket.id)
    }

    /// The id of the bucket recorded as `record` in `service_key`'s namespace, if any. While
    /// the key lists a bucket with no alias, the record may be on the key's side only, and is
    /// finished as [`Store::recorded`] does (which makes a bucket, empty, when none was).
    pub async fn recorded_bucket(
        &self,
        service_key: &str,
        record: &str,
    ) -> Result<Option<String>, BackendError> {
        match self.key_buckets(service_key, record).await? {
            (None, unrecorded) if !unrecorded.is_empty() => {
                self.recorded(service_key, record).await.map(Some)
            }
            (found, _) => Ok(found),
        }
    }

    /// Of the buckets `service_key` lists: the one recorded as `alias` on the bucket's side, if
    /// any, and those with no alias of the key's on their side.
    async fn key_buckets(
        &self,
        service_key: &str,
        alias: &str,
    ) -> Result<(Option<String>, Vec<String>), BackendError> {
        let query = [("id", service_key)];
        let key: KeyBuckets = self
            .admin
            .get("GetKeyInfo", &query)
            .await
            .map_err(|e| self.admin.error(&format!("GetKeyInfo {service_key}"), e))?;
        let (mut found, mut unrecorded) = (None, Vec::new());
        for bucket in key.buckets {
            if bucket.local_aliases.iter().any(|a| a == alias) {
                found = Some(bucket.id);
            } else if bucket.local_aliases.is_empty() {
                unrecorded.push(bucket.id);
            }
        }
        Ok((found, unrecorded))
    }

    /// Gives `key` `permissions` on `bucket` (adding to what it has).
    pub async fn allow(
        &self,
        bucket: &BucketInfo,
        key: &str,
        permissions: Permissions,
    ) -> Result<BucketInfo, BackendError> {
        self.change_permissions("AllowBucketKey", bucket, key, permissions).await
    }

    /// Takes `permissions` from `key` on `bucket`.
    pub async fn deny(
        &self,
        bucket: &BucketInfo,
        key: &str,
        permissions: Permissions,
    ) -> Result<BucketInfo, BackendError> {
        self.change_permissions("DenyBucketKey", bucket, key, permissions).await
    }

    async fn change_permissions(
        &self,
        operation: &str,
        bucket: &BucketInfo,
        key: &str,
        permissions: Permissions,
    ) -> Result<BucketInfo, BackendError> {
        let body = PermissionChange { bucket_id: &bucket.id, access_key_id: key, permissions };
        self.admin
            .post(operation, &[], Some(&body))
            .await
            .map_err(|e| self.admin.error(&format!("{operation} {key} on {}", name(bucket)), e))
    }

    /// Gives `key` exactly the claim permissions `wanted` on `bucket`: what it lacks is allowed,
    /// write taken away when not wanted.
    pub async fn set_permissions(
        &self,
        bucket: &BucketInfo,
        key: &str,
        wanted: Permissions,
    ) -> Result<BucketInfo, BackendError> {
        let bucket = self.allow(bucket, key, wanted).await?;
        if wanted.write {
            return Ok(bucket);
        }
        self.deny(&bucket, key, Permissions::WRITE).await
    }

    /// Sets `bucket`'s quotas, unless they already are.
    pub async fn set_quotas(
        &self,
        bucket: &BucketInfo,
        quotas: Quotas,
    ) -> Result<BucketInfo, BackendError> {
        if bucket.quotas == quotas {
            return Ok(bucket.clone());
        }
        let body = UpdateQuotas { quotas };
        self.admin
            .post("UpdateBucket", &[("id", &bucket.id)], Some(&body))
            .await
            .map_err(|e| self.admin.error(&format!("UpdateBucket {} (quotas)", name(bucket)), e))
    }

    /// Makes sure key `id` exists under `key_name` and answers its credentials: imports it with
    /// a fresh secret, or, when an earlier attempt did, reads the secret back. Garage never
    /// reuses the id of a deleted key; that is a permanent error.
    pub async fn ensure_key(&self, id: &str, key_name: &str) -> Result<Credentials, BackendError> {
        let secret = new_secret();
        let body = ImportKey { access_key_id: id, secret_access_key: &secret, name: key_name };
        match self.admin.post::<_, KeyInfo>("ImportKey", &[], Some(&body)).await {
            Ok(_) => {
                return Ok(Credentials { access_key_id: id.into(), secret_access_key: secret });
            }
            Err(e) if e.code() == Some("KeyAlreadyExists") => {}
            Err(e) => return Err(self.admin.error(&format!("ImportKey {id} ({key_name})"), e)),
        }
        self.read_key(id, key_name).await
    }

    /// The credentials of existing key `id` (`key_name` for messages), secret included.
    pub async fn read_key(&self, id: &str, key_name: &str) -> Result<Credentials, BackendError> {
        let query = [("id", id), ("showSecretKey", "true")];
        match self.admin.get::<KeyInfo>("GetKeyInfo", &query).await {
            Ok(KeyInfo { secret_access_key: Some(secret), .. }) => {
                Ok(Credentials { access_key_id: id.into(), secret_access_key: secret })
            }
            Ok(_) => Err(BackendError::permanent(
                "GarageUnexpectedAnswer",
                format!("GetKeyInfo {id}: Garage answered no secret although asked for it"),
            )),
            Err(e) if e.code() == Some("NoSuchAccessKey") => Err(BackendError::permanent(
                "GarageKeyDeleted",
                format!(
                    "access key {id} ({key_name}) was deleted in Garage, which never lets a \
                     key id be used again; {}",
                    if key_name == SERVICE_KEY_NAME {
                        "the provisioner cannot create buckets without its own key"
                    } else {
                        "delete and recreate the claim to get a new key"
                    }
                ),
            )),
            Err(e) => Err(self.admin.error(&format!("GetKeyInfo {id}"), e)),
        }
    }

    /// Whether key `id` exists.
    pub async fn key_exists(&self, id: &str) -> Result<bool, BackendError> {
        match self.admin.get::<KeyInfo>("GetKeyInfo", &[("id", id)]).await {
            Ok(_) => Ok(true),
            Err(e) if e.code() == Some("NoSuchAccessKey") => Ok(false),
            Err(e) => Err(self.admin.error(&format!("GetKeyInfo {id}"), e)),
        }
    }

    /// Deletes key `id`; a key already gone is done.
    pub async fn delete_key(&self, id: &str) -> Result<(), BackendError> {
        match self.admin.post::<(), serde_json::Value>("DeleteKey", &[("id", id)], None).await {
            Ok(_) => Ok(()),
            Err(e) if e.code() == Some("NoSuchAccessKey") => Ok(()),
            Err(e) => Err(self.admin.error(&format!("DeleteKey {id}"), e)),
        }
    }

    /// Aborts every unfinished multipart upload of `bucket`.
    pub async fn abort_uploads(&self, bucket: &BucketInfo) -> Result<(), BackendError> {
        let body = CleanupUploads { bucket_id: &bucket.id, older_than_secs: 0 };
        self.admin
            .post::<_, serde_json::Value>("CleanupIncompleteUploads", &[], Some(&body))
            .await
            .map(|_| ())
            .map_err(|e| self.admin.error(&format!("CleanupIncompleteUploads {}", name(bucket)), e))
    }

    /// Deletes the (empty) `bucket`: `Ok(false)` when Garage still finds objects in it.
    pub async fn delete_bucket(&self, bucket: &BucketInfo) -> Result<bool, BackendError> {
        let query = [("id", bucket.id.as_str())];
        match self.admin.post::<(), serde_json::Value>("DeleteBucket", &query, None).await {
            Ok(_) => Ok(true),
            Err(e) if e.code() == Some("NoSuchBucket") => Ok(true),
            Err(e) if e.code() == Some("BucketNotEmpty") => Ok(false),
            Err(e) => Err(self.admin.error(&format!("DeleteBucket {}", name(bucket)), e)),
        }
    }
}

/// The claim that created `bucket` and its reclaim policy, as the ownership record in the
/// provisioner key's namespace says; `None` when there is no record.
pub fn creator(bucket: &BucketInfo, service_key: &str) -> Option<(String, ReclaimPolicy)> {
    let key = bucket.keys.iter().find(|k| k.access_key_id == service_key)?;
    let mut records = key.bucket_local_aliases.iter().filter_map(|a| read_ownership_alias(a));
    let (user_id, policy) = records.next()?;
    // Two records can only come from a bug or a hand edit with the admin token: trust neither.
    if records.next().is_some() {
        return None;
    }
    Some((user_id.to_string(), policy))
}

/// The bucket's name for messages.
pub fn name(bucket: &BucketInfo) -> &str {
    bucket.global_aliases.first().map(String::as_str).unwrap_or(&bucket.id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::BucketKey;

    fn bucket(keys: Vec<BucketKey>) -> BucketInfo {
        BucketInfo {
            id: "id".into(),
            global_aliases: vec!["b".into()],
            keys,
            objects: 0,
            bytes: 0,
            unfinished_multipart_uploads: 0,
            unfinished_multipart_upload_bytes: 0,
            quotas: Quotas::default(),
        }
    }

    fn key(id: &str, aliases: &[&str]) -> BucketKey {
        BucketKey {
            access_key_id: id.into(),
            name: String::new(),
            permissions: Permissions::ALL,
            bucket_local_aliases: aliases.iter().map(|a| a.to_string()).collect(),
        }
    }

    #[test]
    fn only_the_provisioner_keys_single_record_counts() {
        let mine = bucket(vec![key("GKsvc", &["obc-1.delete"])]);
        assert_eq!(creator(&mine, "GKsvc"), Some(("obc-1".into(), ReclaimPolicy::Delete)));
        // The same alias in another key's namespace proves nothing.
        let other = bucket(vec![key("GKother", &["obc-1.delete"])]);
        assert_eq!(creator(&other, "GKsvc"), None);
        let two = bucket(vec![key("GKsvc", &["obc-1.delete", "obc-2.delete"])]);
        assert_eq!(creator(&two, "GKsvc"), None);
        let none = bucket(vec![key("GKsvc", &["photos"])]);
        assert_eq!(creator(&none, "GKsvc"), None);
    }
}
