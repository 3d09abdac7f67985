//! A claim refused because a Secret or ConfigMap of its name is not its own gives back what was
//! issued for it. The controller only caches its own Secrets and ConfigMaps, so a tenant's object
//! under the claim's name is found when the claim's own is written, after the backend issued a
//! key: that key is revoked, the bucket made for the claim deleted as its policy allows, and the
//! ObjectBucket, Secret and ConfigMap written for it removed. A claim once Bound keeps what it
//! has: its key and data are in use, and losing them is not the answer to a name taken later.

use bucket_api::{ObjectBucketClaim, ObjectBucketPhase};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Preconditions};

use crate::bucket::cleanup::apply::{delete_object_bucket, give_back};
use crate::bucket::cleanup::plan::deletes_bucket;
use crate::bucket::context::Context;
use crate::bucket::error::Error;
use crate::bucket::objects::{BucketSource, meta_controlled_by};
use crate::bucket::observe::{bound_bucket_name, observe, source_of};
use crate::kubernetes::cache::key;
use crate::kubernetes::cache::summary::{Summaries, Summarized};
use crate::{Provisioner, Removed};

/// Takes back what was issued for `claim`, refused for a Secret or ConfigMap not its own, unless
/// it was ever Bound. The ObjectBucket goes last: until then a retry finds everything again.
pub(crate) async fn withdraw<P: Provisioner>(
    claim: &ObjectBucketClaim,
    ctx: &Context<P>,
) -> Result<(), Error> {
    let latest = ctx.caches.claim(claim);
    let observed = observe(latest.as_deref().unwrap_or(claim), ctx);
    let Some(record) = &observed.bound else { return Ok(()) };
    if record.status.as_ref().and_then(|s| s.phase) == Some(ObjectBucketPhase::Bound) {
        return Ok(());
    }
    let bucket = bound_bucket_name(record).to_string();
    let source = source_of(record.annotations()).unwrap_or(BucketSource::Existing);
    let (operation, outcome) = give_back(record, deletes_bucket(record, source), ctx).await;
    let removed = outcome.map_err(|source| Error::Backend {
        operation,
        bucket: bucket.clone(),
        source,
        hint: "",
    })?;
    let name = claim.name_any();
    remove_own(&observed.secrets, &ctx.caches.secrets, &name, &observed.uid).await?;
    remove_own(&observed.config_maps, &ctx.caches.config_maps, &name, &observed.uid).await?;
    delete_object_bucket(&observed.buckets, record, ctx).await?;
    let what = match removed {
        Removed::Bucket => "its key was revoked and its bucket deleted",
        Removed::AccessOnly => "its key was revoked",
    };
    tracing::info!(claim = %key(claim), bucket = %bucket,
        "the claim is refused for a Secret or ConfigMap not its own: {what}, and its \
         ObjectBucket, Secret and ConfigMap removed");
    Ok(())
}

/// Deletes the object `name` if the claim controls it; one of anyone else is left untouched.
/// Read first, and deleted under its UID, so that an object put in its place meanwhile stays.
pub(crate) async fn remove_own<K: Summarized>(
    api: &Api<K>,
    cached: &Summaries<K>,
    name: &str,
    claim_uid: &str,
) -> Result<(), Error> {
    let Some(found) = api.get_metadata_opt(name).await? else { return Ok(()) };
    if !meta_controlled_by(&found.metadata, claim_uid) {
        return Ok(());
    }
    let preconditions = Preconditions { uid: found.metadata.uid.clone(), resource_version: None };
    let params = DeleteParams { preconditions: Some(preconditions), ..Default::default() };
    match api.delete(name, &params).await {
        Ok(_) => {}
        // Gone already, or replaced by another object since it was read.
        Err(kube::Error::Api(status)) if status.is_not_found() || status.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    cached.deleted(&found.metadata.namespace.unwrap_or_default(), name);
    Ok(())
}
