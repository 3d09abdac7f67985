//! Sharing a claim's bucket with claims of other namespaces, when both the owner and the
//! operator consent.
//!
//! A claim whose `shareFrom` is `<namespace>/<claim>` of another namespace is granted a key of
//! its own on that claim's bucket only while all of these hold:
//! - the named claim is Bound and created its bucket (as inside a namespace, judged from its
//!   ObjectBucket, which tenants cannot write: a grant is consent, never proof of ownership);
//! - the StorageClass of that bucket (as its ObjectBucket records it) has
//!   `allowCrossNamespaceSharing: "true"`, the operator's consent, and, where it also has
//!   `crossNamespaceSharingNamespaceSelector`, the sharing claim's namespace carries the labels
//!   it asks for (labels an operator writes, not a tenant; see `namespace_selector`);
//! - a valid [`BucketShareGrant`] of the owner's namespace names the owning claim and lets in
//!   the sharing claim's namespace (or the claim itself), the owner's consent.
//!
//! Its mode is the narrowest of what it asks, its own class's limit, the grant's mode and the
//! owner's mode. Any refusal, whatever its cause, is the same `ShareSourceNotFound` a claim of
//! the same namespace gets, so that nothing is learnt of other namespaces.
//!
//! The sharing claim's ObjectBucket records the owning claim as `<namespace>/<claim>` and its
//! UID, and consent is checked again under that record on every reconcile (grants, classes and
//! namespaces are watched, and their changes wake the claims they concern). Consent gone, the claim's key
//! is revoked, its Secret, ConfigMap and ObjectBucket removed, and it ends
//! `Failed`/`ShareWithdrawn`; the bucket and its data stay. Consent back, it binds again with a
//! new key. Consent narrowed, its key is narrowed in place.

use std::sync::Arc;

use bucket_api::{BucketShareGrant, ObjectBucket, ObjectBucketClaim};
use futures::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::Provisioner;
use crate::bucket::cleanup::apply::delete_object_bucket;
use crate::bucket::consent::{bound_consent, recorded_elsewhere};
use crate::bucket::context::Context;
use crate::bucket::error::{Error, Operation};
use crate::bucket::grant_rules;
use crate::bucket::observe::{bound_bucket_name, observe};
use crate::bucket::withdraw::remove_own;
use crate::kubernetes::cache::key;
use crate::kubernetes::crash_point::crash_point;

/// The condition a grant's status carries.
const ACCEPTED: &str = "Accepted";

/// A bound claim sharing across namespaces whose consent is gone: its key revoked, its Secret,
/// ConfigMap and ObjectBucket removed (the ObjectBucket last, so that a crash before is
/// finished by the next reconcile), and the refusal to report. `None` while consent holds.
pub(crate) async fn withdraw_if_refused<P: Provisioner>(
    claim: &ObjectBucketClaim,
    bound: &ObjectBucket,
    ctx: &Context<P>,
) -> Result<Option<Error>, Error> {
    let Some(Err(refusal)) = bound_consent(claim, bound, ctx) else { return Ok(None) };
    let recorded = recorded_elsewhere(claim, bound).map(|(r, _)| r).unwrap_or_default();
    let recorded = recorded.to_owned();
    let bucket = bound_bucket_name(bound).to_owned();
    ctx.provisioner.revoke(bound).await.map_err(|source| Error::Backend {
        operation: Operation::Revoke,
        bucket: bucket.clone(),
        source,
        hint: "",
    })?;
    crash_point("withdraw:key-revoked");
    let observed = observe(claim, ctx);
    let name = claim.name_any();
    remove_own(&observed.secrets, &ctx.caches.secrets, &name, &observed.uid).await?;
    remove_own(&observed.config_maps, &ctx.caches.config_maps, &name, &observed.uid).await?;
    crash_point("withdraw:objects-removed");
    delete_object_bucket(&observed.buckets, bound, ctx).await?;
    tracing::info!(claim = %key(claim), bucket = %bucket, shared_from = %recorded,
        "consent to share across namespaces was withdrawn: the claim's key is revoked");
    Ok(Some(refusal))
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
