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
#[schemars(transform = lenient::require_claim_name)]
pub struct BucketShareGrantSpec {
    /// The claim of this namespace whose bucket is shared. It must have created its bucket.
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$"))]
    #[schemars(transform = lenient::no_default)]
    #[serde(default, deserialize_with = "lenient::text")]
    pub claim_name: String,

    /// Who may share it, each with the widest access mode it may get. At most 64 entries; no
    /// wildcards: every namespace is named.
    #[schemars(length(max = 64))]
    #[serde(default, deserialize_with = "lenient::grantees")]
    pub to: Vec<Grantee>,
}

/// A namespace, or one claim of it, allowed to share the bucket.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = lenient::require_namespace)]
pub struct Grantee {
    /// The kind of what shares: `ObjectBucketClaim` (the default).
    #[schemars(regex(pattern = r"^ObjectBucketClaim$"))]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::optional"
    )]
    pub kind: Option<String>,

    /// The namespace whose claims may share the bucket.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    #[schemars(transform = lenient::no_default)]
    #[serde(default, deserialize_with = "lenient::text")]
    pub namespace: String,

    /// One claim of that namespace; absent: any claim of it.
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$"))]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::optional"
    )]
    pub claim_name: Option<String>,

    /// The widest access mode it may get: `ReadOnly` (the default), `WriteOnly` or `ReadWrite`.
    /// Never wider than the owning claim's own mode.
    #[schemars(regex(pattern = r"^(ReadWrite|ReadOnly|WriteOnly)$"))]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::optional"
    )]
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

/// Decoding a grant whatever its fields hold: a value of the wrong type becomes [`NOT_TEXT`]
/// (which no check accepts), so that one malformed grant is refused on its own status instead of
/// failing the list of every grant.
mod lenient {
    use serde::{Deserialize, Deserializer};
    use serde_json::Value;

    use super::Grantee;

    /// The schema keeps its fields required, with no default: leniency is the decoder's alone.
    pub fn no_default(schema: &mut schemars::Schema) {
        schema.remove("default");
    }

    fn require(schema: &mut schemars::Schema, field: &str) {
        let required =
            schema.ensure_object().entry("required").or_insert_with(|| Value::Array(vec![]));
        if let Value::Array(names) = required {
            names.push(Value::String(field.to_owned()));
        }
    }

    /// `claimName` required by the schema, though the decoder defaults it.
    pub fn require_claim_name(schema: &mut schemars::Schema) {
        require(schema, "claimName");
    }

    /// `namespace` required by the schema, though the decoder defaults it.
    pub fn require_namespace(schema: &mut schemars::Schema) {
        require(schema, "namespace");
    }

    /// What a field that is not a string reads as: never a valid name, kind or mode.
    pub const NOT_TEXT: &str = "<not a string>";

    fn as_text(value: Value) -> String {
        match value {
            Value::String(text) => text,
            _ => NOT_TEXT.to_owned(),
        }
    }

    pub fn text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
        Ok(as_text(Value::deserialize(deserializer)?))
    }

    pub fn optional<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<String>, D::Error> {
        Ok(match Value::deserialize(deserializer)? {
            Value::Null => None,
            other => Some(as_text(other)),
        })
    }

    pub fn grantees<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Grantee>, D::Error> {
        let malformed = || Grantee { namespace: NOT_TEXT.to_owned(), ..Default::default() };
        Ok(match Value::deserialize(deserializer)? {
            Value::Null => Vec::new(),
            Value::Array(items) => items
                .into_iter()
                .map(|item| serde_json::from_value(item).unwrap_or_else(|_| malformed()))
                .collect(),
            _ => vec![malformed()],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_of_any_shape_decodes_and_what_is_not_text_is_never_a_name() {
        let decoded: BucketShareGrantSpec = serde_json::from_value(serde_json::json!({
            "claimName": 7,
            "to": [{ "namespace": ["a"], "accessMode": {} }, "team-b", { "namespace": "ok" }],
        }))
        .unwrap();
        assert_eq!(decoded.claim_name, lenient::NOT_TEXT);
        assert_eq!(decoded.to.len(), 3);
        assert_eq!(decoded.to[0].namespace, lenient::NOT_TEXT);
        assert_eq!(decoded.to[0].access_mode.as_deref(), Some(lenient::NOT_TEXT));
        assert_eq!(decoded.to[1].namespace, lenient::NOT_TEXT);
        assert_eq!(decoded.to[2].namespace, "ok");
        let not_a_list: BucketShareGrantSpec =
            serde_json::from_value(serde_json::json!({ "to": "everyone" })).unwrap();
        assert_eq!((not_a_list.claim_name.as_str(), not_a_list.to.len()), ("", 1));
    }
}
