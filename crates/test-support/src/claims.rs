//! Claims and bucket StorageClasses on the control plane, as every bucket test needs them.

use bucket_api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

use crate::{eventually, unique_suffix};

/// Creates a StorageClass `<prefix>-<unique>` for `provisioner`; returns its name.
pub async fn bucket_class(
    client: &Client,
    prefix: &str,
    provisioner: &str,
    parameters: impl IntoIterator<Item = (String, String)>,
    reclaim_policy: Option<&str>,
) -> String {
    let name = format!("{prefix}-{}", unique_suffix());
    let class = StorageClass {
        metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
        provisioner: provisioner.into(),
        reclaim_policy: reclaim_policy.map(Into::into),
        parameters: Some(parameters.into_iter().collect()),
        ..Default::default()
    };
    Api::<StorageClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("creating the StorageClass");
    name
}

/// `(key, value)` pairs as owned parameters.
pub fn parameters<'a>(
    pairs: &'a [(&str, &str)],
) -> impl Iterator<Item = (String, String)> + use<'a> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string()))
}

/// Creates claim `name` with `spec`.
pub async fn create_claim(
    api: &Api<ObjectBucketClaim>,
    name: &str,
    spec: ObjectBucketClaimSpec,
) -> ObjectBucketClaim {
    api.create(&PostParams::default(), &ObjectBucketClaim::new(name, spec))
        .await
        .expect("creating the claim")
}

/// The claim's `Ready` condition.
pub fn ready(claim: &ObjectBucketClaim) -> Option<&Condition> {
    claim.status.as_ref()?.conditions.iter().find(|c| c.type_ == "Ready")
}

/// Waits for claim `name` to reach `phase` with a `Ready` condition of `reason`.
pub async fn wait_for_claim(
    api: &Api<ObjectBucketClaim>,
    name: &str,
    phase: ClaimPhase,
    reason: &str,
) -> ObjectBucketClaim {
    eventually(&format!("claim {name} to be {phase:?} with reason {reason}"), || async {
        let claim = api.get_opt(name).await.ok()??;
        let status = claim.status.as_ref()?;
        (status.phase == Some(phase) && ready(&claim)?.reason == reason).then_some(claim)
    })
    .await
}

/// Waits until claim `name` is gone.
pub async fn wait_claim_gone(api: &Api<ObjectBucketClaim>, name: &str) {
    eventually(&format!("claim {name} to be gone"), || async {
        api.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await
}

/// Deletes claim `name` and waits until it is gone.
pub async fn delete_claim_and_wait(api: &Api<ObjectBucketClaim>, name: &str) {
    api.delete(name, &DeleteParams::default()).await.expect("deleting the claim");
    wait_claim_gone(api, name).await;
}
