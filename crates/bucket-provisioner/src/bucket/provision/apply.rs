//! Apply: what a claim to bind was given, made so: the intent recorded on the claim, the backend
//! called, and what it answered written (the ObjectBucket first, then the Secret and ConfigMap).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use bucket_api::contract::FINALIZER;
use bucket_api::contract::annotations;
use bucket_api::{ObjectBucket, ObjectBucketClaim};
use kube::ResourceExt;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use crate::bucket::context::Context;
use crate::bucket::error::Error;
use crate::bucket::limits::Limited;
use crate::bucket::naming;
use crate::bucket::objects::{self, BucketRecord, BucketSource, reclaim_policy_str};
use crate::bucket::observe::Observed;
use crate::bucket::ownership::ensure_owned;
use crate::bucket::plan::{Plan, bucket_options};
use crate::bucket::provision::plan::Binding;
use crate::bucket::sharing;
use crate::bucket::tenant_written::TenantWritten;
use crate::bucket::web_identity::{self, WebIdentity, WebIdentityOptions};
use crate::kubernetes::cache::key;
use crate::{BackendError, BucketOptions, ProvisionedBucket, Provisioner};

/// How often one reconcile generates a new name after the backend says a generated one is taken.
const NAME_ATTEMPTS: usize = 3;

/// Records the intent, then asks the backend for the bucket or the grant; a generated name the
/// backend finds taken is replaced (in `binding`, and recorded) before it is tried again.
/// Answers the claim as last written and what the backend made.
pub(crate) async fn call_backend<P: Provisioner>(
    mut claim: Arc<ObjectBucketClaim>,
    observed: &Observed,
    binding: &mut Binding,
    ctx: &Context<P>,
) -> Result<(Arc<ObjectBucketClaim>, ProvisionedBucket), Error> {
    let operation = binding.operation;
    let plan = &mut binding.plan;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let options = bucket_options(&claim, plan, &observed.uid, &binding.limited);
        let backend_error = |source: BackendError| Error::Backend {
            operation,
            bucket: plan.bucket_name.clone(),
            source,
            hint: "",
        };
        ctx.provisioner.validate(&options).map_err(backend_error)?;
        // Refused by name before anything is made, never answered with a key instead.
        binding.web_identity = match &options.web_identity {
            None => None,
            Some(told) => {
                let answered = ctx.provisioner.web_identity(&options).map_err(backend_error)?;
                Some((told.clone(), answered))
            }
        };
        claim = persist_intent(observed, &claim, plan, ctx).await?;
        let options = BucketOptions { claim: TenantWritten::new((*claim).clone()), ..options };
        let started = Instant::now();
        let answer = match plan.source {
            BucketSource::New => ctx.provisioner.provision(&options).await,
            BucketSource::Existing => ctx.provisioner.grant(&options).await,
        };
        ctx.metrics.observe_provisioning(operation.as_str(), started.elapsed().as_secs_f64());
        match answer {
            Ok(provisioned) => return Ok((claim, provisioned)),
            // A generated name is ours to change: pick another and record it before trying it.
            Err(error)
                if error.is_name_taken()
                    && plan.generated
                    && observed.bound.is_none()
                    && attempts < NAME_ATTEMPTS =>
            {
                let taken = std::mem::take(&mut plan.bucket_name);
                plan.bucket_name = naming::generate_bucket_name(
                    claim.spec.generate_bucket_name.as_deref().unwrap_or_default(),
                );
                tracing::info!(claim = %key(&*claim), taken = %taken, bucket = %plan.bucket_name,
                    "generated bucket name is taken; generated another");
            }
            Err(error) => return Err(backend_error(error)),
        }
    }
}

/// Records the bucket name, the ObjectBucket's name and our finalizer on the claim, in one write
/// before the backend is called, so that a crash cannot lose track of the bucket. The
/// annotations only say which claims may hold something of ours: a tenant can write them too, so
/// cleanup rebuilds what it acts on from the StorageClass (see
/// [`crate::bucket::cleanup::observe`]). The claim's resourceVersion guards the write: a
/// concurrent change fails it, and the retry starts over.
async fn persist_intent<P>(
    observed: &Observed,
    claim: &ObjectBucketClaim,
    plan: &Plan,
    ctx: &Context<P>,
) -> Result<Arc<ObjectBucketClaim>, Error> {
    let provisioner = ctx.name.as_str();
    let mut wanted = BTreeMap::from([
        (annotations::PROVISIONER, provisioner),
        (annotations::BUCKET_SOURCE, plan.source.as_str()),
        (annotations::RECLAIM_POLICY, reclaim_policy_str(plan.reclaim_policy)),
    ]);
    if plan.generated {
        wanted.insert(annotations::GENERATED_BUCKET_NAME, &plan.bucket_name);
    }
    let current = claim.annotations();
    let annotations_match =
        wanted.iter().all(|(k, v)| current.get(*k).map(String::as_str) == Some(*v));
    let finalized = claim.finalizers().iter().any(|f| f == FINALIZER);
    if finalized
        && annotations_match
        && claim.spec.bucket_name.as_deref() == Some(plan.bucket_name.as_str())
        && claim.spec.object_bucket_name.as_deref() == Some(observed.bucket_name.as_str())
    {
        return Ok(Arc::new(claim.clone()));
    }
    // The finalizer goes on in the same write: from here on the claim cannot go unseen.
    let mut finalizers = claim.finalizers().to_vec();
    if !finalized {
        finalizers.push(FINALIZER.to_owned());
    }
    let patch = json!({
        "metadata": {
            "resourceVersion": claim.resource_version(),
            "finalizers": finalizers,
            "annotations": wanted,
        },
        "spec": { "bucketName": plan.bucket_name, "objectBucketName": observed.bucket_name },
    });
    let updated = observed
        .claims
        .patch(&claim.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(ctx.caches.claims.wrote(updated))
}

/// Writes the ObjectBucket, then the Secret and ConfigMap; answers the ObjectBucket as written.
pub(crate) async fn write_results<P: Provisioner>(
    claim: &ObjectBucketClaim,
    observed: &mut Observed,
    (plan, limited, shared_from): (&Plan, &Limited, Option<&sharing::Owner>),
    (provisioned, web_identity): (&ProvisionedBucket, Option<&(WebIdentityOptions, WebIdentity)>),
    ctx: &Context<P>,
) -> Result<Arc<ObjectBucket>, Error> {
    // The ObjectBucket first: it is the record of what the backend made (with its state), so a
    // crash from here on still leaves cleanup everything it needs.
    let desired = objects::object_bucket(&BucketRecord {
        name: &observed.bucket_name,
        claim,
        provisioner: &ctx.name,
        bucket: &plan.bucket_name,
        source: plan.source,
        reclaim_policy: plan.reclaim_policy,
        endpoint: &provisioned.endpoint,
        credentials: &provisioned.credentials,
        additional_state: provisioned.additional_state.clone(),
        additional_config: &limited.config,
        access_mode: limited.access_mode,
    });
    let mut desired = desired;
    let (told, answered) = web_identity.map(|(t, a)| (t, a)).unzip();
    web_identity::record(&mut desired, told, answered);
    if let Some(owner) = shared_from {
        let recorded = desired.metadata.annotations.get_or_insert_default();
        recorded.insert(annotations::SHARED_FROM.into(), owner.uid.clone());
        recorded.insert(annotations::SHARED_FROM_CLAIM.into(), owner.claim.clone());
    }
    let bucket = match &observed.bound {
        None => match observed.buckets.create(&PostParams::default(), &desired).await {
            Err(kube::Error::Api(status)) if status.is_already_exists() => {
                take_unique_name(claim, observed, desired, ctx).await?
            }
            created => created?,
        },
        Some(existing) => {
            let mut replacement = desired;
            // A rotation's record outlives credentials issued again (its previous key is still
            // to be retired), and so does the claim a shared bucket came from.
            for kept in
                [annotations::ROTATION, annotations::SHARED_FROM, annotations::SHARED_FROM_CLAIM]
            {
                if let Some(value) = existing.annotations().get(kept) {
                    let recorded = replacement.metadata.annotations.get_or_insert_default();
                    recorded.insert(kept.into(), value.clone());
                }
            }
            replacement.metadata.resource_version = existing.resource_version();
            observed
                .buckets
                .replace(&observed.bucket_name, &PostParams::default(), &replacement)
                .await?
        }
    };
    let bucket = ctx.caches.buckets.wrote(bucket);
    // The rest depends on the record only, not on each other: written side by side, and both
    // to the end, so that a refusal of one finds the other written (or not) for sure.
    let secret = objects::secret(claim, &ctx.name, &provisioned.credentials);
    let config_map =
        objects::config_map(claim, &ctx.name, &provisioned.endpoint, &plan.bucket_name);
    let config_map = objects::with_web_identity(config_map, &bucket);
    // A claim that gets sessions only has no key written anywhere.
    let keyless = web_identity::sessions_only(&bucket);
    let (secret, config_map) = tokio::join!(
        async {
            if keyless {
                return Ok(());
            }
            ensure_owned(
                &observed.secrets,
                &ctx.caches.secrets,
                secret,
                &observed.uid,
                Error::ForeignSecret,
            )
            .await
        },
        ensure_owned(
            &observed.config_maps,
            &ctx.caches.config_maps,
            config_map,
            &observed.uid,
            Error::ForeignConfigMap,
        ),
    );
    secret.and(config_map)?;
    Ok(bucket)
}

/// The ObjectBucket's name was taken by one that is not ours (ours are all in the cache): made by
/// hand, or by another program. The claim's unique name is its alone: recorded on the claim
/// first, so that every later reconcile looks there, then used.
async fn take_unique_name<P>(
    claim: &ObjectBucketClaim,
    observed: &mut Observed,
    mut desired: ObjectBucket,
    ctx: &Context<P>,
) -> Result<ObjectBucket, Error> {
    let names = naming::object_bucket_names(&observed.namespace, &claim.name_any(), &observed.uid);
    if observed.bucket_name == names.unique {
        let other_uid = "unknown".to_owned();
        return Err(Error::ObjectBucketConflict { name: names.unique, other_uid });
    }
    tracing::info!(claim = %key(claim), taken = %observed.bucket_name, object_bucket = %names.unique,
        "the ObjectBucket name is taken by one that is not ours; using the claim's unique name");
    let latest = ctx.caches.claim(claim).unwrap_or_else(|| Arc::new(claim.clone()));
    let patch = json!({
        "metadata": { "resourceVersion": latest.resource_version() },
        "spec": { "objectBucketName": names.unique },
    });
    let params = PatchParams::default();
    let recorded = observed.claims.patch(&claim.name_any(), &params, &Patch::Merge(&patch)).await?;
    ctx.caches.claims.wrote(recorded);
    observed.bucket_name = names.unique;
    desired.metadata.name = Some(observed.bucket_name.clone());
    Ok(observed.buckets.create(&PostParams::default(), &desired).await?)
}
