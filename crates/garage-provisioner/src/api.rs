//! The parts of Garage's admin API v2 bodies this provisioner reads and writes (Garage 2.x,
//! `garage_api_admin::api`); fields it does not need are ignored when read.

use bucket_api::AccessMode;
use bucket_provisioner::BackendError;
use serde::{Deserialize, Serialize};

/// Read, write and owner permissions of one key on one bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Permissions {
    /// GetObject, ListObjects and the like.
    #[serde(default)]
    pub read: bool,
    /// PutObject, DeleteObject and the like.
    #[serde(default)]
    pub write: bool,
    /// The bucket's own settings (website, CORS, lifecycle) and DeleteBucket.
    #[serde(default)]
    pub owner: bool,
}

impl Permissions {
    /// What a claim's key gets in `mode`; `WriteOnly` cannot be honoured: Garage's write
    /// permission includes deleting objects, and a key without read cannot complete a multipart
    /// upload it cannot list, so such a claim is refused rather than given more than it asked.
    pub fn for_mode(mode: AccessMode) -> Result<Self, BackendError> {
        match mode {
            AccessMode::ReadWrite => Ok(Self::READ_WRITE),
            AccessMode::ReadOnly => Ok(Self::READ_ONLY),
            AccessMode::WriteOnly => Err(BackendError::permanent(
                "AccessModeNotSupported",
                "accessMode WriteOnly cannot be honoured by Garage: its write permission also \
                 deletes objects; ask for ReadWrite or ReadOnly",
            )),
        }
    }

    /// Read and write: what a claim's key gets.
    pub const READ_WRITE: Self = Self { read: true, write: true, owner: false };
    /// Read only: what a `ReadOnly` claim's key gets.
    pub const READ_ONLY: Self = Self { read: true, write: false, owner: false };
    /// Write alone, the permission a key loses when its claim narrows to `ReadOnly`.
    pub const WRITE: Self = Self { read: false, write: true, owner: false };
    /// Everything: what the provisioner's own key gets on buckets it creates.
    pub const ALL: Self = Self { read: true, write: true, owner: true };
}

/// A bucket's quotas; `None` is no limit. Both fields are always sent, so that a `None` clears.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Quotas {
    /// The most bytes the bucket holds.
    #[serde(default)]
    pub max_size: Option<u64>,
    /// The most objects the bucket holds.
    #[serde(default)]
    pub max_objects: Option<u64>,
}

/// `GetBucketInfo`, and what bucket operations answer.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BucketInfo {
    /// The bucket's id (what `?id=` takes).
    pub id: String,
    /// Its global aliases: the names S3 clients use.
    #[serde(default)]
    pub global_aliases: Vec<String>,
    /// Keys with permissions or local aliases on it.
    #[serde(default)]
    pub keys: Vec<BucketKey>,
    /// Objects in it.
    #[serde(default)]
    pub objects: i64,
    /// Bytes its objects take.
    #[serde(default)]
    pub bytes: i64,
    /// Multipart uploads not finished.
    #[serde(default)]
    pub unfinished_multipart_uploads: i64,
    /// Bytes those uploads take so far.
    #[serde(default)]
    pub unfinished_multipart_upload_bytes: i64,
    /// Its quotas.
    #[serde(default)]
    pub quotas: Quotas,
}

/// One key as `GetBucketInfo` lists it.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BucketKey {
    /// The access key id.
    pub access_key_id: String,
    /// The key's name.
    #[serde(default)]
    pub name: String,
    /// Its permissions on the bucket.
    #[serde(default)]
    pub permissions: Permissions,
    /// The bucket's names in this key's own namespace.
    #[serde(default)]
    pub bucket_local_aliases: Vec<String>,
}

/// `CreateBucket`'s body: a global alias (the bucket's name) and a local alias in one key's
/// namespace, with that key's permissions, all in one request.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateBucket<'a> {
    /// The bucket's name, if it is given in the same request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub global_alias: Option<&'a str>,
    /// The alias in the provisioner key's namespace, if it is given in the same request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_alias: Option<LocalAlias<'a>>,
}

/// A local alias for `CreateBucket`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalAlias<'a> {
    /// Whose namespace.
    pub access_key_id: &'a str,
    /// The alias.
    pub alias: &'a str,
    /// The permissions that key gets.
    pub allow: Permissions,
}

/// `AddBucketAlias` with a global alias.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AddGlobalAlias<'a> {
    /// The bucket.
    pub bucket_id: &'a str,
    /// Its name.
    pub global_alias: &'a str,
}

/// `AddBucketAlias` with an alias in a key's namespace.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AddLocalAlias<'a> {
    /// The bucket.
    pub bucket_id: &'a str,
    /// Whose namespace.
    pub access_key_id: &'a str,
    /// The alias.
    pub local_alias: &'a str,
}

/// What `GetKeyInfo` says of the buckets a key has permissions or local aliases on.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyBuckets {
    /// Those buckets.
    #[serde(default)]
    pub buckets: Vec<KeyBucket>,
}

/// One bucket of [`KeyBuckets`].
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyBucket {
    /// The bucket's id.
    pub id: String,
    /// Its aliases in the key's own namespace.
    #[serde(default)]
    pub local_aliases: Vec<String>,
}

/// `AllowBucketKey` / `DenyBucketKey`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionChange<'a> {
    /// The bucket.
    pub bucket_id: &'a str,
    /// The key.
    pub access_key_id: &'a str,
    /// The permissions given (or taken).
    pub permissions: Permissions,
}

/// `UpdateBucket`'s body, quotas only.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateQuotas {
    /// The new quotas.
    pub quotas: Quotas,
}

/// `ImportKey`: a key with an id and secret chosen by the caller.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportKey<'a> {
    /// The access key id.
    pub access_key_id: &'a str,
    /// The secret.
    pub secret_access_key: &'a str,
    /// A name, for people.
    pub name: &'a str,
}

/// `GetKeyInfo`, the fields used.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyInfo {
    /// The access key id.
    pub access_key_id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// The secret, when asked for with `showSecretKey=true`.
    #[serde(default)]
    pub secret_access_key: Option<String>,
}

/// `CleanupIncompleteUploads`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CleanupUploads<'a> {
    /// The bucket.
    pub bucket_id: &'a str,
    /// Uploads older than this are aborted (0: all).
    pub older_than_secs: u64,
}

/// One entry of `ListBuckets`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BucketListItem {
    /// The bucket's id.
    pub id: String,
    /// Its global aliases.
    #[serde(default)]
    pub global_aliases: Vec<String>,
}

/// One entry of `ListKeys`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyListItem {
    /// The access key id.
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
}

/// `GetClusterHealth`, the field used.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterHealth {
    /// `healthy`, `degraded` (nodes down, still serving) or `unavailable`.
    pub status: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_have_garages_field_names() {
        let create = CreateBucket {
            global_alias: None,
            local_alias: Some(LocalAlias {
                access_key_id: "GK1",
                alias: "a",
                allow: Permissions::ALL,
            }),
        };
        assert_eq!(
            serde_json::to_value(&create).unwrap(),
            serde_json::json!({"localAlias": {"accessKeyId": "GK1",
                "alias": "a", "allow": {"read": true, "write": true, "owner": true}}})
        );
        let name = AddGlobalAlias { bucket_id: "ab12", global_alias: "b" };
        assert_eq!(
            serde_json::to_value(&name).unwrap(),
            serde_json::json!({"bucketId": "ab12", "globalAlias": "b"})
        );
        let clear = UpdateQuotas { quotas: Quotas::default() };
        assert_eq!(
            serde_json::to_value(&clear).unwrap(),
            serde_json::json!({"quotas": {"maxSize": null, "maxObjects": null}})
        );
        let info: BucketInfo = serde_json::from_value(serde_json::json!({
            "id": "ab12", "created": "2025-01-01T00:00:00Z", "globalAliases": ["b"],
            "websiteAccess": false, "keys": [{"accessKeyId": "GK1", "name": "n",
            "permissions": {"read": true, "write": false, "owner": true},
            "bucketLocalAliases": ["a"]}], "objects": 3, "bytes": 30,
            "unfinishedUploads": 0, "unfinishedMultipartUploads": 1,
            "unfinishedMultipartUploadParts": 2, "unfinishedMultipartUploadBytes": 5,
            "quotas": {"maxSize": 100, "maxObjects": null}
        }))
        .unwrap();
        assert_eq!(info.keys[0].bucket_local_aliases, ["a"]);
        assert_eq!(info.quotas, Quotas { max_size: Some(100), max_objects: None });
    }
}
