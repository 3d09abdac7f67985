//! `BucketShareGrant` (`sharing.objectbucket.io/v1alpha1`): the owner's consent that claims of
//! other namespaces share the bucket of one of its claims.
//!
//! Like Gateway API's `ReferenceGrant`, the grant lives in the namespace of what it shares, so
//! that only who may write there can consent. It is a group of its own, not `objectbucket.io`:
//! clusters often give every resource of `objectbucket.io` to the namespace `edit` role, and
//! consenting to share data across namespaces is an admin's decision.
//!
//! The schema checks what it can (patterns, a cap on the list, the modes), but the controller
//! reads every field again as hostile input: a grant written before a check existed, or by an
//! apiserver that skipped one, grants nothing unless it passes the controller's own parser.
//! The fields are plain strings for that reason, so that a grant a newer or older schema allows
//! still decodes and gets a clear refusal on its status.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of [`BucketShareGrant`].
pub const SHARING_GROUP: &str = "sharing.objectbucket.io";
/// The most entries a grant's `to` may list.
pub const MAX_GRANTEES: usize = 64;
/// The kind a grantee may be: the only kind that can share a bucket today.
pub const GRANTEE_KIND: &str = "ObjectBucketClaim";

/// One claim of this namespace whose bucket claims of the namespaces listed in `to` may share.
#[allow(clippy::duplicated_attributes)] // repeated printcolumn(..) entries are intended
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "sharing.objectbucket.io",
    version = "v1alpha1",
    kind = "BucketShareGrant",
    namespaced,
    shortname = "bsg",
    status = "BucketShareGrantStatus",
    derive = "Default",
    derive = "PartialEq",
    doc = "The owner's consent that claims of other namespaces share the bucket of one of its \
           claims.",
    printcolumn(name = "Claim", type_ = "string", json_path = ".spec.claimName"),
    printcolumn(
        name = "Accepted",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Accepted\")].status"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct BucketShareGrantSpec {
    /// The claim of this namespace whose bucket is shared. It must have created its bucket.
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$"))]
    pub claim_name: String,

    /// Who may share it, each with the widest access mode it may get. At most 64 entries; no
    /// wildcards: every namespace is named.
    #[schemars(length(max = 64))]
    #[serde(default)]
    pub to: Vec<Grantee>,
}

/// A namespace, or one claim of it, allowed to share the bucket.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Grantee {
    /// The kind of what shares: `ObjectBucketClaim` (the default).
    #[schemars(regex(pattern = r"^ObjectBucketClaim$"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,

    /// The namespace whose claims may share the bucket.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub namespace: String,

    /// One claim of that namespace; absent: any claim of it.
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_name: Option<String>,

    /// The widest access mode it may get: `ReadOnly` (the default), `WriteOnly` or `ReadWrite`.
    /// Never wider than the owning claim's own mode.
    #[schemars(regex(pattern = r"^(ReadWrite|ReadOnly|WriteOnly)$"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_mode: Option<String>,
}

/// What the controller made of a grant.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BucketShareGrantStatus {
    /// `Accepted`: `True` when the grant is in force, `False` with the reason it grants nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
