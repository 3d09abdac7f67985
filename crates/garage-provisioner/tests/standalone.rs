//! The COSI front's buckets and keys on a real three-node Garage cluster: buckets with no key,
//! keys of their own on one or several buckets, and the ownership rules between owners and
//! between the two fronts.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use bucket_api::{ObjectBucketClaim, ObjectBucketClaimSpec, ReclaimPolicy};
use bucket_provisioner::{
    AccessMode, BackendError, BucketOptions, Credentials, Provisioner, Removed,
};
use garage_provisioner::admin::{Admin, AdminHttp};
use garage_provisioner::api::{BucketInfo, KeyListItem, Permissions};
use garage_provisioner::backend::standalone::key_name;
use garage_provisioner::empty::{http_client, s3_client};
use garage_provisioner::names::{claim_key_id, service_key_id};
use garage_provisioner::store::{Store, creator};
use garage_provisioner::{AdminToken, GarageProvisioner, SecretRef, Settings};
use kube::api::ObjectMeta;
use test_support::garage::{GARAGE_REGION, GarageCluster};
use test_support::standalone_requests::{key_request, new_bucket};
use test_support::unique_suffix;

/// The admin token held in memory: these tests need no Kubernetes.
struct FixedToken(String);

#[async_trait]
impl AdminToken for FixedToken {
    async fn admin_token(&self, _: &SecretRef) -> Result<String, BackendError> {
        Ok(self.0.clone())
    }
}

struct World {
    garage: GarageCluster,
    backend: GarageProvisioner,
    http: AdminHttp,
}

impl World {
    async fn start() -> Self {
        let garage = GarageCluster::start(3).await.expect("a three-node Garage cluster");
        let backend = GarageProvisioner::new(Arc::new(FixedToken(garage.admin_token.clone())))
            .with_standalone(&parameters(&garage))
            .expect("the driver's parameters are valid");
        World { garage, backend, http: AdminHttp::new() }
    }

    fn settings(&self) -> Settings {
        Settings::from_parameters(&parameters(&self.garage)).unwrap()
    }

    fn s3(&self, keys: &Credentials) -> aws_sdk_s3::Client {
        s3_client(&self.settings(), keys, &http_client())
    }

    async fn bucket_info(&self, name: &str) -> Option<BucketInfo> {
        let settings = self.settings();
        let admin = Admin {
            http: &self.http,
            endpoints: &settings.admin,
            token: &self.garage.admin_token,
            secret: &settings.token_secret,
        };
        match admin.get::<BucketInfo>("GetBucketInfo", &[("globalAlias", name)]).await {
            Ok(info) => Some(info),
            Err(e) if e.code() == Some("NoSuchBucket") => None,
            Err(e) => panic!("GetBucketInfo {name}: {e:?}"),
        }
    }

    async fn key_ids(&self) -> Vec<String> {
        let settings = self.settings();
        let admin = Admin {
            http: &self.http,
            endpoints: &settings.admin,
            token: &self.garage.admin_token,
            secret: &settings.token_secret,
        };
        let keys: Vec<KeyListItem> = admin.get("ListKeys", &[]).await.unwrap();
        keys.into_iter().map(|k| k.id).collect()
    }
}

fn parameters(garage: &GarageCluster) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("adminEndpoint".into(), garage.nodes[0].admin_url()),
        ("endpoint".into(), garage.nodes[0].s3_url()),
        ("region".into(), GARAGE_REGION.into()),
        ("secretName".into(), "garage-admin".into()),
        ("secretNamespace".into(), "infra".into()),
    ])
}

fn reason(error: &BackendError) -> &str {
    match error {
        BackendError::Permanent { reason, .. } => reason,
        BackendError::Transient { .. } => "transient",
    }
}

async fn put(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<(), String> {
    let put = s3.put_object().bucket(bucket).key(key).body(key.as_bytes().to_vec().into());
    put.send().await.map(drop).map_err(|e| format!("{e:?}"))
}

async fn read(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<Vec<u8>, String> {
    let got = s3.get_object().bucket(bucket).key(key).send().await.map_err(|e| format!("{e:?}"))?;
    Ok(got.body.collect().await.unwrap().into_bytes().to_vec())
}

#[tokio::test]
async fn buckets_are_created_once_per_owner_with_quotas_and_deleted_only_by_it() {
    let w = World::start().await;
    let name = format!("cosi-{}", unique_suffix());
    let mut asked = new_bucket(&name, &[("maxObjects", "10")]);
    asked.quotas.max_objects = Some(10);
    let first = w.backend.create_bucket(&asked).await.unwrap();
    assert_eq!(first, w.backend.create_bucket(&asked).await.expect("a retry answers the same"));
    assert_eq!(first.bucket_name, name);
    assert_eq!(first.endpoint.port, w.garage.nodes[0].s3_port);
    let info = w.bucket_info(&name).await.expect("the bucket is in Garage");
    assert_eq!(info.quotas.max_objects, Some(10));
    assert_eq!(
        creator(&info, &service_key_id()),
        Some((asked.owner_id.clone(), ReclaimPolicy::Delete))
    );
    assert!(
        info.keys.iter().all(|k| k.access_key_id == service_key_id()),
        "a bucket comes with no key"
    );

    let other = new_bucket(&name, &[("maxObjects", "20")]);
    let error = w.backend.create_bucket(&other).await.unwrap_err();
    assert!(error.is_name_taken(), "{error}");
    assert_eq!(w.backend.delete_bucket(&name, &other.owner_id).await.unwrap(), Removed::AccessOnly);
    assert!(w.bucket_info(&name).await.is_some(), "another owner deletes nothing");

    // The creator's deletion empties and removes it; again is done.
    let writer = key_request("ba-writer", &[(&name, AccessMode::ReadWrite)]);
    let issued = w.backend.issue_key(&writer).await.unwrap();
    put(&w.s3(&issued.credentials), &name, "data.txt").await.unwrap();
    assert_eq!(w.backend.delete_bucket(&name, &asked.owner_id).await.unwrap(), Removed::Bucket);
    assert!(w.bucket_info(&name).await.is_none());
    assert_eq!(w.backend.delete_bucket(&name, &asked.owner_id).await.unwrap(), Removed::Bucket);
    // A bucket made again under that name is not reached by the old key.
    w.backend.create_bucket(&new_bucket(&name, &[])).await.unwrap();
    assert!(put(&w.s3(&issued.credentials), &name, "again.txt").await.is_err());
}

#[tokio::test]
async fn keys_reach_their_buckets_in_their_modes_until_revoked() {
    let w = World::start().await;
    let (a, b) = (format!("keys-a-{}", unique_suffix()), format!("keys-b-{}", unique_suffix()));
    for name in [&a, &b] {
        w.backend.create_bucket(&new_bucket(name, &[])).await.unwrap();
    }

    let both = key_request("ba-both", &[(&a, AccessMode::ReadWrite), (&b, AccessMode::ReadWrite)]);
    let issued = w.backend.issue_key(&both).await.unwrap();
    assert_eq!(issued.credentials.access_key_id, claim_key_id(&both.owner_id));
    let s3 = w.s3(&issued.credentials);
    for bucket in [&a, &b] {
        put(&s3, bucket, "hello.txt").await.unwrap();
        assert_eq!(read(&s3, bucket, "hello.txt").await.unwrap(), b"hello.txt");
        let listed = s3.list_objects_v2().bucket(bucket).send().await.unwrap();
        assert_eq!(listed.contents().len(), 1);
    }
    let again = w.backend.issue_key(&both).await.expect("a retry succeeds");
    assert_eq!(again, issued, "a retry answers the same key");

    let reader = key_request("ba-reader", &[(&a, AccessMode::ReadOnly)]);
    let read_only = w.s3(&w.backend.issue_key(&reader).await.unwrap().credentials);
    assert_eq!(read(&read_only, &a, "hello.txt").await.unwrap(), b"hello.txt");
    assert!(put(&read_only, &a, "no.txt").await.is_err(), "ReadOnly cannot write");
    assert!(read(&read_only, &b, "hello.txt").await.is_err(), "nor reach another bucket");
    let shipper = key_request("ba-shipper", &[(&a, AccessMode::WriteOnly)]);
    let error = w.backend.issue_key(&shipper).await.unwrap_err();
    assert_eq!(reason(&error), "AccessModeNotSupported", "{error}");

    // The same access asking for anything else is refused, and the key stays as it was.
    let narrower =
        key_request("ba-both", &[(&a, AccessMode::ReadOnly), (&b, AccessMode::ReadWrite)]);
    let error = w.backend.issue_key(&narrower).await.unwrap_err();
    assert!(error.is_access_conflict(), "{error}");
    put(&s3, &a, "still.txt").await.expect("the key is as it was");
    let mut limited = key_request("ba-limited", &[(&a, AccessMode::ReadWrite)]);
    limited.quotas.max_bytes = Some(1000);
    assert_eq!(reason(&w.backend.issue_key(&limited).await.unwrap_err()), "InvalidParameters");

    // Revoking stops the key, and again is done.
    w.backend.revoke_key(&both.owner_id).await.unwrap();
    assert!(put(&s3, &a, "after.txt").await.is_err(), "a revoked key is refused");
    assert!(!w.key_ids().await.contains(&issued.credentials.access_key_id));
    w.backend.revoke_key(&both.owner_id).await.expect("revoking again is done");
    assert!(!w.key_ids().await.contains(&claim_key_id(&limited.owner_id)));
}

#[tokio::test]
async fn claims_buckets_are_out_of_reach_and_operators_buckets_are_found() {
    let w = World::start().await;
    let name = format!("claimed-{}", unique_suffix());
    let claimed = claim_options(&name, &parameters(&w.garage));
    w.backend.provision(&claimed).await.unwrap();

    let error = w.backend.existing_bucket(&name, &BTreeMap::new()).await.unwrap_err();
    assert!(error.is_not_found(), "{error}");
    let intruder = key_request("ba-intruder", &[(&name, AccessMode::ReadOnly)]);
    let error = w.backend.issue_key(&intruder).await.unwrap_err();
    assert!(error.is_not_found(), "{error}");
    assert!(!w.key_ids().await.contains(&claim_key_id(&intruder.owner_id)));
    assert!(w.backend.create_bucket(&new_bucket(&name, &[])).await.unwrap_err().is_name_taken());
    let error = w.backend.delete_bucket(&name, &claimed.user_id).await.unwrap_err();
    assert_eq!(reason(&error), "InvalidParameters", "a claim's id is no COSI owner: {error}");
    assert!(w.bucket_info(&name).await.is_some());
    let missing = w.backend.existing_bucket("no-such-bucket", &BTreeMap::new()).await;
    assert!(missing.unwrap_err().is_not_found());

    // An operator's bucket (no record) is found, reached, and never deleted.
    let static_name = format!("static-{}", unique_suffix());
    w.garage.cli(0, &["bucket", "create", &static_name]).await.unwrap();
    let found = w.backend.existing_bucket(&static_name, &BTreeMap::new()).await.unwrap();
    assert_eq!(found.bucket_name, static_name);
    let writer = key_request("ba-static", &[(&static_name, AccessMode::ReadWrite)]);
    let s3 = w.s3(&w.backend.issue_key(&writer).await.unwrap().credentials);
    put(&s3, &static_name, "keep.txt").await.unwrap();
    let owner = new_bucket(&static_name, &[]).owner_id;
    let removed = w.backend.delete_bucket(&static_name, &owner).await.unwrap();
    assert_eq!(removed, Removed::AccessOnly);
    assert_eq!(read(&s3, &static_name, "keep.txt").await.unwrap(), b"keep.txt");
}

/// What the library hands `provision` for an objectbucket.io claim of bucket `name`.
fn claim_options(name: &str, parameters: &BTreeMap<String, String>) -> BucketOptions {
    let uid = format!("0000{}-0000-4000-8000-000000000000", unique_suffix());
    let mut claim = ObjectBucketClaim::new(
        "c",
        ObjectBucketClaimSpec {
            storage_class_name: "class".into(),
            bucket_name: Some(name.into()),
            ..Default::default()
        },
    );
    claim.metadata = ObjectMeta {
        name: Some("c".into()),
        namespace: Some("ns".into()),
        uid: Some(uid.clone()),
        ..Default::default()
    };
    BucketOptions {
        bucket_name: name.into(),
        user_id: bucket_provisioner::user_id_for_claim(&uid),
        reclaim_policy: ReclaimPolicy::Delete,
        parameters: parameters.clone(),
        additional_config: Default::default(),
        access_mode: AccessMode::ReadWrite,
        storage_class_name: "class".into(),
        web_identity: None,
        claim: claim.into(),
    }
}

#[tokio::test]
async fn a_cut_off_grant_is_finished_and_racing_requests_of_one_access_get_it_once() {
    let w = World::start().await;
    let (a, b) = (format!("cut-a-{}", unique_suffix()), format!("cut-b-{}", unique_suffix()));
    for name in [&a, &b] {
        w.backend.create_bucket(&new_bucket(name, &[])).await.unwrap();
    }
    // What an attempt stopped right after ImportKey leaves: the key, named, with no permission.
    let access = key_request("ba-cut", &[(&a, AccessMode::ReadWrite)]);
    let asked = BTreeMap::from([(a.clone(), Permissions::READ_WRITE)]);
    let settings = w.settings();
    let admin = Admin {
        http: &w.http,
        endpoints: &settings.admin,
        token: &w.garage.admin_token,
        secret: &settings.token_secret,
    };
    let store = Store { admin };
    let id = claim_key_id(&access.owner_id);
    let made = store.ensure_key(&id, &key_name(&access.owner_id, &asked)).await.unwrap();
    assert!(put(&w.s3(&made), &a, "early.txt").await.is_err(), "no permission yet");
    let issued = w.backend.issue_key(&access).await.expect("the retry finishes it");
    assert_eq!(issued.credentials, made, "the same key");
    put(&w.s3(&issued.credentials), &a, "late.txt").await.unwrap();

    // Two different requests of one access at once: one gets the key, the other a conflict.
    let on_a = key_request("ba-race", &[(&a, AccessMode::ReadWrite)]);
    let on_b = key_request("ba-race", &[(&b, AccessMode::ReadWrite)]);
    let (first, second) = tokio::join!(w.backend.issue_key(&on_a), w.backend.issue_key(&on_b));
    assert!(first.is_ok() != second.is_ok(), "exactly one: {first:?} {second:?}");
    let refused = first.as_ref().err().or(second.as_ref().err()).unwrap();
    assert!(refused.is_access_conflict(), "{refused}");
    let (won, lost) = if first.is_ok() { (&a, &b) } else { (&b, &a) };
    let s3 = w.s3(&first.or(second).unwrap().credentials);
    put(&s3, won, "won.txt").await.unwrap();
    assert!(put(&s3, lost, "lost.txt").await.is_err(), "the loser's bucket is not reached");
}
