//! Taking over a claim that a lib-bucket-provisioner provisioner of the same name bound (see
//! [`crate::bucket::legacy`] for how it is recognised): its ObjectBucket, Secret and ConfigMap are
//! brought to this controller's format and kept, so the claim stays Bound with the key its app
//! uses, and exactly one ObjectBucket is ever bound to it.
//!
//! The steps, each written so that a stop anywhere is resumed by the next reconcile:
//! 1. the Secret and ConfigMap get our label (so the watches see them) and lose the old
//!    finalizer, their data untouched (their owner reference to the claim is already there);
//! 2. the ObjectBucket gets our label, annotations (the Secret's credentials digest among them,
//!    so the key is recognised as the one written) and finalizer, the backend's
//!    `additionalState` and the endpoint the backend answers (see [`Provisioner::adopt`]);
//!    [`annotations::ADOPTED_FROM`] says it was taken over;
//! 3. an Event `Adopted` tells the claim, then the claim records its intent as if provisioned
//!    here (a stop in between tells it twice, never not at all).
//!
//! From then on the claim is an ordinary bound claim (see [`crate::bucket::bound`]).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use bucket_api::contract::{FINALIZER, LABEL_PROVISIONER, annotations, legacy};
use bucket_api::{AccessMode, ObjectBucket, ObjectBucketClaim};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::bucket::context::Context;
use crate::bucket::error::{Error, Operation};
use crate::bucket::legacy::{adoption_unfinished, is_legacy_binding, may_be_legacy};
use crate::bucket::objects::{BucketSource, controlled_by, reclaim_policy_str};
use crate::bucket::plan::{bucket_options, limited, plan_for_legacy, storage_class};
use crate::kubernetes::cache::key;
use crate::kubernetes::cache::summary::Summarized;
use crate::kubernetes::watch::label_value;
use crate::{Adoption, BackendError, BucketOptions, Provisioner};

/// The claim as it is after taking over what a lib-bucket-provisioner provisioner left for it,
/// or unchanged when it left nothing (or the claim is already this controller's).
pub(crate) async fn adopt_legacy<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    ctx: &Context<P>,
) -> Result<Arc<ObjectBucketClaim>, Error> {
    if !may_be_legacy(&claim) {
        return Ok(claim);
    }
    let namespace = claim.namespace().unwrap_or_default();
    let name = legacy::object_bucket_name(&namespace, &claim.name_any());
    let buckets: Api<ObjectBucket> = Api::all(ctx.client.clone());
    // Already ours (cached): a stop came between step 2 and step 3.
    if let Some(adopted) = ctx.caches.buckets.get("", &name) {
        return match adoption_unfinished(&adopted, &claim) {
            true => record_on_claim(claim, &adopted, ctx).await,
            false => Ok(claim),
        };
    }
    // Not ours, so not cached: only the apiserver knows it.
    let Some(found) = buckets.get_opt(&name).await? else { return Ok(claim) };
    if !is_legacy_binding(&found, &claim, &ctx.name) {
        return Ok(claim);
    }
    // What the previous provisioner recorded decides, never the claim: its tenant may have
    // edited the class and bucket it names since (to make an operator's bucket look like its
    // own, which deleting the claim would then delete).
    let recorded_class = found.spec.storage_class_name.as_str();
    let class = storage_class(ctx, recorded_class)?;
    let plan = plan_for_legacy(&found, &class)?;
    let requested = claim.spec.bucket_name.as_deref().filter(|b| !b.is_empty());
    if plan.bucket_name.is_empty() || requested.is_some_and(|r| r != plan.bucket_name) {
        return Err(refused(
            &plan.bucket_name,
            "LegacyBucketMismatch",
            format!(
                "ObjectBucket {name:?} left by the previous provisioner records bucket {:?}, not the \
             claim's {:?}; restore the claim's bucketName to adopt it",
                plan.bucket_name,
                requested.unwrap_or_default()
            ),
        ));
    }
    let limited = limited(&claim, &plan, true)?;
    let uid = claim.uid().unwrap_or_default();
    let options = bucket_options(&claim, &plan, &uid, &limited);
    let options = BucketOptions { storage_class_name: recorded_class.to_owned(), ..options };
    let created_by_claim = plan.source == BucketSource::New;
    let backend_error = |source| Error::Backend {
        operation: Operation::Provision,
        bucket: plan.bucket_name.clone(),
        source,
        hint: "",
    };
    let Some(adoption) =
        ctx.provisioner.adopt(&options, &found, created_by_claim).await.map_err(backend_error)?
    else {
        return Err(refused(
            &plan.bucket_name,
            "AdoptionUnsupported",
            format!(
                "ObjectBucket {name:?} was left for this claim by a lib-bucket-provisioner \
             provisioner of this name, and this backend cannot take it over; run that \
             provisioner again, or delete the claim with it"
            ),
        ));
    };
    let digest = release_secret_and_config_map(&claim, ctx).await?;
    crash_point("adoption-released");
    let adopted = convert_object_bucket(&buckets, &found, &adoption, digest, ctx).await?;
    crash_point("adoption-converted");
    record_on_claim(claim, &adopted, ctx).await
}

fn refused(bucket: &str, reason: &str, message: String) -> Error {
    Error::Backend {
        operation: Operation::Provision,
        bucket: bucket.to_string(),
        source: BackendError::permanent(reason, message),
        hint: "",
    }
}

/// Step 1: answers the digest of the Secret's credentials (none when it holds no usable key).
async fn release_secret_and_config_map<P>(
    claim: &ObjectBucketClaim,
    ctx: &Context<P>,
) -> Result<Option<String>, Error> {
    let namespace = claim.namespace().unwrap_or_default();
    let uid = claim.uid().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
    let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &namespace);
    let name = claim.name_any();
    let secret = take_over(&secrets, &name, &uid, &ctx.name, Error::ForeignSecret).await?;
    if let Some(secret) = &secret {
        ctx.caches.secrets.wrote(secret);
    }
    if let Some(config_map) =
        take_over(&config_maps, &name, &uid, &ctx.name, Error::ForeignConfigMap).await?
    {
        ctx.caches.config_maps.wrote(&config_map);
    }
    Ok(secret.and_then(|s| s.credentials()).map(hex::encode))
}

/// Our label on, the library's label and finalizer off, nothing else changed; `None` when there
/// is no such object. One the claim does not control is not its own, whatever it says.
async fn take_over<K>(
    api: &Api<K>,
    name: &str,
    claim_uid: &str,
    provisioner: &str,
    foreign: fn(String) -> Error,
) -> Result<Option<K>, Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let Some(object) = api.get_opt(name).await? else { return Ok(None) };
    if !controlled_by(&object, claim_uid) {
        return Err(foreign(name.to_string()));
    }
    let ours = object.labels().get(LABEL_PROVISIONER) == Some(&label_value(provisioner));
    let held = object.finalizers().iter().any(|f| f == FINALIZER);
    if ours && !held && !object.labels().contains_key(legacy::LABEL_PROVISIONER) {
        return Ok(Some(object));
    }
    // Replaced whole (deploy/ grants update, not patch, on Secrets and ConfigMaps), guarded by
    // the resourceVersion just read: the data goes back exactly as it was.
    let mut object = object;
    object.labels_mut().remove(legacy::LABEL_PROVISIONER);
    object.labels_mut().insert(LABEL_PROVISIONER.into(), label_value(provisioner));
    object.finalizers_mut().retain(|f| f != FINALIZER);
    Ok(Some(api.replace(name, &PostParams::default(), &object).await?))
}

/// Step 2: the ObjectBucket as this controller writes one, kept under its name.
async fn convert_object_bucket<P>(
    buckets: &Api<ObjectBucket>,
    found: &ObjectBucket,
    adoption: &Adoption,
    digest: Option<String>,
    ctx: &Context<P>,
) -> Result<Arc<ObjectBucket>, Error> {
    let source = match adoption.bucket_created_by_claim {
        true => BucketSource::New,
        false => BucketSource::Existing,
    };
    let endpoint = &adoption.endpoint;
    let mut recorded = BTreeMap::from([
        (annotations::BUCKET_SOURCE, Value::from(source.as_str())),
        (annotations::ENDPOINT_SCHEME, endpoint.scheme.clone().into()),
        (annotations::PROVISIONER, ctx.name.clone().into()),
        (annotations::ACCESS_MODE, AccessMode::ReadWrite.as_str().into()),
        (annotations::ADOPTED_FROM, legacy::label_value(&ctx.name).into()),
    ]);
    // No digest (no usable key in the Secret): the bound path issues credentials again.
    recorded.insert(annotations::CREDENTIALS_DIGEST, digest.map_or(Value::Null, Value::from));
    let bucket_name = found.spec.endpoint.as_ref().map(|e| e.bucket_name.clone());
    // The library's keys stay in additionalState beside the backend's (a merge patch keeps
    // them): the previous provisioner, run again, still finds what it needs to clean up.
    let patch = json!({
        "metadata": {
            "resourceVersion": found.resource_version(),
            "labels": {
                LABEL_PROVISIONER: label_value(&ctx.name),
                legacy::LABEL_PROVISIONER: Value::Null,
            },
            "annotations": recorded,
            "finalizers": [FINALIZER],
        },
        "spec": {
            "endpoint": {
                "bucketHost": endpoint.host,
                "bucketPort": endpoint.port,
                "bucketName": bucket_name,
                "region": endpoint.region,
                "subRegion": endpoint.sub_region,
                // The library writes {"": ""}, which is no configuration.
                "additionalConfig": Value::Null,
            },
            "additionalState": adoption.additional_state,
        },
    });
    let name = found.name_any();
    let adopted = buckets.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(ctx.caches.buckets.wrote(adopted))
}

/// Step 3: the claim is told that it was adopted, then records what it would have recorded had
/// it been provisioned here.
async fn record_on_claim<P>(
    claim: Arc<ObjectBucketClaim>,
    adopted: &ObjectBucket,
    ctx: &Context<P>,
) -> Result<Arc<ObjectBucketClaim>, Error> {
    let source = adopted.annotations().get(annotations::BUCKET_SOURCE).cloned();
    let policy = reclaim_policy_str(adopted.spec.reclaim_policy.unwrap_or_default());
    let name = adopted.name_any();
    let mut finalizers = claim.finalizers().to_vec();
    if !finalizers.iter().any(|f| f == FINALIZER) {
        finalizers.push(FINALIZER.into());
    }
    let patch = json!({
        "metadata": {
            "resourceVersion": claim.resource_version(),
            "finalizers": finalizers,
            "labels": { legacy::LABEL_PROVISIONER: Value::Null },
            "annotations": {
                annotations::PROVISIONER: ctx.name,
                annotations::BUCKET_SOURCE: source,
                annotations::RECLAIM_POLICY: policy,
            },
        },
        "spec": { "objectBucketName": name },
    });
    // Told before it is recorded: a stop in between tells it twice, never not at all.
    let bucket = adopted.spec.endpoint.as_ref().map(|e| e.bucket_name.as_str()).unwrap_or_default();
    let kept = match source.as_deref() {
        Some("new") => "the bucket is the claim's, as the previous provisioner's records show",
        _ => "only the claim's access is the claim's to remove",
    };
    let message = format!(
        "adopted ObjectBucket {name:?} of bucket {bucket:?} from the previous provisioner of \
         this name; the claim's Secret keeps its key, and {kept}"
    );
    tracing::info!(claim = %key(&*claim), object_bucket = %name, "{message}");
    ctx.event(&claim, EventType::Normal, "Adopted", &message, Operation::Provision).await;
    crash_point("adoption-told");
    let api: Api<ObjectBucketClaim> =
        Api::namespaced(ctx.client.clone(), &claim.namespace().unwrap_or_default());
    let params = PatchParams::default();
    let updated = api.patch(&claim.name_any(), &params, &Patch::Merge(&patch)).await?;
    Ok(ctx.caches.claims.wrote(updated))
}

/// Environment variable naming a step of the adoption at which the process stops dead (as a
/// SIGKILL would stop it), for tests that check the next run resumes there: `adoption-released`
/// (after step 1), `adoption-converted` (after step 2), `adoption-told` (step 3's Event sent,
/// the claim not yet written). Never set in production.
pub(crate) const CRASH_AT_ENV: &str = "BUCKET_PROVISIONER_CRASH_AT";

fn crash_point(step: &str) {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    if AT.get_or_init(|| std::env::var(CRASH_AT_ENV).ok()).as_deref() == Some(step) {
        tracing::error!(step, "stopping dead at a crash point ({CRASH_AT_ENV})");
        std::process::abort();
    }
}
