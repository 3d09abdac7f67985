//! A tenant's own Secret or ConfigMap under its claim's name, against the real
//! `hostpath-bucket-provisioner`: the claim is refused and, while it is, holds no key, bucket or
//! ObjectBucket, and leaves none behind once deleted; the tenant's object stays as it was.

mod harness;

use std::collections::BTreeMap;

use bucket_api::{ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec};
use harness::*;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};

/// The tenant's own object in the way of its claim.
#[derive(Clone, Copy)]
enum InTheWay {
    Secret,
    ConfigMap,
}

fn data() -> BTreeMap<String, String> {
    BTreeMap::from([("app.conf".to_string(), "the tenant's own".to_string())])
}

/// What the tenant made, as it reads back: its data, labels and owners.
async fn read_back(tenant: &Tenant, name: &str, kind: InTheWay) -> Option<String> {
    let meta_and_data = |meta: ObjectMeta, data: BTreeMap<String, String>| {
        format!("{data:?} labels {:?} owners {:?}", meta.labels, meta.owner_references)
    };
    match kind {
        InTheWay::Secret => {
            let secret = Api::<Secret>::namespaced(tenant.client.clone(), &tenant.ns);
            let found = secret.get_opt(name).await.unwrap()?;
            let data = found.data.unwrap_or_default().into_iter();
            let data = data.map(|(k, v)| (k, String::from_utf8(v.0).unwrap())).collect();
            Some(meta_and_data(found.metadata, data))
        }
        InTheWay::ConfigMap => {
            let maps = Api::<ConfigMap>::namespaced(tenant.client.clone(), &tenant.ns);
            let found = maps.get_opt(name).await.unwrap()?;
            Some(meta_and_data(found.metadata, found.data.unwrap_or_default()))
        }
    }
}

async fn put_in_the_way(tenant: &Tenant, name: &str, kind: InTheWay) {
    let metadata = ObjectMeta { name: Some(name.into()), ..Default::default() };
    let post = PostParams::default();
    match kind {
        InTheWay::Secret => {
            let secret = Secret { metadata, string_data: Some(data()), ..Default::default() };
            let secrets = Api::<Secret>::namespaced(tenant.client.clone(), &tenant.ns);
            secrets.create(&post, &secret).await.unwrap();
        }
        InTheWay::ConfigMap => {
            let map = ConfigMap { metadata, data: Some(data()), ..Default::default() };
            let maps = Api::<ConfigMap>::namespaced(tenant.client.clone(), &tenant.ns);
            maps.create(&post, &map).await.unwrap();
        }
    }
}

/// Every key the store holds for the claim with `uid`, as (access key id, secret).
fn stored_keys(env: &Env, uid: &str) -> Vec<(String, String)> {
    let dir = env.root.path().join(".provisioner/keys");
    let user = format!("obc-{uid}");
    let mut keys = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let key: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        if key["user_id"] == user.as_str() {
            let field = |name: &str| key[name].as_str().unwrap().to_string();
            keys.push((field("access_key_id"), field("secret_access_key")));
        }
    }
    keys
}

/// The claim holds nothing it could use: no key in the store, no working key in a Secret of
/// its name, no ObjectBucket, no bucket directory.
async fn holds_nothing(env: &Env, tenant: &Tenant, claim: &ObjectBucketClaim) {
    let uid = claim.uid().unwrap();
    let bucket = claim.spec.bucket_name.clone().expect("the bucket name is recorded");
    let keys = stored_keys(env, &uid);
    let ids: Vec<&String> = keys.iter().map(|(id, _)| id).collect();
    assert!(keys.is_empty(), "the store holds keys of the refused claim: {ids:?}");
    if let Some(secret) = tenant.secret(&claim.name_any()).await {
        let data = secret.data.unwrap_or_default();
        if let (Some(id), Some(key)) =
            (data.get("AWS_ACCESS_KEY_ID"), data.get("AWS_SECRET_ACCESS_KEY"))
        {
            let (id, key) = (String::from_utf8_lossy(&id.0), String::from_utf8_lossy(&key.0));
            let s3 = s3_with(env.port, &id, &key);
            let put = put(&s3, &bucket, "squatted", b"x").await;
            assert_eq!(put, Err("InvalidAccessKeyId".into()), "a Secret holds a working key");
        }
    }
    let obs: Api<ObjectBucket> = Api::all(env.client.clone());
    let bound: Vec<String> = obs
        .list(&Default::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|ob| ob.spec.claim_ref.as_ref().and_then(|r| r.uid.as_deref()) == Some(&uid))
        .map(|ob| ob.name_any())
        .collect();
    assert!(bound.is_empty(), "ObjectBuckets left for the refused claim: {bound:?}");
    assert!(!env.bucket_dir(&bucket).exists(), "bucket {bucket} is left on disk");
}

async fn refused_while_in_the_way(kind: InTheWay, name: &str, reason: &str) {
    let env = Env::new(&format!("fn-{name}")).await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[], "Delete").await;
    let tenant = env.scoped_tenant(&format!("fn-{name}-t")).await;
    put_in_the_way(&tenant, name, kind).await;
    let before = read_back(&tenant, name, kind).await;

    let spec = ObjectBucketClaimSpec {
        storage_class_name: class,
        generate_bucket_name: Some(name.into()),
        ..Default::default()
    };
    tenant.create(name, spec).await;
    let claim = tenant.wait(name, ClaimPhase::Failed, reason).await;
    holds_nothing(&env, &tenant, &claim).await;
    let other = match kind {
        InTheWay::Secret => InTheWay::ConfigMap,
        InTheWay::ConfigMap => InTheWay::Secret,
    };
    assert_eq!(read_back(&tenant, name, other).await, None, "nothing written for it");
    assert_eq!(read_back(&tenant, name, kind).await, before, "the tenant's own, untouched");

    tenant.delete(name).await;
    holds_nothing(&env, &tenant, &claim).await;
    assert_eq!(read_back(&tenant, name, kind).await, before, "the tenant's own, untouched");
}

#[tokio::test]
async fn a_claim_whose_config_map_name_is_taken_holds_no_key_and_leaves_nothing() {
    refused_while_in_the_way(InTheWay::ConfigMap, "squat2", "ForeignConfigMap").await;
}

#[tokio::test]
async fn a_claim_whose_secret_name_is_taken_holds_no_key_and_leaves_nothing() {
    refused_while_in_the_way(InTheWay::Secret, "squat", "ForeignSecret").await;
}
