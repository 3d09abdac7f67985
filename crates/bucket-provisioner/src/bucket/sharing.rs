//! Sharing a claim's bucket with another claim of its namespace (and, through
//! `cross_namespace`, of another namespace that consents).
//!
//! A claim whose `additionalConfig` names another claim of its own namespace (`shareFrom`) is
//! granted its own key on that claim's bucket, with an access mode no wider than its class's
//! limit and the owning claim's own mode. Only a bucket the named claim created can be shared,
//! and the name is looked up in the sharing claim's namespace alone: a claim elsewhere, one that
//! does not exist, is not bound or did not create its bucket are all refused with the same
//! words, so a refusal teaches nothing about what exists.
//!
//! The sharing claim's ObjectBucket records the owning claim's UID (the claim's own
//! `shareFrom` is tenant-written and may change; the record does not). When the owning claim's
//! deletion is about to delete the bucket, every claim sharing it is first marked lost on its
//! ObjectBucket, then its key revoked: it ends `Failed`/`BucketLost` with no key, and a crash in
//! between is finished by the sharing claim's own reconcile.

use bucket_api::contract::annotations;
use bucket_api::{AccessMode, ObjectBucket, ObjectBucketClaim, ObjectBucketPhase};
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::Provisioner;
use crate::bucket::consent;
pub(crate) use crate::bucket::consent::{Owner, eligible, share_from};
use crate::bucket::context::Context;
use crate::bucket::error::{Error, Operation};
use crate::bucket::grant_rules::split_share_from;
use crate::bucket::observe::{bound_bucket_name, observe};
use crate::bucket::status::{ClaimState, set_bucket_status, set_claim_status};
use crate::{access_mode_of, user_id_of};

/// The value of [`annotations::BUCKET_LOST`] once the lost claim's key is revoked.
const REVOKED: &str = "revoked";

/// Resolves `shareFrom` within the claim's namespace (or, for `<namespace>/<claim>` of another
/// one, as `cross_namespace` says), from the caches alone. `Ok(None)` when the
/// claim shares nothing.
pub(crate) fn resolve<P>(
    claim: &ObjectBucketClaim,
    ctx: &Context<P>,
) -> Result<Option<Owner>, Error> {
    let Some(text) = share_from(claim) else { return Ok(None) };
    resolve_text(claim, text, ctx).map(Some)
}

/// Resolves the `shareFrom` text `text` for `claim`, as [`resolve`] does.
fn resolve_text<P>(
    claim: &ObjectBucketClaim,
    text: &str,
    ctx: &Context<P>,
) -> Result<Owner, Error> {
    let refused = || Error::ShareSourceNotFound(text.to_owned());
    let namespace = claim.namespace().unwrap_or_default();
    let name = match split_share_from(text) {
        Some((elsewhere, name)) if elsewhere != namespace => {
            return consent::resolve(claim, text, (elsewhere, name), ctx);
        }
        Some((_, name)) => name,
        None => text,
    };
    if name.is_empty() || name.contains('/') || name == claim.name_any() {
        return Err(refused());
    }
    let cached = ctx.caches.claim_store.get(&ObjectRef::new(name).within(&namespace));
    let owner_claim = cached.and_then(|c| c.claim().ok()).ok_or_else(refused)?;
    let owner_claim = ctx.caches.claim(&owner_claim).ok_or_else(refused)?;
    if owner_claim.metadata.deletion_timestamp.is_some() {
        return Err(refused());
    }
    let owner_bucket = observe(&owner_claim, ctx).bound.ok_or_else(refused)?;
    let uid = claim.uid().unwrap_or_default();
    let owner = eligible(&uid, &owner_bucket, &ctx.name).ok_or_else(refused)?;
    Ok(Owner { claim: format!("{namespace}/{name}"), ..owner })
}

/// The most a bound sharing claim may get: the mode of the claim its ObjectBucket records it
/// shares from, looked up under that record (written by the controller alone), whatever the
/// claim's `shareFrom` says now: editing it neither widens the claim's key nor keeps a mode the
/// owner narrowed. Only an ObjectBucket written before the claim's name was recorded falls back
/// to `shareFrom`. The mode it has when that claim is not found the one recorded (so nothing
/// widens), and `None` for a claim that shares nothing.
pub(crate) fn bound_owner_mode<P>(
    claim: &ObjectBucketClaim,
    bound: &ObjectBucket,
    ctx: &Context<P>,
) -> Option<AccessMode> {
    let recorded = bound.annotations().get(annotations::SHARED_FROM)?;
    // Across namespaces, consent is checked under the record, whatever `shareFrom` says now.
    if let Some(consented) = consent::bound_consent(claim, bound, ctx) {
        return Some(consented.map_or_else(|_| access_mode_of(bound), |owner| owner.mode));
    }
    let named = bound.annotations().get(annotations::SHARED_FROM_CLAIM).map(String::as_str);
    let owner = match named.or_else(|| share_from(claim)) {
        Some(text) => resolve_text(claim, text, ctx).ok(),
        None => None,
    };
    match owner {
        Some(owner) if owner.uid == *recorded => Some(owner.mode),
        _ => Some(access_mode_of(bound)),
    }
}

/// Whether the sharing claim's ObjectBucket says its bucket went with its owner.
pub(crate) fn lost(bound: &ObjectBucket) -> Option<&str> {
    bound.annotations().get(annotations::BUCKET_LOST).map(String::as_str)
}

/// A sharing claim whose bucket is lost: its key revoked (if the owner's cleanup could not),
/// its ObjectBucket `Failed`, and the claim `Failed`/`BucketLost`.
pub(crate) async fn settle_lost<P: Provisioner>(
    bound: &ObjectBucket,
    ctx: &Context<P>,
) -> Result<Error, Error> {
    let bucket = bound_bucket_name(bound).to_owned();
    if lost(bound) != Some(REVOKED) {
        ctx.provisioner.revoke(bound).await.map_err(|source| Error::Backend {
            operation: Operation::Revoke,
            bucket: bucket.clone(),
            source,
            hint: "",
        })?;
        let patch = json!({ "metadata": { "annotations": { annotations::BUCKET_LOST: REVOKED } } });
        let buckets = kube::Api::<ObjectBucket>::all(ctx.client.clone());
        let name = bound.name_any();
        let written = buckets.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        let written = ctx.caches.buckets.wrote(written);
        let message = "the bucket went with the claim it was shared from";
        let set =
            set_bucket_status(&buckets, &written, ObjectBucketPhase::Failed, "BucketLost", message);
        if let Some(written) = set.await? {
            ctx.caches.buckets.wrote(written);
        }
    }
    Ok(Error::BucketLost(bucket))
}

/// Before the bucket of the claim `owner` (with `owner_uid`) is deleted: every claim of its
/// namespace, or of a namespace its grants let in, whose ObjectBucket records sharing it is
/// marked lost, its key revoked, and its status set, so that no key outlives the bucket and no
/// sharing claim waits on it.
pub(crate) async fn release_sharers<P: Provisioner>(
    namespace: &str,
    owner_uid: &str,
    ctx: &Context<P>,
) -> Result<(), Error> {
    let claims = ctx.caches.claim_store.state();
    let mut namespaces = consent::granted_namespaces(namespace, ctx);
    namespaces.insert(namespace.to_owned());
    let in_namespace = claims
        .iter()
        .filter(|c| c.meta().namespace.as_ref().is_some_and(|ns| namespaces.contains(ns.as_str())));
    for cached in in_namespace {
        let Ok(claim) = cached.claim() else { continue };
        let Some(claim) = ctx.caches.claim(&claim) else { continue };
        let observed = observe(&claim, ctx);
        let Some(bound) = observed.bound else { continue };
        if bound.annotations().get(annotations::SHARED_FROM).map(String::as_str) != Some(owner_uid)
            || user_id_of(&bound).is_none()
        {
            continue;
        }
        if lost(&bound).is_none() {
            let patch =
                json!({ "metadata": { "annotations": { annotations::BUCKET_LOST: "true" } } });
            let written = observed
                .buckets
                .patch(&bound.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            ctx.caches.buckets.wrote(written);
        }
        let bound = ctx.caches.buckets.get("", &bound.name_any()).map(|b| (*b).clone());
        let Some(bound) = bound else { continue };
        let error = settle_lost(&bound, ctx).await?;
        let message = error.to_string();
        let state = ClaimState {
            phase: bucket_api::ClaimPhase::Failed,
            ready: false,
            reason: "BucketLost".into(),
            message: message.clone(),
            access_mode: None,
            credentials: None,
        };
        if let Some(written) = set_claim_status(&observed.claims, &claim, &state).await? {
            ctx.caches.claims.wrote(written);
        }
        ctx.event(&claim, EventType::Warning, "BucketLost", &message, Operation::Revoke).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bucket_api::{BucketEndpoint, ObjectBucketSpec};
    use k8s_openapi::api::core::v1::ObjectReference;

    fn owner_bucket(extra: &[(&str, &str)]) -> ObjectBucket {
        let mut bucket = ObjectBucket::new(
            "obc-team-owner",
            ObjectBucketSpec {
                claim_ref: Some(ObjectReference {
                    uid: Some("owner-uid".into()),
                    ..Default::default()
                }),
                endpoint: Some(BucketEndpoint {
                    bucket_name: "photos".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        let mut recorded: std::collections::BTreeMap<String, String> = [
            (annotations::PROVISIONER, "p"),
            (annotations::BUCKET_SOURCE, "new"),
            (annotations::ACCESS_MODE, "ReadOnly"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for (k, v) in extra {
            recorded.insert(k.to_string(), v.to_string());
        }
        bucket.metadata.annotations = Some(recorded);
        bucket
    }

    #[test]
    fn only_a_bucket_its_claim_created_is_shared_with_the_owners_mode() {
        let owner = eligible("sharer-uid", &owner_bucket(&[]), "p").unwrap();
        assert_eq!(owner.bucket, "photos");
        assert_eq!(owner.mode, AccessMode::ReadOnly);
        assert_eq!(owner.uid, "owner-uid");
        // Another provisioner's, an operator's bucket, a sharer's, a lost one, itself: none.
        assert_eq!(eligible("sharer-uid", &owner_bucket(&[]), "other"), None);
        let operator = owner_bucket(&[(annotations::BUCKET_SOURCE, "existing")]);
        assert_eq!(eligible("sharer-uid", &operator, "p"), None);
        let sharer = owner_bucket(&[(annotations::SHARED_FROM, "x")]);
        assert_eq!(eligible("sharer-uid", &sharer, "p"), None);
        let lost = owner_bucket(&[(annotations::BUCKET_LOST, "true")]);
        assert_eq!(eligible("sharer-uid", &lost, "p"), None);
        assert_eq!(eligible("owner-uid", &owner_bucket(&[]), "p"), None);
    }

    #[test]
    fn share_from_is_read_from_additional_config() {
        let mut claim = ObjectBucketClaim::new("c", Default::default());
        assert_eq!(share_from(&claim), None);
        claim.spec.additional_config = Some([("shareFrom".to_owned(), "app".to_owned())].into());
        assert_eq!(share_from(&claim), Some("app"));
    }
}
