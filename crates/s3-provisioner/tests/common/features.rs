//! Claims asking for bucket features on the real control plane, and the features read back
//! from moto through the S3 API.

use std::collections::BTreeMap;

use bucket_api::{ObjectBucketClaim, ObjectBucketClaimSpec};
use bucket_provisioner::Credentials;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use test_support::{claim_tenant, eventually, ready};

use super::cluster::{Setup, spec};
use super::suffix;

/// An `objectLock` value with a default retention of `days` in `mode`.
pub fn lock(mode: &str, days: u32) -> String {
    format!(
        r#"{{"ObjectLockEnabled": "Enabled",
            "Rule": {{"DefaultRetention": {{"Mode": "{mode}", "Days": {days}}}}}}}"#
    )
}

/// A claim of `class` with `config` as its `additionalConfig`.
pub fn asking(class: &str, config: &[(&str, &str)]) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec {
        additional_config: Some(
            config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
        ),
        ..spec(class, &format!("features-{}", suffix()))
    }
}

/// Makes every claim of `s` written, edited and deleted by a tenant whose rights end at the
/// test's namespace, as a cluster's users are.
pub async fn as_tenant(s: &mut Setup) {
    let tenant = claim_tenant(test_support::ControlPlane::shared(), &s.ns).await.unwrap();
    s.claims = Api::namespaced(tenant, &s.ns);
}

/// An owner allowed no more than the book's S3 chapter asks for, with what the feature keys add.
pub async fn features_owner(s: &Setup, name: &str) -> Credentials {
    let mut actions = s3_provisioner::owner::OWNER_ACTIONS.to_vec();
    actions.extend([
        "s3:PutBucketVersioning",
        "s3:PutLifecycleConfiguration",
        "s3:GetBucketObjectLockConfiguration",
        "s3:PutBucketObjectLockConfiguration",
    ]);
    let policy = json!({
        "Version": "2012-10-17",
        "Statement": [{ "Effect": "Allow", "Action": actions, "Resource": "*" }]
    });
    s.moto.user_with_policy(name, &policy.to_string()).await
}

/// Merges `config` into claim `name`'s `additionalConfig` (`null` removes a key).
pub async fn change_config(s: &Setup, name: &str, config: serde_json::Value) {
    let patch = json!({ "spec": { "additionalConfig": config } });
    s.claims.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

/// Waits for claim `name`'s Ready condition of its current generation (so not one left by an
/// earlier edit) to say `says` with reason `InvalidParameters`, and for an Event of that
/// reason. Repeats of one reason on one claim count into the first Event's series (as
/// Kubernetes' Events do), so only the first refusal's note is read (`first`).
pub async fn refused(s: &Setup, name: &str, says: &str, first: bool) -> ObjectBucketClaim {
    let claim = eventually(&format!("claim {name} refused: {says}"), || async {
        let claim = s.claims.get(name).await.ok()?;
        let condition = ready(&claim)?;
        (condition.observed_generation == claim.metadata.generation
            && condition.reason == "InvalidParameters"
            && condition.message.contains(says))
        .then_some(claim.clone())
    })
    .await;
    eventually(&format!("an InvalidParameters Event on claim {name}"), || async {
        let events = s.events(name).await;
        events
            .iter()
            .any(|(reason, note)| reason == "InvalidParameters" && (!first || note.contains(says)))
            .then_some(())
    })
    .await;
    claim
}

/// The versioning status of `bucket`, read from the body where moto 5.2 names the answer's
/// root in a way the SDK refuses.
pub async fn versioning_of(s3: &aws_sdk_s3::Client, bucket: &str) -> Option<String> {
    match s3.get_bucket_versioning().bucket(bucket).send().await {
        Ok(found) => found.status().map(|s| s.as_str().to_string()),
        Err(aws_sdk_s3::error::SdkError::ServiceError(e)) if e.raw().status().as_u16() == 200 => {
            let body = String::from_utf8_lossy(e.raw().body().bytes().unwrap_or_default());
            let status = body.split("<Status>").nth(1)?.split("</Status>").next()?;
            Some(status.to_string())
        }
        Err(_) => None,
    }
}

/// The object lock of `bucket`: `None` without one, else its default retention's mode and
/// days (`None` for no default retention).
pub async fn lock_of(s3: &aws_sdk_s3::Client, bucket: &str) -> Option<Option<(String, i32)>> {
    let found = match s3.get_object_lock_configuration().bucket(bucket).send().await {
        Ok(found) => found,
        Err(e) => {
            let code = super::error_code(Err::<(), _>(e));
            assert_eq!(code, "ObjectLockConfigurationNotFoundError", "reading {bucket}'s lock");
            return None;
        }
    };
    let retention = found
        .object_lock_configuration()
        .and_then(|c| c.rule())
        .and_then(|r| r.default_retention())
        .and_then(|r| Some((r.mode()?.as_str().to_string(), r.days()?)));
    Some(retention)
}
