//! The Provisioner contract: retry-safe provision and grant, revoke, ownership-checked delete,
//! and the credentials it returns working against the S3 endpoint.

// The endpoint's own test server and clients, shared rather than copied.
#[path = "../../s3-endpoint/tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_sdk_s3::primitives::ByteStream;
use bucket_api::{BucketEndpoint, ObjectBucket, ObjectBucketSpec, ReclaimPolicy};
use bucket_provisioner::{
    BUCKET_NAME_TAKEN, BackendError, BucketOptions, ProvisionedBucket, Provisioner, Removed,
    TenantWritten, user_id_for_claim,
};
use common::{Server, client_for, code};
use hostpath_provisioner::backend::{STATE_IDENTITY, STATE_USER_ID};
use hostpath_provisioner::{BucketStore, HostPathConfig, HostPathProvisioner};
use k8s_openapi::api::core::v1::ObjectReference;
use s3_endpoint::store::KeyMode;

fn config() -> HostPathConfig {
    HostPathConfig { host: "s3.example.svc".into(), port: 7480, region: "us-east-1".into() }
}

fn options(bucket: &str, claim_uid: &str) -> BucketOptions {
    BucketOptions {
        bucket_name: bucket.to_owned(),
        user_id: user_id_for_claim(claim_uid),
        reclaim_policy: ReclaimPolicy::Delete,
        parameters: BTreeMap::new(),
        additional_config: Default::default(),
        access_mode: Default::default(),
        storage_class_name: "hostpath".to_owned(),
        web_identity: None,
        claim: Default::default(),
    }
}

/// The ObjectBucket the library would write after `provisioned`.
fn object_bucket(
    bucket: &str,
    claim_uid: Option<&str>,
    provisioned: &ProvisionedBucket,
) -> ObjectBucket {
    ObjectBucket::new(
        &format!("obc-default-{bucket}"),
        ObjectBucketSpec {
            storage_class_name: "hostpath".to_owned(),
            reclaim_policy: Some(ReclaimPolicy::Delete),
            claim_ref: Some(ObjectReference {
                uid: claim_uid.map(str::to_owned),
                ..ObjectReference::default()
            }),
            endpoint: Some(BucketEndpoint {
                bucket_host: provisioned.endpoint.host.clone(),
                bucket_port: i32::from(provisioned.endpoint.port),
                bucket_name: bucket.to_owned(),
                ..BucketEndpoint::default()
            }),
            additional_state: Some(provisioned.additional_state.clone()),
        },
    )
}

fn assert_permanent(err: &BackendError, reason: &str) {
    match err {
        BackendError::Permanent { reason: r, .. } => assert_eq!(r, reason, "{err}"),
        other => panic!("expected a permanent {reason} error, got {other:?}"),
    }
}

#[tokio::test]
async fn provision_is_retry_safe_and_its_key_works() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let backend = HostPathProvisioner::new(server.store.clone(), config());

    let first = backend.provision(&options("claimed", "uid-1")).await.unwrap();
    let retry = backend.provision(&options("claimed", "uid-1")).await.unwrap();
    assert_eq!(first, retry, "a retried provision returns the same bucket and key");
    assert_eq!(first.endpoint.url(), "http://s3.example.svc:7480");
    assert_eq!(first.endpoint.region, "us-east-1");
    assert_eq!(first.additional_state[STATE_IDENTITY], "test-identity");
    assert_eq!(first.additional_state[STATE_USER_ID], "obc-uid-1");
    assert!(tmp.path().join("buckets/claimed").is_dir());

    let creds = &first.credentials;
    let s3 = client_for(server.addr, &creds.access_key_id, &creds.secret_access_key);
    s3.put_object()
        .bucket("claimed")
        .key("k")
        .body(ByteStream::from_static(b"v"))
        .send()
        .await
        .unwrap();

    // Revoke: the key stops working, the data stays; again is fine.
    let ob = object_bucket("claimed", Some("uid-1"), &first);
    backend.revoke(&ob).await.unwrap();
    backend.revoke(&ob).await.unwrap();
    let e = s3.get_object().bucket("claimed").key("k").send().await.unwrap_err();
    assert_eq!(code(&e), "InvalidAccessKeyId");
    assert!(tmp.path().join("buckets/claimed/k").is_file());

    // Revoke without a claim UID falls back to the recorded user id.
    let second = backend.provision(&options("claimed", "uid-1")).await.unwrap();
    backend.revoke(&object_bucket("claimed", None, &second)).await.unwrap();
    assert!(server.store.keys_for_user("obc-uid-1").is_empty());

    // Delete: data and keys go; again is fine.
    let third = backend.provision(&options("claimed", "uid-1")).await.unwrap();
    backend.delete(&object_bucket("claimed", Some("uid-1"), &third)).await.unwrap();
    assert!(!tmp.path().join("buckets/claimed").exists());
    assert!(server.store.lookup_key(&third.credentials.access_key_id).is_none());
    backend.delete(&object_bucket("claimed", Some("uid-1"), &third)).await.unwrap();

    server.stop().await;
}

#[tokio::test]
async fn grant_needs_an_existing_bucket() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let backend = HostPathProvisioner::new(server.store.clone(), config());

    let err = backend.grant(&options("absent", "uid-2")).await.unwrap_err();
    assert_permanent(&err, "BucketNotFound");

    std::fs::create_dir(tmp.path().join("buckets/existing")).unwrap();
    let granted = backend.grant(&options("existing", "uid-2")).await.unwrap();
    assert_eq!(granted, backend.grant(&options("existing", "uid-2")).await.unwrap());
    let other = backend.grant(&options("existing", "uid-3")).await.unwrap();
    assert_ne!(granted.credentials, other.credentials, "each claim gets its own key");

    let creds = &granted.credentials;
    let s3 = client_for(server.addr, &creds.access_key_id, &creds.secret_access_key);
    s3.put_object()
        .bucket("existing")
        .key("hello")
        .body(ByteStream::from_static(b"hi"))
        .send()
        .await
        .unwrap();

    // Revoking one claim leaves the other's key and the data alone.
    backend.revoke(&object_bucket("existing", Some("uid-2"), &granted)).await.unwrap();
    assert!(server.store.lookup_key(&other.credentials.access_key_id).is_some());
    assert!(tmp.path().join("buckets/existing/hello").is_file());

    // A directory the provisioner did not create is never deleted: only the claim's key goes.
    let removed = backend.delete(&object_bucket("existing", Some("uid-3"), &other)).await.unwrap();
    assert_eq!(removed, Removed::AccessOnly);
    assert!(server.store.lookup_key(&other.credentials.access_key_id).is_none());
    assert!(tmp.path().join("buckets/existing/hello").is_file());

    // Nor is provisioning allowed to adopt it.
    let err = backend.provision(&options("existing", "uid-4")).await.unwrap_err();
    assert_permanent(&err, BUCKET_NAME_TAKEN);

    // A claim sharing the bucket may not set the CORS rules of all who share it.
    let mut with_cors = options("existing", "uid-5");
    with_cors.parameters.insert("allowCors".into(), "true".into());
    let rules = r#"{"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}]}"#;
    with_cors.additional_config = TenantWritten::new([("cors".into(), rules.into())].into());
    let err = backend.grant(&with_cors).await.unwrap_err();
    assert!(err.to_string().contains("only the claim that created a bucket sets them"), "{err}");
    assert!(server.store.keys_for_user("obc-uid-5").is_empty(), "no key for a refused grant");
    assert_eq!(server.store.bucket_cors("existing").await.unwrap(), None);

    server.stop().await;
}

#[tokio::test]
async fn buckets_of_another_identity_are_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let theirs = Arc::new(BucketStore::open(tmp.path().to_owned(), "other-cluster").unwrap());
    let their_backend = HostPathProvisioner::new(theirs.clone(), config());
    let provisioned = their_backend.provision(&options("foreign", "uid-5")).await.unwrap();
    drop((their_backend, theirs));

    let ours = Arc::new(BucketStore::open(tmp.path().to_owned(), "test-identity").unwrap());
    let backend = HostPathProvisioner::new(ours.clone(), config());
    let err =
        backend.delete(&object_bucket("foreign", Some("uid-5"), &provisioned)).await.unwrap_err();
    assert_permanent(&err, "NotOurs");
    assert!(err.to_string().contains("left alone"), "{err}");
    assert!(tmp.path().join("buckets/foreign").is_dir());
    assert!(ours.lookup_key(&provisioned.credentials.access_key_id).is_some());

    // Also when only the ObjectBucket's recorded identity differs from the store's record.
    let mut forged = provisioned.clone();
    forged.additional_state.insert(STATE_IDENTITY.into(), "test-identity".into());
    let err = backend.delete(&object_bucket("foreign", Some("uid-5"), &forged)).await.unwrap_err();
    assert_permanent(&err, "NotOurs");
    assert!(tmp.path().join("buckets/foreign").is_dir());

    let err = backend.provision(&options("foreign", "uid-6")).await.unwrap_err();
    assert_permanent(&err, BUCKET_NAME_TAKEN);
}

#[tokio::test]
async fn unknown_parameters_and_config_keys_are_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(BucketStore::open(tmp.path().to_owned(), "test-identity").unwrap());
    let backend = HostPathProvisioner::new(store, config());

    let mut with_param = options("params", "uid-7");
    with_param.parameters.insert("region".into(), "mars".into());
    assert_permanent(&backend.validate(&with_param).unwrap_err(), "InvalidParameters");
    assert_permanent(&backend.provision(&with_param).await.unwrap_err(), "InvalidParameters");

    let mut with_config = options("params", "uid-7");
    with_config.additional_config = TenantWritten::new([("maxSize".into(), "1Gi".into())].into());
    backend.validate(&with_config).unwrap();
    with_config.additional_config = TenantWritten::new(
        [("maxSize".into(), "1Gi".into()), ("colour".into(), "blue".into())].into(),
    );
    let err = backend.validate(&with_config).unwrap_err();
    assert_permanent(&err, "InvalidParameters");
    assert!(err.to_string().contains("colour"), "{err}");
    assert!(err.to_string().contains("accepts maxObjects, maxSize"), "{err}");

    backend.validate(&options("params", "uid-7")).unwrap();
    assert!(!tmp.path().join("buckets/params").exists());

    let err = backend.provision(&options("Not_Valid", "uid-7")).await.unwrap_err();
    assert_permanent(&err, "InvalidBucketName");
}

#[tokio::test]
async fn rotation_keeps_two_keys_at_most_and_retires_only_the_claims_own() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let backend = HostPathProvisioner::new(server.store.clone(), config());
    let mut narrowed = options("rotated", "uid-1");
    narrowed.access_mode = bucket_api::AccessMode::ReadOnly;
    let first = backend.provision(&narrowed).await.unwrap();
    let other = backend.provision(&options("others", "uid-2")).await.unwrap();
    let bound = object_bucket("rotated", Some("uid-1"), &first);
    let keep = &first.credentials.access_key_id;

    // A lost answer and a retry: the stray key goes, never a third.
    let lost = backend.rotate(&bound, keep).await.unwrap();
    let new = backend.rotate(&bound, keep).await.unwrap();
    assert_ne!(lost, new);
    let store = &server.store;
    assert!(store.lookup_key(&lost.access_key_id).is_none(), "the lost key was removed");
    let keys = store.keys_for_user(&user_id_for_claim("uid-1"));
    assert_eq!(keys.len(), 2, "{keys:?}");
    let issued = store.lookup_key(&new.access_key_id).unwrap();
    assert_eq!(issued.mode, KeyMode::ReadOnly, "the new key has the kept one's mode");

    // Both keys work during the overlap.
    for credentials in [&first.credentials, &new] {
        let s3 =
            client_for(server.addr, &credentials.access_key_id, &credentials.secret_access_key);
        let listed = s3.list_objects_v2().bucket("rotated").send().await;
        assert!(listed.is_ok(), "{:?}", listed.err());
    }
    // Credentials issued again (a lost Secret) are the current key, not a third one.
    let again = backend.provision(&narrowed).await.unwrap();
    assert_eq!(again.credentials, new);

    // A key of another claim is never retired through this claim, and keeping one that is not
    // the claim's rotates nothing.
    backend.retire_key(&bound, &other.credentials.access_key_id).await.unwrap();
    assert!(store.lookup_key(&other.credentials.access_key_id).is_some());
    let refused = backend.rotate(&bound, &other.credentials.access_key_id).await.unwrap_err();
    assert_permanent(&refused, "InvalidArgument");

    backend.retire_key(&bound, keep).await.unwrap();
    backend.retire_key(&bound, keep).await.unwrap();
    let (id, secret) = (&first.credentials.access_key_id, &first.credentials.secret_access_key);
    let refused = client_for(server.addr, id, secret).list_objects_v2().bucket("rotated").send();
    assert_eq!(code(&refused.await.unwrap_err()), "InvalidAccessKeyId");
    assert_eq!(store.keys_for_user(&user_id_for_claim("uid-1")).len(), 1);

    // The next rotation keeps the current key and gets yet another id; revoke takes them all.
    let third = backend.rotate(&bound, &new.access_key_id).await.unwrap();
    assert!(![keep, &new.access_key_id, &lost.access_key_id].contains(&&third.access_key_id));
    backend.revoke(&bound).await.unwrap();
    assert!(store.keys_for_user(&user_id_for_claim("uid-1")).is_empty());
}
