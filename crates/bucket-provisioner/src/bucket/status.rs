//! Claim and ObjectBucket status: the phase and a `Ready` condition, and an ObjectBucket's usage,
//! written only when they change so that a status write never wakes the controller up again for
//! nothing.

use bucket_api::{
    AccessMode, BucketUsage, ClaimPhase, CredentialsStatus, ObjectBucket, ObjectBucketClaim,
    ObjectBucketClaimStatus, ObjectBucketPhase, ObjectBucketStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

/// The condition type every claim carries.
pub const READY: &str = "Ready";
/// Field manager for everything the controller applies.
pub const FIELD_MANAGER: &str = "bucket-provisioner";
/// Field manager of `status.usage` alone, so that phase and conditions, applied without it,
/// never remove it.
pub const USAGE_FIELD_MANAGER: &str = "bucket-provisioner-usage";

/// What the claim's status should say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimState {
    /// The phase.
    pub phase: ClaimPhase,
    /// Whether the claim is ready to use.
    pub ready: bool,
    /// CamelCase reason.
    pub reason: String,
    /// For a person.
    pub message: String,
    /// The access mode in force, once bound.
    pub access_mode: Option<AccessMode>,
    /// Where the rotation of the claim's keys stands; `None` for a claim that never rotates.
    pub credentials: Option<CredentialsStatus>,
}

/// The `Ready` condition, keeping its transition time when its status did not change.
pub fn ready_condition(
    previous: &[Condition],
    ready: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) -> Condition {
    let status = if ready { "True" } else { "False" };
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == READY && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| Time(jiff::Timestamp::now()));
    Condition {
        type_: READY.into(),
        status: status.into(),
        reason: reason.into(),
        // The apiserver limits condition messages to 32768 bytes.
        message: truncate(message, 32_000),
        observed_generation: generation,
        last_transition_time,
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The claim status that `state` asks for.
pub fn claim_status(claim: &ObjectBucketClaim, state: &ClaimState) -> ObjectBucketClaimStatus {
    let previous = claim.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    let generation = claim.metadata.generation;
    let ready = ready_condition(previous, state.ready, &state.reason, &state.message, generation);
    let mut conditions: Vec<Condition> =
        previous.iter().filter(|c| c.type_ != READY).cloned().collect();
    conditions.push(ready);
    ObjectBucketClaimStatus {
        phase: Some(state.phase),
        conditions,
        observed_generation: generation,
        access_mode: state.access_mode,
        credentials: state.credentials.clone(),
    }
}

/// Writes the claim's status, unless it already says exactly this; answers the claim as written.
pub async fn set_claim_status(
    api: &Api<ObjectBucketClaim>,
    claim: &ObjectBucketClaim,
    state: &ClaimState,
) -> Result<Option<ObjectBucketClaim>, kube::Error> {
    let status = claim_status(claim, state);
    if claim.status.as_ref() == Some(&status) {
        return Ok(None);
    }
    apply_status::<ObjectBucketClaim>(api, &claim.name_any(), FIELD_MANAGER, json!(status))
        .await
        .map(Some)
}

/// Writes an ObjectBucket's phase and `Ready` condition, unless they already say exactly this;
/// answers the ObjectBucket as written.
pub async fn set_bucket_status(
    api: &Api<ObjectBucket>,
    bucket: &ObjectBucket,
    phase: ObjectBucketPhase,
    reason: &str,
    message: &str,
) -> Result<Option<ObjectBucket>, kube::Error> {
    let previous = bucket.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    let ready = phase == ObjectBucketPhase::Bound;
    let status = ObjectBucketStatus {
        phase: Some(phase),
        conditions: vec![ready_condition(previous, ready, reason, message, None)],
        usage: None,
    };
    // Usage is written by the usage report under a field manager of its own, so it is neither
    // compared here nor removed by this write.
    let current = bucket.status.as_ref().map(|s| (s.phase, &s.conditions));
    if current == Some((status.phase, &status.conditions)) {
        return Ok(None);
    }
    apply_status::<ObjectBucket>(api, &bucket.name_any(), FIELD_MANAGER, json!(status))
        .await
        .map(Some)
}

/// Records what a bucket holds on its ObjectBucket's `status.usage`, unless it already says so
/// (no usage recorded counts as empty); answers the ObjectBucket as written.
pub async fn set_bucket_usage(
    api: &Api<ObjectBucket>,
    bucket: &ObjectBucket,
    usage: &BucketUsage,
) -> Result<Option<ObjectBucket>, kube::Error> {
    let recorded = bucket.status.as_ref().and_then(|s| s.usage.as_ref());
    let unchanged = match recorded {
        Some(recorded) => recorded == usage,
        None => usage.is_empty(),
    };
    if unchanged {
        return Ok(None);
    }
    let status = json!({ "usage": usage });
    apply_status::<ObjectBucket>(api, &bucket.name_any(), USAGE_FIELD_MANAGER, status)
        .await
        .map(Some)
}

async fn apply_status<K>(
    api: &Api<K>,
    name: &str,
    manager: &str,
    status: serde_json::Value,
) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    let params = PatchParams::apply(manager).force();
    api.patch_status(name, &params, &Patch::Apply(&patch)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_survives_an_unchanged_status() {
        let first = ready_condition(&[], false, "StorageClassNotFound", "waiting", Some(1));
        let again =
            ready_condition(std::slice::from_ref(&first), false, "Other", "still waiting", Some(2));
        assert_eq!(again.last_transition_time, first.last_transition_time);
        assert_eq!(again.reason, "Other");
        let flipped = ready_condition(std::slice::from_ref(&first), true, "Bound", "ok", Some(2));
        assert_eq!(flipped.status, "True");
    }

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let message = "é".repeat(20_000);
        let condition = ready_condition(&[], false, "R", &message, None);
        assert!(condition.message.len() <= 32_004);
        assert!(condition.message.ends_with('…'));
    }
}
