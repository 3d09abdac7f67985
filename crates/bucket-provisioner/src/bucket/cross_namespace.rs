//! Sharing a claim's bucket with claims of other namespaces, when both the owner and the
//! operator consent.
//!
//! A claim whose `shareFrom` is `<namespace>/<claim>` of another namespace is granted a key of
//! its own on that claim's bucket only while all of these hold:
//! - the named claim is Bound and created its bucket (as inside a namespace, judged from its
//!   ObjectBucket, which tenants cannot write: a grant is consent, never proof of ownership);
//! - the StorageClass of that bucket (as its ObjectBucket records it) has
//!   `allowCrossNamespaceSharing: "true"`, the operator's consent;
//! - a valid [`BucketShareGrant`] of the owner's namespace names the owning claim and lets in
//!   the sharing claim's namespace (or the claim itself), the owner's consent.
//!
//! Its mode is the narrowest of what it asks, its own class's limit, the grant's mode and the
//! owner's mode. Any refusal, whatever its cause, is the same `ShareSourceNotFound` a claim of
//! the same namespace gets, so that nothing is learnt of other namespaces.
//!
//! The sharing claim's ObjectBucket records the owning claim as `<namespace>/<claim>` and its
//! UID, and consent is checked again under that record on every reconcile (grants and classes
//! are watched, and their changes wake the claims they concern). Consent gone, the claim's key
//! is revoked, its Secret, ConfigMap and ObjectBucket removed, and it ends
//! `Failed`/`ShareWithdrawn`; the bucket and its data stay. Consent back, it binds again with a
//! new key. Consent narrowed, its key is narrowed in place.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bucket_api::contract::annotations;
use bucket_api::contract::class_sharing::ALLOW_CROSS_NAMESPACE_SHARING;
use bucket_api::{AccessMode, BucketShareGrant, ObjectBucket, ObjectBucketClaim};
use futures::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::Provisioner;
use crate::bucket::cleanup::delete_object_bucket;
use crate::bucket::context::Context;
use crate::bucket::error::{Error, Operation};
use crate::bucket::grant_rules::{self, narrowest, split_share_from, widest};
use crate::bucket::observe::{bound_bucket_name, observe};
use crate::bucket::sharing::{Owner, eligible, share_from};
use crate::bucket::withdraw::remove_own;
use crate::kubernetes::cache::claims::CachedClaim;
use crate::kubernetes::cache::compact::Packed;
use crate::kubernetes::cache::key;

/// The condition a grant's status carries.
const ACCEPTED: &str = "Accepted";

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
/// its own), from the caches alone: `None` unless the owner, its operator and its namespace all
/// consent.
fn consent<P>(
    claim: &ObjectBucketClaim,
    (owner_ns, owner_name): (&str, &str),
    ctx: &Context<P>,
) -> Option<Owner> {
    let namespace = claim.namespace().unwrap_or_default();
    if namespace == owner_ns {
        return None;
    }
    let cached = ctx.caches.claim_store.get(&ObjectRef::new(owner_name).within(owner_ns))?;
    let owner_claim = ctx.caches.claim(&cached.claim().ok()?)?;
    if owner_claim.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let owner_bucket = observe(&owner_claim, ctx).bound?;
    let owner = eligible(&claim.uid().unwrap_or_default(), &owner_bucket, &ctx.name)?;
    let class = ctx.caches.class(&owner_bucket.spec.storage_class_name)?;
    let mut parameters = class.parameters.clone().unwrap_or_default();
    if class.provisioner != ctx.name || take_consent(&mut parameters) != Ok(true) {
        return None;
    }
    let grant = granted(ctx, (owner_ns, owner_name), (&namespace, &claim.name_any()))?;
    let mode = narrowest(owner.mode, grant)?;
    Some(Owner { mode, claim: format!("{owner_ns}/{owner_name}"), ..owner })
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
    consent(claim, (namespace, name), ctx).ok_or_else(|| match withdrawn_before(claim) {
        true => Error::ShareWithdrawn(text.to_owned()),
        false => Error::ShareSourceNotFound(text.to_owned()),
    })
}

/// The other namespace's claim a bound claim's ObjectBucket records sharing from, if any.
fn recorded_elsewhere<'a>(
    claim: &ObjectBucketClaim,
    bound: &'a ObjectBucket,
) -> Option<(&'a str, (&'a str, &'a str))> {
    let recorded = bound.annotations().get(annotations::SHARED_FROM_CLAIM)?;
    let (namespace, name) = split_share_from(recorded)?;
    (Some(namespace) != claim.namespace().as_deref()).then_some((recorded, (namespace, name)))
}

/// The owner a bound claim shares across namespaces still consents to: `Some(None)` when it
/// shares from another namespace and consent is gone; `None` when it shares nothing across.
pub(crate) fn bound_consent<P>(
    claim: &ObjectBucketClaim,
    bound: &ObjectBucket,
    ctx: &Context<P>,
) -> Option<Option<Owner>> {
    let (_, owner) = recorded_elsewhere(claim, bound)?;
    let uid = bound.annotations().get(annotations::SHARED_FROM);
    Some(consent(claim, owner, ctx).filter(|o| Some(&o.uid) == uid))
}

/// A bound claim sharing across namespaces whose consent is gone: its key revoked, its Secret,
/// ConfigMap and ObjectBucket removed (the ObjectBucket last, so that a crash before is
/// finished by the next reconcile), and the refusal to report. `None` while consent holds.
pub(crate) async fn withdraw_if_refused<P: Provisioner>(
    claim: &ObjectBucketClaim,
    bound: &ObjectBucket,
    ctx: &Context<P>,
) -> Result<Option<Error>, Error> {
    if !matches!(bound_consent(claim, bound, ctx), Some(None)) {
        return Ok(None);
    }
    let recorded = recorded_elsewhere(claim, bound).map(|(r, _)| r).unwrap_or_default();
    let recorded = recorded.to_owned();
    let bucket = bound_bucket_name(bound).to_owned();
    ctx.provisioner.revoke(bound).await.map_err(|source| Error::Backend {
        operation: Operation::Revoke,
        bucket: bucket.clone(),
        source,
        hint: "",
    })?;
    let observed = observe(claim, ctx);
    let name = claim.name_any();
    remove_own(&observed.secrets, &ctx.caches.secrets, &name, &observed.uid).await?;
    remove_own(&observed.config_maps, &ctx.caches.config_maps, &name, &observed.uid).await?;
    delete_object_bucket(&observed.buckets, bound, ctx).await?;
    tracing::info!(claim = %key(claim), bucket = %bucket, shared_from = %recorded,
        "consent to share across namespaces was withdrawn: the claim's key is revoked");
    Ok(Some(Error::ShareWithdrawn(recorded)))
}

/// The claims whose sharing across namespaces a change in `namespace` (every namespace when
/// `None`) may concern: those whose `shareFrom` names a claim there, and those whose
/// ObjectBucket records one (the claim's own `shareFrom` may have changed since).
pub(crate) fn sharers(
    claims: &Store<CachedClaim>,
    buckets: &Packed<ObjectBucket>,
    namespace: Option<&str>,
) -> Vec<ObjectRef<CachedClaim>> {
    let concerns = |own: Option<&str>, text: &str| {
        split_share_from(text)
            .is_some_and(|(ns, _)| Some(ns) != own && namespace.is_none_or(|wanted| wanted == ns))
    };
    let mut found = BTreeSet::new();
    for cached in claims.state() {
        let Ok(claim) = cached.claim() else { continue };
        if share_from(&claim).is_some_and(|text| concerns(claim.namespace().as_deref(), text)) {
            found.insert((claim.namespace().unwrap_or_default(), claim.name_any()));
        }
    }
    for (_, name) in buckets.keys() {
        let Some(bucket) = buckets.get("", &name) else { continue };
        let Some(claim_ref) = bucket.spec.claim_ref.as_ref() else { continue };
        let (Some(ns), Some(claim)) = (&claim_ref.namespace, &claim_ref.name) else { continue };
        let recorded = bucket.annotations().get(annotations::SHARED_FROM_CLAIM);
        if recorded.is_some_and(|text| concerns(Some(ns), text)) {
            found.insert((ns.clone(), claim.clone()));
        }
    }
    found.into_iter().map(|(ns, name)| ObjectRef::new(&name).within(&ns)).collect()
}

/// The namespaces the grants of `namespace` let in: where claims sharing its buckets may be.
pub(crate) fn granted_namespaces<P>(namespace: &str, ctx: &Context<P>) -> BTreeSet<String> {
    let grants = ctx.caches.grants.state();
    let here = grants.iter().filter(|g| g.namespace().as_deref() == Some(namespace));
    here.flat_map(|g| g.spec.to.iter().map(|t| t.namespace.clone()).collect::<Vec<_>>()).collect()
}

/// The `Accepted` condition a grant should carry, and whether it grants anything.
fn accepted(grant: &BucketShareGrant) -> (bool, &'static str, String) {
    match grant_rules::parse(&grant.spec) {
        Ok(rules) => {
            let message = format!(
                "claims of {} namespace entr{} may share the bucket of claim {:?}, where its \
                 StorageClass allows sharing across namespaces",
                rules.to.len(),
                if rules.to.len() == 1 { "y" } else { "ies" },
                rules.claim
            );
            (true, "Accepted", message)
        }
        Err(problem) => (false, "Invalid", format!("the grant grants nothing: {problem}")),
    }
}

/// Writes the grant's `Accepted` condition when it says something else; an invalid grant also
/// gets an Event and a log line, once per change.
async fn report_grant<P>(grant: &BucketShareGrant, ctx: &Context<P>) {
    let (ok, reason, message) = accepted(grant);
    let status = if ok { "True" } else { "False" };
    let generation = grant.metadata.generation;
    let previous =
        grant.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == ACCEPTED));
    if previous.is_some_and(|c| {
        c.status == status
            && c.reason == reason
            && c.message == message
            && c.observed_generation == generation
    }) {
        return;
    }
    let last_transition_time = previous
        .filter(|c| c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| Time(jiff::Timestamp::now()));
    let condition = Condition {
        type_: ACCEPTED.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.clone(),
        observed_generation: generation,
        last_transition_time,
    };
    let patch =
        json!({ "status": { "conditions": [condition], "observedGeneration": generation } });
    let api: Api<BucketShareGrant> =
        Api::namespaced(ctx.client.clone(), &grant.namespace().unwrap_or_default());
    let name = grant.name_any();
    if let Err(error) =
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await
    {
        tracing::debug!(grant = %key(grant), %error, "could not write the grant's status");
        return;
    }
    if !ok {
        tracing::warn!(grant = %key(grant), "{message}");
        let subject = grant.object_ref(&());
        ctx.publish(&subject, EventType::Warning, "InvalidGrant", &message, Operation::Grant).await;
    }
}

/// `events` of the grants watch, each grant's status written (see [`report_grant`]) before it
/// is passed on.
pub(crate) fn reported<P: Send + Sync + 'static>(
    events: impl Stream<Item = watcher::Result<watcher::Event<BucketShareGrant>>> + Send + 'static,
    ctx: Arc<Context<P>>,
) -> impl Stream<Item = watcher::Result<watcher::Event<BucketShareGrant>>> + Send + 'static {
    events.then(move |event| {
        let ctx = ctx.clone();
        async move {
            if let Ok(watcher::Event::Apply(grant) | watcher::Event::InitApply(grant)) = &event {
                report_grant(grant, &ctx).await;
            }
            event
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bucket_api::{BucketShareGrantSpec, Grantee};

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

    #[test]
    fn a_grant_says_whether_it_is_accepted_and_why_not() {
        let grant = |namespace: &str| {
            let to = vec![Grantee { namespace: namespace.into(), ..Default::default() }];
            BucketShareGrant::new("g", BucketShareGrantSpec { claim_name: "photos".into(), to })
        };
        let (ok, reason, message) = accepted(&grant("team-b"));
        assert!(ok && reason == "Accepted", "{message}");
        let (ok, reason, message) = accepted(&grant("*"));
        assert!(!ok && reason == "Invalid");
        assert!(message.contains("grants nothing") && message.contains("wildcards"), "{message}");
    }
}
