//! What an ObjectBucket records of its claim's credential rotation (see
//! [`crate::bucket::rotation`]): written by the controller where tenants cannot write, read back
//! after any crash.

use bucket_api::contract::annotations;
use bucket_api::{ObjectBucket, ObjectBucketClaim};
use jiff::Timestamp;
use kube::ResourceExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The longest request token recorded as it is; a longer one is recorded as its digest, so that
/// the record stays small whatever the tenant writes (the ObjectBucket's annotations, like the
/// claim's, hold at most 256 KiB, and JSON writes a control character in six bytes).
const LONGEST_RECORDED_TOKEN: usize = 128;

/// Where a rotation stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Step {
    /// Nothing under way; only the Secret's key works.
    #[default]
    Idle,
    /// A new key is to be issued beside the recorded previous one.
    Issuing,
    /// A new key was issued; whether its secret reached the Secret is still to be seen.
    Issued,
    /// The new key is in the Secret; the previous one works until it expires.
    Overlap,
}

/// What the ObjectBucket records of its claim's rotation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RotationRecord {
    /// The last value of the claim's request annotation honoured (its key was issued), as
    /// [`recorded_token`] writes it. A value the backend refused is not, so that setting the
    /// annotation back to this one asks nothing.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) handled: String,
    /// The request being taken up, from `Issuing` until its key is issued (then it is `handled`)
    /// or the backend refuses it (then it is dropped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pending: Option<String>,
    #[serde(default)]
    pub(crate) step: Step,
    /// When the Secret's key was issued (none recorded: when the ObjectBucket was created).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) created_at: Option<Timestamp>,
    /// The key being replaced, from `Issuing` until it is retired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) previous_key_id: Option<String>,
    /// When the previous key is retired (`Overlap`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) previous_expires_at: Option<Timestamp>,
    /// The key issued (`Issued`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) new_key_id: Option<String>,
    /// The digest of the key issued (`Issued`), to recognise it in the Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) new_digest: Option<String>,
}

impl RotationRecord {
    /// The record on `bucket`; none (or one that does not parse) is an idle one.
    pub(crate) fn of(bucket: &ObjectBucket) -> Option<Self> {
        let text = bucket.annotations().get(annotations::ROTATION)?;
        Some(serde_json::from_str(text).unwrap_or_default())
    }

    /// The record a new ObjectBucket starts with: the claim's request as it is now counts as
    /// taken up (the claim's first key is new anyway). `None` when the claim asks nothing, so
    /// that claims without rotation record nothing.
    pub(crate) fn initial(claim: &ObjectBucketClaim) -> Option<String> {
        let requested = requested(claim)?;
        let record = Self { handled: recorded_token(requested), ..Default::default() };
        Some(record.to_json())
    }

    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The claim's request token, if it sets a non-empty one.
pub(crate) fn requested(claim: &ObjectBucketClaim) -> Option<&str> {
    claim
        .annotations()
        .get(annotations::ROTATE_CREDENTIALS)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// How a request token is recorded as taken up: as it is when short and printable, else as
/// `sha256:<hex>` of it.
pub(crate) fn recorded_token(token: &str) -> String {
    let plain =
        token.len() <= LONGEST_RECORDED_TOKEN && token.bytes().all(|b| (b' '..=b'~').contains(&b));
    if plain {
        return token.to_owned();
    }
    let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
    format!("sha256:{}", hex::encode(digest))
}

/// Whether `handled`, a record's, is `token` taken up (records written before tokens were ever
/// digested hold them as they were).
pub(crate) fn is_taken(handled: &str, token: &str) -> bool {
    handled == token || handled == recorded_token(token)
}
