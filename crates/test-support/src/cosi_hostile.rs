//! Random hostile COSI tenants (v1alpha1, under the upstream controller and sidecar): a tenant
//! whose rights end at its own namespace creates and deletes BucketClaims (of its own, of
//! classes that do not exist, and of the victim's Bucket by `existingBucketName`), BucketAccesses
//! of every class (keys, read-only, IAM with any ServiceAccount name) on any of its claims,
//! Secrets forged where an access's credentials will go, and annotations on its claims that the
//! driver reads on static Buckets. Each driver's test plays fixed seeds with [`play`] and checks
//! what its victim kept and [`granted_to_victims_bucket`].
//!
//! `HOSTILE_FUZZ_SEEDS` and `HOSTILE_FUZZ_RUNS` explore more, as for claims
//! ([`crate::hostile_tenant::seeds`]); a failure's seed replays it.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use proptest::prelude::*;
use serde_json::json;

use crate::CosiTenant;
use crate::cosi::{CosiVersion, create};
use crate::hostile_tenant::generated;

/// How many actions one run takes.
pub const ACTIONS: usize = 14;
/// How many claim, access and Secret names a run reuses, so that actions land on each other.
pub const NAMES: usize = 3;

/// The annotation with which an operator shares a static Bucket with namespaces; a tenant
/// writing it on its own objects proves nothing.
const ALLOWED_NAMESPACES: &str = "cosi.objectbucket.io/allowed-namespaces";

/// Which BucketClass a claim names.
#[derive(Clone, Copy, Debug)]
pub enum ClassPick {
    /// The operator's, deleting buckets with their claims.
    Delete,
    /// The operator's, keeping them.
    Retain,
    /// One that does not exist.
    Missing,
}

/// Which BucketAccessClass an access names.
#[derive(Clone, Copy, Debug)]
pub enum AccessPick {
    /// Keys.
    Keys,
    /// Read-only keys.
    ReadOnly,
    /// `authenticationType: IAM`.
    Iam,
}

/// Which ServiceAccount an access of IAM names.
#[derive(Clone, Copy, Debug)]
pub enum AccountPick {
    /// None at all.
    None,
    /// `default`, which every namespace has.
    Default,
    /// The victim's, by its bare name (it exists only in the victim's namespace).
    VictimsName,
    /// The victim's, written as its full subject.
    VictimsSubject,
}

/// One thing a hostile COSI tenant does.
#[derive(Clone, Debug)]
#[allow(missing_docs)]
pub enum CosiAction {
    /// BucketClaim number `claim` of `class`.
    Claim { claim: usize, class: ClassPick },
    /// BucketClaim number `claim` naming the victim's Bucket (`existingBucketName`).
    ClaimVictimsBucket { claim: usize },
    /// BucketAccess number `access` to claim number `claim`, its credentials in Secret number
    /// `secret`.
    Access { access: usize, claim: usize, class: AccessPick, secret: usize, account: AccountPick },
    /// A Secret number `secret` made before any access writes it, holding a BucketInfo that
    /// names the victim's bucket.
    ForgeSecret { secret: usize },
    /// The static-sharing annotation, naming the tenant's namespace, on claim number `claim`.
    AnnotateClaim { claim: usize },
    /// Deletes claim number `claim`.
    DeleteClaim { claim: usize },
    /// Deletes access number `access`.
    DeleteAccess { access: usize },
}

fn action() -> impl Strategy<Value = CosiAction> {
    let name = || 0..NAMES;
    let class =
        prop_oneof![Just(ClassPick::Delete), Just(ClassPick::Retain), Just(ClassPick::Missing)];
    let access_class =
        prop_oneof![Just(AccessPick::Keys), Just(AccessPick::ReadOnly), Just(AccessPick::Iam)];
    let account = prop_oneof![
        Just(AccountPick::None),
        Just(AccountPick::Default),
        Just(AccountPick::VictimsName),
        Just(AccountPick::VictimsSubject),
    ];
    prop_oneof![
        1 => (name(), class).prop_map(|(claim, class)| CosiAction::Claim { claim, class }),
        3 => name().prop_map(|claim| CosiAction::ClaimVictimsBucket { claim }),
        4 => (name(), name(), access_class, name(), account).prop_map(
            |(access, claim, class, secret, account)| CosiAction::Access {
                access,
                claim,
                class,
                secret,
                account
            }
        ),
        1 => name().prop_map(|secret| CosiAction::ForgeSecret { secret }),
        1 => name().prop_map(|claim| CosiAction::AnnotateClaim { claim }),
        1 => name().prop_map(|claim| CosiAction::DeleteClaim { claim }),
        1 => name().prop_map(|access| CosiAction::DeleteAccess { access }),
    ]
}

/// The actions of run `seed`, the same on every machine.
pub fn actions(seed: u64) -> Vec<CosiAction> {
    generated(prop::collection::vec(action(), ACTIONS), seed)
}

/// What the tenant knows of the cluster and its victim.
pub struct CosiTarget {
    /// The operator's BucketClass deleting buckets with their claims.
    pub delete_class: String,
    /// The operator's BucketClass keeping them.
    pub retain_class: String,
    /// The operator's BucketAccessClass of keys.
    pub access_class: String,
    /// The operator's BucketAccessClass of read-only keys.
    pub read_only_class: String,
    /// The operator's BucketAccessClass of `authenticationType: IAM`.
    pub iam_class: String,
    /// The victim's Bucket object.
    pub victim_bucket: String,
    /// The victim's namespace.
    pub victim_namespace: String,
    /// A ServiceAccount of the victim's namespace.
    pub victim_account: String,
}

fn claim_name(n: usize) -> String {
    format!("claim-{n}")
}

fn access_name(n: usize) -> String {
    format!("access-{n}")
}

fn secret_name(n: usize) -> String {
    format!("creds-{n}")
}

/// Does `action` as `tenant`; refusals (by the apiserver or anyone) are part of the game.
pub async fn act(target: &CosiTarget, tenant: &CosiTenant, action: &CosiAction) {
    let version = CosiVersion::V1Alpha1;
    let ns = &tenant.namespace;
    let claims = version.api(&tenant.client, "BucketClaim", Some(ns));
    let accesses = version.api(&tenant.client, "BucketAccess", Some(ns));
    match action {
        CosiAction::Claim { claim, class } => {
            let class = match class {
                ClassPick::Delete => target.delete_class.clone(),
                ClassPick::Retain => target.retain_class.clone(),
                ClassPick::Missing => format!("{}-missing", target.delete_class),
            };
            let _ = create(&claims, &version.claim(ns, &claim_name(*claim), &class)).await;
        }
        CosiAction::ClaimVictimsBucket { claim } => {
            let object = version.claim_of_existing(ns, &claim_name(*claim), &target.victim_bucket);
            let _ = create(&claims, &object).await;
        }
        CosiAction::Access { access, claim, class, secret, account } => {
            let class = match class {
                AccessPick::Keys => &target.access_class,
                AccessPick::ReadOnly => &target.read_only_class,
                AccessPick::Iam => &target.iam_class,
            };
            let mut object = version.access(
                ns,
                &access_name(*access),
                class,
                &claim_name(*claim),
                &secret_name(*secret),
                "ReadWrite",
            );
            let account = match account {
                AccountPick::None => None,
                AccountPick::Default => Some("default".to_owned()),
                AccountPick::VictimsName => Some(target.victim_account.clone()),
                AccountPick::VictimsSubject => Some(format!(
                    "system:serviceaccount:{}:{}",
                    target.victim_namespace, target.victim_account
                )),
            };
            if let Some(account) = account {
                object.data["spec"]["serviceAccountName"] = account.into();
            }
            let _ = create(&accesses, &object).await;
        }
        CosiAction::ForgeSecret { secret } => {
            let info = json!({ "apiVersion": "objectstorage.k8s.io/v1alpha1", "kind": "BucketInfo",
                "spec": { "bucketName": target.victim_bucket, "authenticationType": "Key",
                    "protocols": ["s3"],
                    "secretS3": { "endpoint": "http://127.0.0.1:1", "region": "us-east-1",
                        "accessKeyID": "forged", "accessSecretKey": "forged" } } });
            let forged = Secret {
                metadata: ObjectMeta { name: Some(secret_name(*secret)), ..Default::default() },
                data: Some(BTreeMap::from([(
                    "BucketInfo".to_owned(),
                    ByteString(info.to_string().into_bytes()),
                )])),
                ..Default::default()
            };
            let secrets: Api<Secret> = Api::namespaced(tenant.client.clone(), ns);
            let _ = secrets.create(&PostParams::default(), &forged).await;
        }
        CosiAction::AnnotateClaim { claim } => {
            let patch = json!({ "metadata": { "annotations": { ALLOWED_NAMESPACES: ns } } });
            let params = PatchParams::default();
            let _ = claims.patch(&claim_name(*claim), &params, &Patch::Merge(&patch)).await;
        }
        CosiAction::DeleteClaim { claim } => {
            let _ = claims.delete(&claim_name(*claim), &DeleteParams::default()).await;
        }
        CosiAction::DeleteAccess { access } => {
            let _ = accesses.delete(&access_name(*access), &DeleteParams::default()).await;
        }
    }
}

/// Plays run `seed` as `tenant`, then gives the controller, sidecar and driver `settle` to act
/// on it all.
pub async fn play(target: &CosiTarget, tenant: &CosiTenant, seed: u64, settle: Duration) {
    let actions = actions(seed);
    eprintln!("seed {seed}: {actions:#?}");
    for action in &actions {
        act(target, tenant, action).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    tokio::time::sleep(settle).await;
}

/// The tenant's BucketAccesses granted on a claim bound to the victim's Bucket, by name: each
/// is the attack succeeding.
pub async fn granted_to_victims_bucket(target: &CosiTarget, tenant: &CosiTenant) -> Vec<String> {
    let version = CosiVersion::V1Alpha1;
    let ns = &tenant.namespace;
    let claims = version.api(&tenant.client, "BucketClaim", Some(ns));
    let accesses: Api<DynamicObject> = version.api(&tenant.client, "BucketAccess", Some(ns));
    let mut found = Vec::new();
    for access in accesses.list(&Default::default()).await.expect("listing accesses").items {
        if !version.access_ready(&access) {
            continue;
        }
        let claim = access.data["spec"]["bucketClaimName"].as_str().unwrap_or_default();
        let Some(claim) = claims.get_opt(claim).await.ok().flatten() else { continue };
        if version.claim_bucket(&claim).as_deref() == Some(target.victim_bucket.as_str()) {
            found.push(access.metadata.name.clone().unwrap_or_default());
        }
    }
    found
}
