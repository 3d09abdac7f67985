//! A repair for a defect of the v1alpha1 controller (v0.2.2): after making a claim's Bucket it
//! writes the claim's status with `bucketReady: false`, and when the sidecar has marked the claim
//! ready in between, that write puts `false` back. The sidecar never marks it again (the Bucket
//! itself is ready), and refuses every access to the claim for good.
//!
//! The driver puts back what the sidecar wrote: a v1alpha1 claim whose status names a Bucket of
//! this driver that is ready and was made for exactly that claim (namespace, name and UID), yet
//! reads `bucketReady: false`, gets `bucketReady: true` on its status. Nothing else is touched,
//! and a cluster without v1alpha1 objects costs two failed lists per pass. RBAC: `list` on
//! `buckets` and `bucketclaims`, `patch` on `bucketclaims/status` (group `objectstorage.k8s.io`).

use std::future::Future;
use std::time::Duration;

use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::tenancy_kube::GROUP;

/// How often the claims are checked.
pub const REPAIR_INTERVAL: Duration = Duration::from_secs(10);

/// A claim to mark ready again: its namespace and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaleClaim {
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub name: String,
}

/// The claims among `claims` that `driver`'s ready Buckets (`buckets`) show were marked ready by
/// the sidecar and then overwritten.
pub fn stale_claims(
    driver: &str,
    buckets: &[DynamicObject],
    claims: &[DynamicObject],
) -> Vec<StaleClaim> {
    let mut stale = Vec::new();
    for claim in claims {
        let status = &claim.data["status"];
        if status["bucketReady"] == true {
            continue;
        }
        let Some(bucket_name) = status["bucketName"].as_str() else { continue };
        let Some(bucket) = buckets.iter().find(|b| b.name_any() == bucket_name) else { continue };
        let spec = &bucket.data["spec"];
        let reference = &spec["bucketClaim"];
        let made_for_it = reference["namespace"].as_str() == claim.namespace().as_deref()
            && reference["name"].as_str() == Some(claim.name_any().as_str())
            && reference["uid"].as_str().is_some_and(|uid| Some(uid) == claim.uid().as_deref());
        let ours = spec["driverName"].as_str().is_some_and(|d| d.eq_ignore_ascii_case(driver));
        if ours && made_for_it && bucket.data["status"]["bucketReady"] == true {
            stale.push(StaleClaim {
                namespace: claim.namespace().unwrap_or_default(),
                name: claim.name_any(),
            });
        }
    }
    stale
}

fn api(client: &Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(GROUP, "v1alpha1", kind);
    Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, plural))
}

/// One pass: finds the stale claims and marks each ready. Answers how many were repaired.
pub async fn repair_once(client: &Client, driver: &str) -> Result<usize, kube::Error> {
    let buckets = api(client, "Bucket", "buckets").list(&ListParams::default()).await?.items;
    let claims = api(client, "BucketClaim", "bucketclaims").list(&ListParams::default()).await?;
    let stale = stale_claims(driver, &buckets, &claims.items);
    for claim in &stale {
        let gvk = GroupVersionKind::gvk(GROUP, "v1alpha1", "BucketClaim");
        let resource = ApiResource::from_gvk_with_plural(&gvk, "bucketclaims");
        let claims: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &claim.namespace, &resource);
        let patch: Value = json!({ "status": { "bucketReady": true } });
        claims.patch_status(&claim.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        tracing::warn!(
            namespace = claim.namespace,
            claim = claim.name,
            "BucketClaim marked ready again: the v1alpha1 controller had overwritten the \
             sidecar's bucketReady with false"
        );
    }
    Ok(stale.len())
}

/// Repairs every [`REPAIR_INTERVAL`] until `stop` resolves. Failures (no v1alpha1 CRDs, an
/// apiserver away) are logged at debug level and tried again next time.
pub async fn run_ready_repair(client: Client, driver: String, stop: impl Future<Output = ()>) {
    let repairs = async {
        loop {
            if let Err(error) = repair_once(&client, &driver).await {
                tracing::debug!(%error, "v1alpha1 claim readiness repair skipped");
            }
            tokio::time::sleep(REPAIR_INTERVAL).await;
        }
    };
    tokio::select! {
        () = repairs => {}
        () = stop => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(namespace: Option<&str>, name: &str, uid: &str, data: Value) -> DynamicObject {
        let mut object = DynamicObject { types: None, metadata: Default::default(), data };
        object.metadata.name = Some(name.into());
        object.metadata.namespace = namespace.map(Into::into);
        object.metadata.uid = Some(uid.into());
        object
    }

    fn bucket(driver: &str, claim: (&str, &str, &str), ready: bool) -> DynamicObject {
        object(
            None,
            "bucket-1",
            "b-uid",
            json!({ "spec": { "driverName": driver, "bucketClaim": {
                "namespace": claim.0, "name": claim.1, "uid": claim.2 } },
                "status": { "bucketReady": ready } }),
        )
    }

    fn claim(ready: bool) -> DynamicObject {
        object(
            Some("a"),
            "data",
            "c-uid",
            json!({ "status": { "bucketName": "bucket-1", "bucketReady": ready } }),
        )
    }

    #[test]
    fn a_claim_overwritten_after_its_bucket_was_ready_is_stale() {
        let buckets = [bucket("hostpath.example", ("a", "data", "c-uid"), true)];
        let stale = stale_claims("hostpath.example", &buckets, &[claim(false)]);
        assert_eq!(stale, [StaleClaim { namespace: "a".into(), name: "data".into() }]);
    }

    #[test]
    fn nothing_else_is_touched() {
        let made_for = ("a", "data", "c-uid");
        // Ready already; the Bucket not ready yet; another driver's; made for another claim
        // (a claim that bound another namespace's Bucket is not made ready by us).
        assert!(stale_claims("d", &[bucket("d", made_for, true)], &[claim(true)]).is_empty());
        assert!(stale_claims("d", &[bucket("d", made_for, false)], &[claim(false)]).is_empty());
        assert!(stale_claims("d", &[bucket("other", made_for, true)], &[claim(false)]).is_empty());
        for other in [("b", "data", "c-uid"), ("a", "x", "c-uid"), ("a", "data", "other")] {
            assert!(stale_claims("d", &[bucket("d", other, true)], &[claim(false)]).is_empty());
        }
        // A claim naming no Bucket, or one that does not exist.
        let unnamed = object(Some("a"), "data", "c-uid", json!({ "status": {} }));
        assert!(stale_claims("d", &[bucket("d", made_for, true)], &[unnamed]).is_empty());
        assert!(stale_claims("d", &[], &[claim(false)]).is_empty());
    }
}
