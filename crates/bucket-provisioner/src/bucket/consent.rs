//! Whether a claim may share a bucket, from the caches alone: the owner's eligibility (the same
//! in any namespace) and, across namespaces, the consent of the owner's StorageClass (limited,
//! where it says so, to namespaces of given labels) and of a `BucketShareGrant` of the owner's
//! namespace (see `cross_namespace` for what follows from it).

use std::collections::{BTreeMap, BTreeSet};

use bucket_api::contract::class_sharing::ALLOW_CROSS_NAMESPACE_SHARING;
use bucket_api::contract::{CLAIM_SHARE_FROM, annotations};
use bucket_api::{AccessMode, ObjectBucket, ObjectBucketClaim};
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use crate::access_mode_of;
use crate::bucket::context::Context;
use crate::bucket::error::Error;
use crate::bucket::grant_rules::{self, narrowest, split_share_from, widest};
use crate::bucket::namespace_selector::take_selector;
use crate::bucket::objects::BucketSource;
use crate::bucket::observe::{bound_bucket_name, bound_uid, observe, source_of};

/// The owning claim's bucket, as a sharing claim gets it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Owner {
    /// The owning claim's UID, recorded on the sharing claim's ObjectBucket.
    pub(crate) uid: String,
    /// Its bucket.
    pub(crate) bucket: String,
    /// What its own key may do (narrowed by the grant, across namespaces): the most a sharing
    /// claim may get.
    pub(crate) mode: AccessMode,
    /// `<namespace>/<claim>` of the owning claim, recorded on the sharing claim's ObjectBucket.
    pub(crate) claim: String,
}

/// The claim a claim asks to share from (`additionalConfig` `shareFrom`), if any.
pub(crate) fn share_from(claim: &ObjectBucketClaim) -> Option<&str> {
    claim.spec.additional_config.as_ref()?.get(CLAIM_SHARE_FROM).map(String::as_str)
}

/// The owner `claim` may share from, judged from what the owner's ObjectBucket (written by the
/// controller alone) records: bound to it, its bucket created for it, not itself shared.
pub(crate) fn eligible(claim_uid: &str, owner: &ObjectBucket, provisioner: &str) -> Option<Owner> {
    let recorded = owner.annotations();
    let ours = recorded.get(annotations::PROVISIONER).map(String::as_str) == Some(provisioner);
    let created = source_of(recorded) == Some(BucketSource::New);
    let shared = recorded.contains_key(annotations::SHARED_FROM);
    let lost = recorded.contains_key(annotations::BUCKET_LOST);
    let uid = bound_uid(owner)?;
    let gone = owner.metadata.deletion_timestamp.is_some();
    let bucket = bound_bucket_name(owner);
    if !ours || !created || shared || lost || gone || uid == claim_uid || bucket.is_empty() {
        return None;
    }
    let mode = access_mode_of(owner);
    Some(Owner { uid: uid.to_owned(), bucket: bucket.to_owned(), mode, claim: String::new() })
}

/// Reads (and removes) the operator's consent from a class's parameters: `"true"` or `"false"`.
pub(crate) fn take_consent(parameters: &mut BTreeMap<String, String>) -> Result<bool, String> {
    match parameters.remove(ALLOW_CROSS_NAMESPACE_SHARING).as_deref() {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(format!(
            "parameter {ALLOW_CROSS_NAMESPACE_SHARING} {other:?} must be \"true\" or \"false\""
        )),
    }
}

/// The mode the valid grants of `owner_ns` give claim `claim` of `namespace` on the bucket of
/// claim `owner`: the widest of them, `None` if none lets it in.
fn granted<P>(
    ctx: &Context<P>,
    (owner_ns, owner): (&str, &str),
    (namespace, claim): (&str, &str),
) -> Option<AccessMode> {
    let grants = ctx.caches.grants.state();
    let here = grants.iter().filter(|g| g.namespace().as_deref() == Some(owner_ns));
    here.filter_map(|g| grant_rules::parse(&g.spec).ok())
        .filter_map(|rules| rules.mode_for(owner, namespace, claim))
        .reduce(widest)
}

/// The owner `claim` may share from claim `owner_name` of namespace `owner_ns` (another than
/// its own), from the caches alone: `Ok(None)` unless the owner, its operator and its namespace
/// all consent, and the claim's namespace carries the labels the operator's class asks for.
/// `Err` only for a claim the grant lets in, when the class's namespace selector cannot be read.
fn consent<P>(
    claim: &ObjectBucketClaim,
    (owner_ns, owner_name): (&str, &str),
    ctx: &Context<P>,
) -> Result<Option<Owner>, Error> {
    let namespace = claim.namespace().unwrap_or_default();
    if namespace == owner_ns {
        return Ok(None);
    }
    let Some(cached) = ctx.caches.claim_store.get(&ObjectRef::new(owner_name).within(owner_ns))
    else {
        return Ok(None);
    };
    let Some(owner_claim) = cached.claim().ok().and_then(|c| ctx.caches.claim(&c)) else {
        return Ok(None);
    };
    if owner_claim.metadata.deletion_timestamp.is_some() {
        return Ok(None);
    }
    let Some(owner_bucket) = observe(&owner_claim, ctx).bound else { return Ok(None) };
    let Some(owner) = eligible(&claim.uid().unwrap_or_default(), &owner_bucket, &ctx.name) else {
        return Ok(None);
    };
    let Some(class) = ctx.caches.class(&owner_bucket.spec.storage_class_name) else {
        return Ok(None);
    };
    let mut parameters = class.parameters.clone().unwrap_or_default();
    if class.provisioner != ctx.name || take_consent(&mut parameters) != Ok(true) {
        return Ok(None);
    }
    let Some(grant) = granted(ctx, (owner_ns, owner_name), (&namespace, &claim.name_any())) else {
        return Ok(None);
    };
    // Read after the grant: only a claim the owner lets in learns that the class is broken.
    let selector = take_selector(&mut parameters).map_err(|message| Error::ShareClassInvalid {
        share_from: format!("{owner_ns}/{owner_name}"),
        class: class.name_any(),
        message,
    })?;
    if let Some(selector) = selector {
        let labels = ctx.caches.namespace_labels(&namespace).unwrap_or_default();
        if !selector.matches(&labels) {
            return Ok(None);
        }
    }
    let Some(mode) = narrowest(owner.mode, grant) else { return Ok(None) };
    Ok(Some(Owner { mode, claim: format!("{owner_ns}/{owner_name}"), ..owner }))
}

/// Whether the claim's status says its access was withdrawn: a refusal goes on saying so (the
/// claim was in, so this tells it nothing new) until it binds again.
fn withdrawn_before(claim: &ObjectBucketClaim) -> bool {
    let conditions = claim.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    conditions.iter().any(|c| c.type_ == "Ready" && c.reason == "ShareWithdrawn")
}

/// Resolves `shareFrom` `text`, naming claim `name` of namespace `namespace` (not the claim's).
pub(crate) fn resolve<P>(
    claim: &ObjectBucketClaim,
    text: &str,
    (namespace, name): (&str, &str),
    ctx: &Context<P>,
) -> Result<Owner, Error> {
    consent(claim, (namespace, name), ctx)?.ok_or_else(|| match withdrawn_before(claim) {
        true => Error::ShareWithdrawn(text.to_owned()),
        false => Error::ShareSourceNotFound(text.to_owned()),
    })
}

/// The other namespace's claim a bound claim's ObjectBucket records sharing from, if any.
pub(crate) fn recorded_elsewhere<'a>(
    claim: &ObjectBucketClaim,
    bound: &'a ObjectBucket,
) -> Option<(&'a str, (&'a str, &'a str))> {
    let recorded = bound.annotations().get(annotations::SHARED_FROM_CLAIM)?;
    let (namespace, name) = split_share_from(recorded)?;
    (Some(namespace) != claim.namespace().as_deref()).then_some((recorded, (namespace, name)))
}

/// The owner a bound claim shares across namespaces still consents to; once consent is gone,
/// the error the claim is to report (`ShareWithdrawn`, or why the owner's class cannot be
/// read). `None` when it shares nothing across.
pub(crate) fn bound_consent<P>(
    claim: &ObjectBucketClaim,
    bound: &ObjectBucket,
    ctx: &Context<P>,
) -> Option<Result<Owner, Error>> {
    let (recorded, owner) = recorded_elsewhere(claim, bound)?;
    let uid = bound.annotations().get(annotations::SHARED_FROM);
    let withdrawn = || Error::ShareWithdrawn(recorded.to_owned());
    Some(match consent(claim, owner, ctx) {
        Ok(Some(owner)) if Some(&owner.uid) == uid => Ok(owner),
        Ok(_) => Err(withdrawn()),
        Err(error) => Err(error),
    })
}

/// The namespaces the grants of `namespace` let in: where claims sharing its buckets may be.
pub(crate) fn granted_namespaces<P>(namespace: &str, ctx: &Context<P>) -> BTreeSet<String> {
    let grants = ctx.caches.grants.state();
    let here = grants.iter().filter(|g| g.namespace().as_deref() == Some(namespace));
    here.flat_map(|g| g.spec.to.iter().map(|t| t.namespace.clone()).collect::<Vec<_>>()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operator_consents_with_true_only_and_a_typo_is_an_error() {
        let take = |value: &str| {
            let mut parameters =
                BTreeMap::from([(ALLOW_CROSS_NAMESPACE_SHARING.to_owned(), value.to_owned())]);
            let taken = take_consent(&mut parameters);
            assert!(parameters.is_empty(), "never passed to the backend");
            taken
        };
        assert_eq!(take("true"), Ok(true));
        assert_eq!(take("false"), Ok(false));
        assert!(take("yes").unwrap_err().contains("must be \"true\" or \"false\""));
        assert_eq!(take_consent(&mut BTreeMap::new()), Ok(false));
    }
}
