//! The COSI front's buckets and keys on Garage (see "COSI" in the library's backend guide).
//!
//! | call | on Garage (admin API v2) |
//! |---|---|
//! | `create_bucket` | `CreateBucket` with the ownership record of the COSI owner (as a claim's bucket has its claim's, see [`crate::names`]), `AddBucketAlias` with the bucket's name, `UpdateBucket` for its quotas; no key |
//! | `existing_bucket` | `GetBucketInfo`: a bucket a COSI owner created, or one with no record (an operator's), is found; a claim's is `not_found` |
//! | `issue_key` | `ImportKey` with an id derived from the owner id and a name recording the buckets and modes asked, then `AllowBucketKey` (`DenyBucketKey` of write for `ReadOnly`) on each bucket |
//! | `revoke_key` | `DeleteKey` |
//! | `delete_bucket` | when the record names this owner: the bucket emptied through S3 and `DeleteBucket` (its keys' permissions go with it); anything else is left alone (`AccessOnly`) |
//!
//! The cluster is the driver's, set once with [`GarageProvisioner::with_standalone`] (the
//! parameters a StorageClass would take), since deleting a bucket or revoking a key is handed
//! no parameters to find it by. Requests carry no backend parameters.
//!
//! A Garage key may be allowed on any number of buckets, so one access reaches several. The
//! key's name, which only the admin API writes, records what was asked: a retry finds the same
//! name and answers the same key (Garage shows its secret again); another request for the same
//! access is [`BackendError::access_conflict`]. Quotas are the bucket's (`maxObjects`,
//! `maxSize`); Garage keeps none per key, so a key asking for quotas is refused, as is
//! `WriteOnly` (Garage's write permission deletes too). Garage never reuses a deleted key's id:
//! an access revoked cannot be granted again under the same name.

use std::collections::BTreeMap;

use bucket_api::ReclaimPolicy;
use bucket_provisioner::bucket::standalone::{
    BucketLocation, IssuedKey, KeyBucket, KeyRequest, NewBucket, Quotas, cosi_may_use, cosi_owner,
    not_configured,
};
use bucket_provisioner::{BackendError, Credentials, Removed};
use sha2::{Digest, Sha256};

use super::{GarageProvisioner, store};
use crate::api::{self, BucketInfo, KeyInfo, Permissions};
use crate::names::{claim_key_id, ownership_alias};
use crate::params::Settings;
use crate::store::{Created, Store, creator};

impl GarageProvisioner {
    /// Serves the COSI front's buckets and keys on the Garage cluster `parameters` name (as a
    /// StorageClass's would: `adminEndpoint`, `endpoint`, `secretName`, ...).
    pub fn with_standalone(
        mut self,
        parameters: &BTreeMap<String, String>,
    ) -> Result<Self, BackendError> {
        self.standalone = Some(Settings::from_parameters(parameters)?);
        Ok(self)
    }

    /// The driver's cluster and its admin token.
    async fn standalone_target(&self) -> Result<(Settings, String), BackendError> {
        let settings = self.standalone.clone().ok_or_else(|| {
            not_configured("this Garage provisioner was started without a cluster")
        })?;
        let token = self.token(&settings).await?;
        Ok((settings, token))
    }

    pub(super) async fn standalone_create(
        &self,
        bucket: &NewBucket,
    ) -> Result<BucketLocation, BackendError> {
        cosi_owner(&bucket.owner_id)?;
        no_parameters(&bucket.parameters)?;
        let (settings, token) = self.standalone_target().await?;
        let store = store(&self.http, &settings, &token);
        let service = self.service_key(&store, &settings).await?;
        let name = &bucket.bucket_name;
        let created = store
            .create_bucket(name, &bucket.owner_id, ReclaimPolicy::Delete, &service.access_key_id)
            .await?;
        let Created::Mine(info) = created else { return Err(BackendError::name_taken(name)) };
        let quotas = api::Quotas {
            max_size: bucket.quotas.max_bytes,
            max_objects: bucket.quotas.max_objects,
        };
        let info = store.set_quotas(&info, quotas).await?;
        self.usage.record(name, &settings, &info);
        Ok(BucketLocation { bucket_name: name.clone(), endpoint: settings.consumer_endpoint() })
    }

    pub(super) async fn standalone_existing(
        &self,
        name: &str,
        parameters: &BTreeMap<String, String>,
    ) -> Result<BucketLocation, BackendError> {
        no_parameters(parameters)?;
        let (settings, token) = self.standalone_target().await?;
        let store = store(&self.http, &settings, &token);
        self.reachable(&store, &settings, name).await?;
        Ok(BucketLocation { bucket_name: name.to_owned(), endpoint: settings.consumer_endpoint() })
    }

    /// The bucket `name` when the COSI front may reach it, else `not_found`.
    async fn reachable(
        &self,
        store: &Store<'_>,
        settings: &Settings,
        name: &str,
    ) -> Result<BucketInfo, BackendError> {
        let service = self.service_key(store, settings).await?;
        match store.bucket(name).await? {
            Some(info)
                if cosi_may_use(
                    creator(&info, &service.access_key_id).as_ref().map(|(c, _)| c.as_str()),
                ) =>
            {
                Ok(info)
            }
            _ => Err(BackendError::not_found(format!("bucket {name:?}"))),
        }
    }

    pub(super) async fn standalone_delete(
        &self,
        name: &str,
        owner_id: &str,
    ) -> Result<Removed, BackendError> {
        cosi_owner(owner_id)?;
        let (settings, token) = self.standalone_target().await?;
        let store = store(&self.http, &settings, &token);
        let service = self.service_key(&store, &settings).await?;
        let Some(info) = store.bucket(name).await? else {
            self.usage.forget(name);
            // Made but never named (stopped between the two steps of creating it): found by
            // its record, nameless, and so nobody's but this owner's.
            let record = ownership_alias(owner_id, ReclaimPolicy::Delete);
            if let Some(id) = store.recorded_bucket(&service.access_key_id, &record).await?
                && let Some(left) = store.bucket_by_id(&id).await?
                && left.global_aliases.is_empty()
            {
                store.delete_bucket(&left).await?;
            }
            return Ok(Removed::Bucket);
        };
        match creator(&info, &service.access_key_id) {
            Some((creator, ReclaimPolicy::Delete)) if creator == owner_id => {}
            _ => {
                tracing::info!(bucket = name, owner_id, "not this owner's bucket; left alone");
                return Ok(Removed::AccessOnly);
            }
        }
        self.empty_and_delete(&store, &settings, &info, &service).await?;
        Ok(Removed::Bucket)
    }

    pub(super) async fn standalone_issue(
        &self,
        request: &KeyRequest,
    ) -> Result<IssuedKey, BackendError> {
        cosi_owner(&request.owner_id)?;
        if request.web_identity.is_some() {
            return Err(BackendError::permanent(
                bucket_provisioner::WEB_IDENTITY_NOT_SUPPORTED,
                "Garage has no STS: its accesses hold keys (authenticationType Key)",
            ));
        }
        no_parameters(&request.parameters)?;
        if request.quotas != Quotas::default() {
            return Err(BackendError::invalid_parameter(
                "quotas on an access cannot be honoured: Garage keeps quotas per bucket, not per \
                 key; set them on the bucket (its class) instead",
            ));
        }
        let wanted = wanted(&request.buckets)?;
        let (settings, token) = self.standalone_target().await?;
        let store = store(&self.http, &settings, &token);
        let mut buckets = Vec::new();
        for (name, permissions) in &wanted {
            buckets.push((self.reachable(&store, &settings, name).await?, *permissions));
        }
        let id = claim_key_id(&request.owner_id);
        let key_name = key_name(&request.owner_id, &wanted);
        let credentials = match existing_key(&store, &id).await? {
            Some((name, _)) if name != key_name => {
                return Err(BackendError::access_conflict(&request.owner_id));
            }
            Some((_, credentials)) => credentials,
            None => {
                store.ensure_key(&id, &key_name).await.map_err(|e| revoked(e, &id))?;
                // Another request of the same access may have made it the moment before: answer
                // the key as Garage holds it, never what this request sent.
                match existing_key(&store, &id).await? {
                    Some((name, credentials)) if name == key_name => credentials,
                    _ => return Err(BackendError::access_conflict(&request.owner_id)),
                }
            }
        };
        // Again on a retry: an attempt cut off may have given only some.
        for (info, permissions) in &buckets {
            store.set_permissions(info, &id, *permissions).await?;
        }
        Ok(IssuedKey { endpoint: settings.consumer_endpoint(), credentials, web_identity: None })
    }

    pub(super) async fn standalone_revoke(&self, owner_id: &str) -> Result<(), BackendError> {
        cosi_owner(owner_id)?;
        let (settings, token) = self.standalone_target().await?;
        store(&self.http, &settings, &token).delete_key(&claim_key_id(owner_id)).await
    }
}

/// The permissions each named bucket gets, by name; a bucket named twice, none, or a mode
/// Garage cannot honour is refused.
fn wanted(buckets: &[KeyBucket]) -> Result<BTreeMap<String, Permissions>, BackendError> {
    let mut wanted = BTreeMap::new();
    for bucket in buckets {
        let permissions = Permissions::for_mode(bucket.access_mode)?;
        if wanted.insert(bucket.bucket_name.clone(), permissions).is_some() {
            return Err(BackendError::invalid_parameter(format!(
                "bucket {:?} is named twice in one access",
                bucket.bucket_name
            )));
        }
    }
    if wanted.is_empty() {
        return Err(BackendError::invalid_parameter("an access names one bucket or more"));
    }
    Ok(wanted)
}

/// The key's name: its owner and a digest of the buckets and permissions asked, so a request
/// asking anything else is told apart.
pub fn key_name(owner_id: &str, wanted: &BTreeMap<String, Permissions>) -> String {
    let mut hash = Sha256::new();
    for (bucket, permissions) in wanted {
        hash.update((bucket.len() as u64).to_be_bytes());
        hash.update(bucket.as_bytes());
        hash.update([u8::from(permissions.read), u8::from(permissions.write)]);
    }
    format!("{owner_id} {}", &hex::encode(hash.finalize())[..16])
}

/// The name and credentials of key `id`, if it exists.
async fn existing_key(
    store: &Store<'_>,
    id: &str,
) -> Result<Option<(String, Credentials)>, BackendError> {
    let query = [("id", id), ("showSecretKey", "true")];
    match store.admin.get::<KeyInfo>("GetKeyInfo", &query).await {
        Ok(KeyInfo { name, secret_access_key: Some(secret), .. }) => Ok(Some((
            name,
            Credentials { access_key_id: id.to_owned(), secret_access_key: secret },
        ))),
        Ok(_) => Err(BackendError::permanent(
            "GarageUnexpectedAnswer",
            format!("GetKeyInfo {id}: Garage answered no secret although asked for it"),
        )),
        Err(e) if e.code() == Some("NoSuchAccessKey") => Ok(None),
        Err(e) => Err(store.admin.error(&format!("GetKeyInfo {id}"), e)),
    }
}

/// Garage's refusal to make a key of a deleted key's id, said for an access.
fn revoked(error: BackendError, id: &str) -> BackendError {
    match &error {
        BackendError::Permanent { reason, .. } if reason == "GarageKeyDeleted" => {
            BackendError::permanent(
                "GarageKeyDeleted",
                format!(
                    "the key {id} of this access was revoked, and Garage never lets a key id be \
                     used again; make an access of another name"
                ),
            )
        }
        _ => error,
    }
}

fn no_parameters(parameters: &BTreeMap<String, String>) -> Result<(), BackendError> {
    match parameters.keys().next() {
        None => Ok(()),
        Some(key) => Err(BackendError::invalid_parameter(format!(
            "unknown parameter {key:?}: the Garage provisioner's COSI buckets and keys take no \
             parameters; the cluster they are on is the driver's"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use bucket_provisioner::AccessMode;

    use super::*;

    fn bucket(name: &str, mode: AccessMode) -> KeyBucket {
        KeyBucket { bucket_name: name.into(), access_mode: mode }
    }

    #[test]
    fn key_names_follow_what_was_asked_in_any_order() {
        let ab = wanted(&[bucket("a", AccessMode::ReadWrite), bucket("b", AccessMode::ReadOnly)]);
        let ba = wanted(&[bucket("b", AccessMode::ReadOnly), bucket("a", AccessMode::ReadWrite)]);
        let name = key_name("cosi-a-1", &ab.unwrap());
        assert_eq!(name, key_name("cosi-a-1", &ba.unwrap()));
        let other = wanted(&[bucket("a", AccessMode::ReadOnly), bucket("b", AccessMode::ReadOnly)]);
        assert_ne!(name, key_name("cosi-a-1", &other.unwrap()));
        assert!(name.starts_with("cosi-a-1 "));
    }

    #[test]
    fn refusals_say_why() {
        let twice =
            wanted(&[bucket("a", AccessMode::ReadWrite), bucket("a", AccessMode::ReadOnly)]);
        assert!(twice.unwrap_err().to_string().contains("named twice"));
        assert!(wanted(&[bucket("a", AccessMode::WriteOnly)]).is_err());
        assert!(wanted(&[]).is_err());
        assert!(cosi_owner("obc-1").is_err() && cosi_owner("cosi-b-1").is_ok());
        let params = BTreeMap::from([("maxSize".to_string(), "1".to_string())]);
        assert!(no_parameters(&params).unwrap_err().to_string().contains("\"maxSize\""));
        let gone = BackendError::permanent("GarageKeyDeleted", "x");
        assert!(revoked(gone, "GK1").to_string().contains("another name"));
    }
}
