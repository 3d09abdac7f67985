use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A provisioned bucket, cluster-scoped, bound to one claim. It records everything needed to clean
/// up the bucket later, even when the StorageClass is gone. It never holds credentials.
#[allow(clippy::duplicated_attributes)] // repeated printcolumn(..) entries are intended
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "objectbucket.io",
    version = "v1alpha1",
    kind = "ObjectBucket",
    shortname = "ob",
    shortname = "obs",
    status = "ObjectBucketStatus",
    derive = "Default",
    derive = "PartialEq",
    doc = "A provisioned object bucket bound to an ObjectBucketClaim.",
    printcolumn(name = "StorageClass", type_ = "string", json_path = ".spec.storageClassName"),
    printcolumn(name = "ClaimNamespace", type_ = "string", json_path = ".spec.claimRef.namespace"),
    printcolumn(name = "ClaimName", type_ = "string", json_path = ".spec.claimRef.name"),
    printcolumn(name = "ReclaimPolicy", type_ = "string", json_path = ".spec.reclaimPolicy"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Objects", type_ = "integer", json_path = ".status.usage.objects"),
    printcolumn(name = "Bytes", type_ = "integer", json_path = ".status.usage.bytes"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct ObjectBucketSpec {
    /// The StorageClass the bucket was provisioned from.
    pub storage_class_name: String,

    /// What happens to the bucket when its claim is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_policy: Option<ReclaimPolicy>,

    /// The claim this bucket is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_ref: Option<ObjectReference>,

    /// How consumers reach the bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<BucketEndpoint>,

    /// Backend bookkeeping, handed back to the backend on revoke and delete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_state: Option<BTreeMap<String, String>>,
}

/// What happens to a bucket when its claim is deleted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ReclaimPolicy {
    /// Delete the bucket and its data (buckets the controller created only).
    #[default]
    Delete,
    /// Keep the bucket and its data; only the claim's access is revoked.
    Retain,
}

/// How consumers reach a bucket.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BucketEndpoint {
    /// Host name of the S3 endpoint.
    #[serde(default)]
    pub bucket_host: String,
    /// Port of the S3 endpoint.
    #[serde(default)]
    pub bucket_port: i32,
    /// Name of the bucket.
    #[serde(default)]
    pub bucket_name: String,
    /// Region of the bucket.
    #[serde(default)]
    pub region: String,
    /// Sub-region of the bucket.
    #[serde(default)]
    pub sub_region: String,
    /// Backend-specific settings in effect for the bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_config: Option<BTreeMap<String, String>>,
}

/// Where an ObjectBucket is in its life.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ObjectBucketPhase {
    /// Bound to a live claim.
    Bound,
    /// Its claim is gone and the bucket was retained.
    Released,
    /// Cleanup or binding failed; the conditions say why.
    Failed,
}

/// Observed state of an ObjectBucket.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectBucketStatus {
    /// Where the bucket is in its life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ObjectBucketPhase>,

    /// Standard conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// What the bucket holds, as its provisioner last reported it; absent for provisioners that
    /// do not report usage, and until the bucket first holds something.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<BucketUsage>,
}

/// What a bucket holds, and what the claim's own credentials stored in it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BucketUsage {
    /// Objects in the bucket.
    pub objects: u64,
    /// Bytes the bucket takes, including parts of multipart uploads in progress.
    pub bytes: u64,
    /// Objects stored with the claim's credentials, where the provisioner tells them apart (a
    /// bucket shared by several claims).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_objects: Option<u64>,
    /// Bytes stored with the claim's credentials, where the provisioner tells them apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_bytes: Option<u64>,
    /// The most objects the bucket may hold, where it has such a quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_objects: Option<u64>,
    /// The most bytes the bucket may hold, where it has such a quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

impl BucketUsage {
    /// Whether nothing is stored: the same as no usage recorded at all.
    pub fn is_empty(&self) -> bool {
        self.objects == 0
            && self.bytes == 0
            && self.claim_objects.unwrap_or(0) == 0
            && self.claim_bytes.unwrap_or(0) == 0
    }
}
