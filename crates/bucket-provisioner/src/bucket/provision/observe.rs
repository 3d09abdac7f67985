//! Observe: what a claim to bind depends on, read before anything is decided: the claim taken
//! over from a lib-bucket-provisioner provisioner if it was one's, its objects as the caches hold
//! them, and nothing under its names that is not its own.

use std::sync::Arc;

use bucket_api::ObjectBucketClaim;
use kube::ResourceExt;

use crate::Provisioner;
use crate::bucket::adoption::adopt_legacy;
use crate::bucket::context::Context;
use crate::bucket::error::Error;
use crate::bucket::objects;
use crate::bucket::observe::{Observed, observe};
use crate::bucket::ownership::check_not_foreign;
use crate::kubernetes::cache::key;
use crate::kubernetes::cache::summary::Summary;

/// The claim (adopted if it was a legacy one's), what exists for it, and its Secret as cached.
/// A Secret or ConfigMap of its name that is not its own refuses it.
pub(crate) async fn claim<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    ctx: &Context<P>,
) -> Result<(Arc<ObjectBucketClaim>, Observed, Option<Arc<Summary>>), Error> {
    let claim = adopt_legacy(claim, ctx).await?;
    let observed = observe(&claim, ctx);
    let name = claim.name_any();
    let secret = check_not_foreign(
        &ctx.caches.secrets,
        &observed.namespace,
        &name,
        &observed.uid,
        Error::ForeignSecret,
    )?;
    check_not_foreign(
        &ctx.caches.config_maps,
        &observed.namespace,
        &name,
        &observed.uid,
        Error::ForeignConfigMap,
    )?;
    Ok((claim, observed, secret))
}

/// A claim found blocked before: only the apiserver can tell whether the foreign object is still
/// there (it is not ours, so not cached), and the backend is not asked again until it is gone.
pub(crate) async fn still_blocked<P>(
    claim: &ObjectBucketClaim,
    observed: &Observed,
    ctx: &Context<P>,
) -> Result<(), Error> {
    let claim_key = key(claim);
    if ctx.blocked(&claim_key, None) {
        let name = claim.name_any();
        for (found, foreign) in [
            (
                observed.secrets.get_opt(&name).await?.map(|s| s.metadata),
                Error::ForeignSecret as fn(String) -> Error,
            ),
            (
                observed.config_maps.get_opt(&name).await?.map(|c| c.metadata),
                Error::ForeignConfigMap,
            ),
        ] {
            if found.is_some_and(|meta| !objects::meta_controlled_by(&meta, &observed.uid)) {
                return Err(foreign(name));
            }
        }
        ctx.blocked(&claim_key, Some(false));
    }
    Ok(())
}
