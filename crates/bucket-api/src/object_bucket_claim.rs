use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::AccessMode;

/// What a claim asks for: a new bucket (named or generated) or access to the StorageClass's
/// existing bucket, answered with an ObjectBucket, a Secret and a ConfigMap named after the claim.
#[allow(clippy::duplicated_attributes)] // repeated printcolumn(..) entries are intended
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "objectbucket.io",
    version = "v1alpha1",
    kind = "ObjectBucketClaim",
    namespaced,
    shortname = "obc",
    shortname = "obcs",
    status = "ObjectBucketClaimStatus",
    derive = "Default",
    derive = "PartialEq",
    doc = "A claim for an object bucket, answered with an ObjectBucket, a Secret and a ConfigMap.",
    printcolumn(name = "StorageClass", type_ = "string", json_path = ".spec.storageClassName"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Bucket", type_ = "string", json_path = ".spec.bucketName"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct ObjectBucketClaimSpec {
    /// The StorageClass whose provisioner answers this claim. Cannot be changed.
    #[schemars(length(min = 1))]
    pub storage_class_name: String,

    /// The bucket name. When empty, the controller generates one from `generateBucketName`
    /// and records it here before creating the bucket. Cannot be changed once set (the
    /// controller alone may replace a name it generated, before the claim is bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket_name: Option<String>,

    /// Prefix for a generated bucket name (a random suffix is appended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate_bucket_name: Option<String>,

    /// Settings for the bucket: `accessMode` (`ReadWrite`, `ReadOnly` or `WriteOnly`) and
    /// `shareFrom` (another claim of the namespace whose bucket this claim shares), read by
    /// the controller, and backend-specific ones such as `maxObjects` or `maxSize`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_config: Option<BTreeMap<String, String>>,

    /// Name of the ObjectBucket bound to this claim; set by the controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_bucket_name: Option<String>,
}

/// Where a claim is in its life.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ClaimPhase {
    /// Not bound yet: being provisioned, or waiting for something to change.
    Pending,
    /// The bucket, Secret and ConfigMap are ready.
    Bound,
    /// The bound ObjectBucket is gone or released.
    Released,
    /// A permanent error; the conditions say which, and a change to the claim retries.
    Failed,
}

impl ClaimPhase {
    /// Every phase, in the order of a claim's life.
    pub const ALL: [ClaimPhase; 4] = [Self::Pending, Self::Bound, Self::Released, Self::Failed];

    /// The phase as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Bound => "Bound",
            Self::Released => "Released",
            Self::Failed => "Failed",
        }
    }
}

/// Observed state of an ObjectBucketClaim.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectBucketClaimStatus {
    /// Where the claim is in its life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ClaimPhase>,

    /// Standard conditions; `Ready` tells whether the bucket can be used and, if not, why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// The claim generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// What the claim's credentials may do with its bucket, once bound: what the claim asked
    /// for (`additionalConfig` `accessMode`) within its StorageClass's limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_mode: Option<AccessMode>,

    /// The claim's credentials, once they have been rotated or its StorageClass rotates them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<CredentialsStatus>,
}

/// The keys of a claim, as their rotation left them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialsStatus {
    /// When the key in the claim's Secret was issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Time>,
    /// When the previous key stops working; absent when only the Secret's key works.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_expires_at: Option<Time>,
}
