//! The ids the driver hands the sidecar and gets back: a created bucket's id carries the owner
//! id the backend recorded for it, so deleting needs no state of the driver's own; an operator's
//! static bucket's id is its name; an account's id is its owner id.
//!
//! A created bucket's id is `<bucket>..<owner>`: no valid S3 bucket name holds `..`, so it can
//! never be read as a static bucket's name or the reverse.

use bucket_provisioner::bucket::naming::validate_bucket_name;
use bucket_provisioner::bucket::standalone::COSI_OWNER_PREFIX;

use crate::status::CallError;

/// Between the bucket and its owner in a created bucket's id.
const SEPARATOR: &str = "..";

/// What a bucket id says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BucketId {
    /// A bucket this driver created, and the owner id recorded with it.
    Created {
        /// The bucket's name.
        bucket: String,
        /// Its owner id (`cosi-b-…`).
        owner: String,
    },
    /// A bucket the operator named (a static bucket).
    Existing {
        /// The bucket's name.
        bucket: String,
    },
}

impl BucketId {
    /// The bucket's name.
    pub fn bucket(&self) -> &str {
        match self {
            Self::Created { bucket, .. } | Self::Existing { bucket } => bucket,
        }
    }

    /// Whether the operator named this bucket (rather than this driver creating it).
    pub fn is_static(&self) -> bool {
        matches!(self, Self::Existing { .. })
    }
}

/// The id of the bucket `bucket` created for `owner`.
pub fn created_bucket_id(bucket: &str, owner: &str) -> String {
    format!("{bucket}{SEPARATOR}{owner}")
}

/// Reads a bucket id; `field` names it in the error.
pub fn parse_bucket_id(field: &str, id: &str) -> Result<BucketId, CallError> {
    let bad = |why: String| CallError::InvalidArgument(format!("{field} {id:?}: {why}"));
    match id.split_once(SEPARATOR) {
        Some((bucket, owner)) => {
            validate_bucket_name(bucket).map_err(bad)?;
            if !is_owner_id(owner, "b-") {
                return Err(bad("is not a bucket id this driver issued".to_owned()));
            }
            Ok(BucketId::Created { bucket: bucket.to_owned(), owner: owner.to_owned() })
        }
        None => {
            validate_bucket_name(id).map_err(bad)?;
            Ok(BucketId::Existing { bucket: id.to_owned() })
        }
    }
}

/// Checks an account id the sidecar hands back: only ids this driver issued are accepted, so
/// no request can reach the keys of an objectbucket.io claim (`obc-…`).
pub fn parse_account_id(field: &str, id: &str) -> Result<(), CallError> {
    if is_owner_id(id, "a-") {
        return Ok(());
    }
    Err(CallError::InvalidArgument(format!(
        "{field} {id:?} is not an account id this driver issued"
    )))
}

/// `cosi-<kind>` and 24 lowercase hex digits, as `bucket_provisioner`'s owner ids are made.
fn is_owner_id(id: &str, kind: &str) -> bool {
    id.strip_prefix(COSI_OWNER_PREFIX).and_then(|rest| rest.strip_prefix(kind)).is_some_and(|hex| {
        hex.len() == 24 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use bucket_provisioner::bucket::standalone::{cosi_account_id, cosi_bucket_owner};

    use super::*;

    #[test]
    fn ids_read_back_as_they_were_made() {
        let owner = cosi_bucket_owner("bucket-1", &BTreeMap::new());
        let id = created_bucket_id("bucket-1", &owner);
        assert_eq!(
            parse_bucket_id("bucket_id", &id).unwrap(),
            BucketId::Created { bucket: "bucket-1".into(), owner }
        );
        assert!(parse_bucket_id("bucket_id", "static-one").unwrap().is_static());
        assert!(parse_account_id("account_id", &cosi_account_id("ba-1")).is_ok());
    }

    #[test]
    fn foreign_or_malformed_ids_are_refused() {
        for id in [
            "",
            "Upper",
            "bucket-1..obc-1234",
            "bucket-1..cosi-a-000000000000000000000000",
            "a..b..c",
        ] {
            let err = parse_bucket_id("bucket_id", id).unwrap_err();
            assert!(err.to_string().contains("bucket_id"), "{id}: {err}");
        }
        for id in ["obc-1234", "cosi-b-000000000000000000000000", "cosi-a-xyz", ""] {
            assert!(parse_account_id("account_id", id).is_err(), "{id}");
        }
    }
}
