//! The operator credential over the live S3 endpoint, with the AWS SDK as the client: bucket
//! administration, the brownfield flow through the provisioner's grant and revoke, and claim
//! keys keeping exactly their own powers.

// The endpoint's own test server and clients, shared rather than copied.
#[path = "../../s3-endpoint/tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::Path;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    BucketLocationConstraint, CompletedMultipartUpload, CompletedPart, CreateBucketConfiguration,
    Delete, ObjectIdentifier,
};
use bucket_api::{BucketEndpoint, ObjectBucket, ObjectBucketSpec, ReclaimPolicy};
use bucket_provisioner::{
    BUCKET_NAME_TAKEN, BackendError, BucketOptions, ProvisionedBucket, Provisioner, Removed,
    user_id_for_claim,
};
use common::{Server, client_for, client_in_region, code};
use hostpath_provisioner::{AdminCredentials, HostPathConfig, HostPathProvisioner, OPERATOR_OWNER};
use k8s_openapi::api::core::v1::ObjectReference;

const ADMIN_ID: &str = "OPERATORADMIN01";
const ADMIN_SECRET: &str = "operator-secret-0123456789abcdef";

async fn start_with_admin(root: &Path) -> (Server, Client) {
    Server::start_with_admin(root, ADMIN_ID, ADMIN_SECRET).await
}

fn backend(server: &Server) -> HostPathProvisioner {
    let config =
        HostPathConfig { host: "s3.example.svc".into(), port: 7480, region: "us-east-1".into() };
    HostPathProvisioner::new(server.store.clone(), config)
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

/// The ObjectBucket the controller would have written after `provisioned`.
fn object_bucket(bucket: &str, claim_uid: &str, provisioned: &ProvisionedBucket) -> ObjectBucket {
    ObjectBucket::new(
        &format!("obc-default-{bucket}"),
        ObjectBucketSpec {
            storage_class_name: "hostpath".to_owned(),
            reclaim_policy: Some(ReclaimPolicy::Delete),
            claim_ref: Some(ObjectReference {
                uid: Some(claim_uid.to_owned()),
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

fn claim_client(server: &Server, provisioned: &ProvisionedBucket) -> Client {
    let creds = &provisioned.credentials;
    client_for(server.addr, &creds.access_key_id, &creds.secret_access_key)
}

async fn put(client: &Client, bucket: &str, key: &str, body: &'static [u8]) {
    client
        .put_object()
        .bucket(bucket)
        .key(key)
        .body(ByteStream::from_static(body))
        .send()
        .await
        .unwrap_or_else(|e| panic!("put {bucket}/{key}: {e:?}"));
}

async fn get(client: &Client, bucket: &str, key: &str) -> Vec<u8> {
    let out = client.get_object().bucket(bucket).key(key).send().await.unwrap();
    out.body.collect().await.unwrap().into_bytes().to_vec()
}

async fn bucket_names(client: &Client) -> Vec<String> {
    let out = client.list_buckets().send().await.unwrap();
    out.buckets().iter().filter_map(|b| b.name().map(str::to_owned)).collect()
}

async fn keys_in(client: &Client, bucket: &str) -> Vec<String> {
    let out = client.list_objects_v2().bucket(bucket).send().await.unwrap();
    out.contents().iter().filter_map(|o| o.key().map(str::to_owned)).collect()
}

fn status<E>(err: &SdkError<E, HttpResponse>) -> Option<u16> {
    err.raw_response().map(|r| r.status().as_u16())
}

fn assert_permanent(err: &BackendError, reason: &str) {
    match err {
        BackendError::Permanent { reason: r, .. } => assert_eq!(r, reason, "{err}"),
        other => panic!("expected a permanent {reason} error, got {other:?}"),
    }
}

/// The brownfield flow: the operator creates a bucket, a claim is granted it and writes, the
/// claim goes and the data stays, and the operator empties and deletes the bucket.
#[tokio::test]
async fn operator_bucket_granted_to_a_claim_then_emptied_and_deleted() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, admin) = start_with_admin(tmp.path()).await;
    let backend = backend(&server);

    let created = admin.create_bucket().bucket("brownfield").send().await.unwrap();
    assert_eq!(created.location(), Some("/brownfield"));
    admin.head_bucket().bucket("brownfield").send().await.unwrap();
    assert!(tmp.path().join("buckets/brownfield").is_dir());
    let record = server.store.bucket_record("brownfield").unwrap();
    assert_eq!(record.owner, OPERATOR_OWNER);
    assert!(!record.created_by_provisioner);
    put(&admin, "brownfield", "seed.txt", b"from the operator").await;

    // The controller grants a claim the existing bucket; its key works there and only there.
    let granted = backend.grant(&options("brownfield", "uid-1")).await.unwrap();
    let claim = claim_client(&server, &granted);
    put(&claim, "brownfield", "app/out.txt", b"from the claim").await;
    assert_eq!(get(&claim, "brownfield", "seed.txt").await, b"from the operator");
    assert_eq!(bucket_names(&claim).await, ["brownfield"]);

    // While the claim is bound, the operator cannot delete the bucket.
    let err = admin.delete_bucket().bucket("brownfield").send().await.unwrap_err();
    assert_eq!(code(&err), "InvalidBucketState");
    assert_eq!(status(&err), Some(409));
    let message = err.message().unwrap_or_default();
    assert!(message.contains("bound to claim(s) obc-uid-1"), "{message}");

    // Even if asked to, the provisioner never deletes an operator bucket: the claim's key goes,
    // the bucket and both objects stay.
    let ob = object_bucket("brownfield", "uid-1", &granted);
    assert_eq!(backend.delete(&ob).await.unwrap(), Removed::AccessOnly);
    assert!(tmp.path().join("buckets/brownfield/app/out.txt").is_file());
    backend.revoke(&ob).await.unwrap();
    let err = claim.get_object().bucket("brownfield").key("seed.txt").send().await.unwrap_err();
    assert_eq!(code(&err), "InvalidAccessKeyId");
    admin.head_bucket().bucket("brownfield").send().await.unwrap();
    assert_eq!(get(&admin, "brownfield", "app/out.txt").await, b"from the claim");
    assert_eq!(keys_in(&admin, "brownfield").await, ["app/out.txt", "seed.txt"]);

    // Not empty yet.
    let err = admin.delete_bucket().bucket("brownfield").send().await.unwrap_err();
    assert_eq!(code(&err), "BucketNotEmpty");
    assert_eq!(status(&err), Some(409));

    // Emptied, it can be deleted, and is then gone for everyone.
    let mut delete = Delete::builder();
    for key in keys_in(&admin, "brownfield").await {
        delete = delete.objects(ObjectIdentifier::builder().key(key).build().unwrap());
    }
    let out = admin
        .delete_objects()
        .bucket("brownfield")
        .delete(delete.build().unwrap())
        .send()
        .await
        .unwrap();
    assert!(out.errors().is_empty(), "{:?}", out.errors());
    admin.delete_bucket().bucket("brownfield").send().await.unwrap();
    let err = admin.head_bucket().bucket("brownfield").send().await.unwrap_err();
    assert_eq!(status(&err), Some(404));
    assert!(!tmp.path().join("buckets/brownfield").exists());
    assert!(server.store.bucket_record("brownfield").is_none());
    let err = admin.delete_bucket().bucket("brownfield").send().await.unwrap_err();
    assert_eq!(code(&err), "NoSuchBucket");
    assert_permanent(
        &backend.grant(&options("brownfield", "uid-2")).await.unwrap_err(),
        "BucketNotFound",
    );

    server.stop().await;
}

#[tokio::test]
async fn claim_keys_cannot_create_or_delete_buckets() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, admin) = start_with_admin(tmp.path()).await;
    let key = server.bucket_with_key("claimed", "obc-c").await;
    let claim = server.client(&key);
    admin.create_bucket().bucket("operators").send().await.unwrap();

    // Creating is answered as S3 answers it, by whose the bucket is; nothing is created.
    let err = claim.create_bucket().bucket("brand-new").send().await.unwrap_err();
    assert_eq!(code(&err), "AccessDenied", "create brand-new");
    let err = claim.create_bucket().bucket("operators").send().await.unwrap_err();
    assert_eq!(code(&err), "BucketAlreadyExists", "create operators");
    // Its own bucket in us-east-1: S3's legacy 200, which changes nothing.
    claim.create_bucket().bucket("claimed").send().await.unwrap();
    for bucket in ["brand-new", "claimed", "operators"] {
        let err = claim.delete_bucket().bucket(bucket).send().await.unwrap_err();
        assert_eq!(code(&err), "AccessDenied", "delete {bucket}");
    }
    assert!(!tmp.path().join("buckets/brand-new").exists());
    // The claim's own bucket is empty, and still it may not delete it.
    assert!(tmp.path().join("buckets/claimed").is_dir());
    assert!(tmp.path().join("buckets/operators").is_dir());

    // Everything else is as before: its own bucket only, and only that one listed.
    put(&claim, "claimed", "k", b"v").await;
    let err = claim.list_objects_v2().bucket("operators").send().await.unwrap_err();
    assert_eq!(code(&err), "AccessDenied");
    assert_eq!(bucket_names(&claim).await, ["claimed"]);

    // Unsigned bucket administration is refused too.
    let anonymous = raw_request(server.addr, "PUT", "/unsigned-bucket").await;
    assert!(anonymous.starts_with("HTTP/1.1 403"), "{anonymous}");
    let anonymous = raw_request(server.addr, "DELETE", "/claimed").await;
    assert!(anonymous.starts_with("HTTP/1.1 403"), "{anonymous}");
    assert!(!tmp.path().join("buckets/unsigned-bucket").exists());
    assert!(tmp.path().join("buckets/claimed/k").is_file());

    server.stop().await;
}

/// An unsigned request without a body.
async fn raw_request(addr: std::net::SocketAddr, method: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    conn.read_to_string(&mut response).await.unwrap();
    response
}

#[tokio::test]
async fn create_bucket_enforces_names_and_refuses_existing_buckets() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, admin) = start_with_admin(tmp.path()).await;

    for bad in ["Bad_Name", "ab", "a..b", "192.168.10.1", "xn--bucket", "bucket-", "data-s3alias"] {
        let err = admin.create_bucket().bucket(bad).send().await.unwrap_err();
        assert_eq!(code(&err), "InvalidBucketName", "{bad}");
    }
    let entries = std::fs::read_dir(tmp.path().join("buckets")).unwrap().count();
    assert_eq!(entries, 0, "no directory was made for an invalid name");

    // Whoever made a bucket, creating it again changes nothing: in us-east-1 it answers 200, as
    // S3 does there for legacy clients, elsewhere BucketAlreadyOwnedByYou.
    admin.create_bucket().bucket("by-operator").send().await.unwrap();
    server.bucket_with_key("by-provisioner", "obc-p").await;
    std::fs::create_dir(tmp.path().join("buckets/by-hand")).unwrap();
    admin.put_object().bucket("by-operator").key("kept").send().await.unwrap();
    let elsewhere = client_in_region(server.addr, ADMIN_ID, ADMIN_SECRET, "eu-west-1");
    for existing in ["by-operator", "by-provisioner", "by-hand"] {
        admin.create_bucket().bucket(existing).send().await.unwrap();
        let err = elsewhere
            .create_bucket()
            .bucket(existing)
            .create_bucket_configuration(
                CreateBucketConfiguration::builder()
                    .location_constraint(BucketLocationConstraint::EuWest1)
                    .build(),
            )
            .send()
            .await
            .unwrap_err();
        assert_eq!(code(&err), "BucketAlreadyOwnedByYou", "{existing}");
        assert_eq!(status(&err), Some(409));
    }
    let kept = admin.list_objects_v2().bucket("by-operator").send().await.unwrap();
    assert_eq!(kept.contents().len(), 1, "creating again emptied nothing");
    assert_eq!(server.store.bucket_record("by-provisioner").unwrap().owner, "test-identity");
    assert!(server.store.bucket_record("by-hand").is_none());

    // Provisioning a new bucket under an operator bucket's name does not adopt it.
    let err = backend(&server).provision(&options("by-operator", "uid-9")).await.unwrap_err();
    assert_permanent(&err, BUCKET_NAME_TAKEN);

    // Object lock asked at creation is honoured: the bucket has it, and versioning with it.
    admin
        .create_bucket()
        .bucket("locked")
        .object_lock_enabled_for_bucket(true)
        .send()
        .await
        .unwrap();
    let lock = admin.get_object_lock_configuration().bucket("locked").send().await.unwrap();
    let enabled = lock.object_lock_configuration().and_then(|c| c.object_lock_enabled());
    assert_eq!(enabled.map(|e| e.as_str()), Some("Enabled"));
    let versioning = admin.get_bucket_versioning().bucket("locked").send().await.unwrap();
    assert_eq!(versioning.status().map(|s| s.as_str()), Some("Enabled"));
    // Asked of a bucket that exists without it, it is refused, as S3 does.
    let err = admin
        .create_bucket()
        .bucket("by-operator")
        .object_lock_enabled_for_bucket(true)
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "InvalidBucketState");

    server.stop().await;
}

#[tokio::test]
async fn operator_lists_and_uses_every_bucket() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, admin) = start_with_admin(tmp.path()).await;
    let backend = backend(&server);
    let provisioned = backend.provision(&options("claim-bucket", "uid-a")).await.unwrap();
    let claim = claim_client(&server, &provisioned);
    put(&claim, "claim-bucket", "private.txt", b"claim data").await;
    admin.create_bucket().bucket("ops").send().await.unwrap();
    let buckets = tmp.path().join("buckets");
    std::fs::create_dir(buckets.join("handmade")).unwrap();
    // Not buckets: a symlink, a file and a directory whose name is not a bucket name.
    std::os::unix::fs::symlink(tmp.path(), buckets.join("linked")).unwrap();
    std::fs::write(buckets.join("stray-file"), b"x").unwrap();
    std::fs::create_dir(buckets.join("Not_A_Bucket")).unwrap();

    assert_eq!(bucket_names(&admin).await, ["claim-bucket", "handmade", "ops"]);
    assert_eq!(bucket_names(&claim).await, ["claim-bucket"]);

    // Reads, writes, listings and copies across buckets of every kind.
    assert_eq!(get(&admin, "claim-bucket", "private.txt").await, b"claim data");
    put(&admin, "handmade", "note", b"hand").await;
    admin
        .copy_object()
        .bucket("ops")
        .key("backup/private.txt")
        .copy_source("claim-bucket/private.txt")
        .send()
        .await
        .unwrap();
    assert_eq!(get(&admin, "ops", "backup/private.txt").await, b"claim data");
    let head = admin.head_object().bucket("handmade").key("note").send().await.unwrap();
    assert_eq!(head.content_length(), Some(4));

    // Multipart on a claim's bucket (a single part may be small).
    let upload = admin
        .create_multipart_upload()
        .bucket("claim-bucket")
        .key("from-operator")
        .send()
        .await
        .unwrap();
    let upload_id = upload.upload_id().unwrap();
    let part = admin
        .upload_part()
        .bucket("claim-bucket")
        .key("from-operator")
        .upload_id(upload_id)
        .part_number(1)
        .body(ByteStream::from_static(b"multipart body"))
        .send()
        .await
        .unwrap();
    let parts = admin
        .list_parts()
        .bucket("claim-bucket")
        .key("from-operator")
        .upload_id(upload_id)
        .send()
        .await
        .unwrap();
    assert_eq!(parts.parts().len(), 1);
    admin
        .complete_multipart_upload()
        .bucket("claim-bucket")
        .key("from-operator")
        .upload_id(upload_id)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .parts(CompletedPart::builder().part_number(1).e_tag(part.e_tag().unwrap()).build())
                .build(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(get(&claim, "claim-bucket", "from-operator").await, b"multipart body");
    admin.delete_object().bucket("claim-bucket").key("from-operator").send().await.unwrap();
    admin.delete_object().bucket("claim-bucket").key("private.txt").send().await.unwrap();

    // A provisioned bucket, even empty, cannot be deleted while its claim is bound...
    let err = admin.delete_bucket().bucket("claim-bucket").send().await.unwrap_err();
    assert_eq!(code(&err), "InvalidBucketState");
    assert!(err.message().unwrap_or_default().contains("obc-uid-a"), "{err:?}");
    // ...but once the claim is gone with the bucket retained, the operator may clean it up,
    // and the provisioner's later delete finds nothing left to do.
    let ob = object_bucket("claim-bucket", "uid-a", &provisioned);
    backend.revoke(&ob).await.unwrap();
    admin.delete_bucket().bucket("claim-bucket").send().await.unwrap();
    assert!(!buckets.join("claim-bucket").exists());
    backend.delete(&ob).await.unwrap();

    // A multipart upload in progress does not keep an otherwise empty bucket alive.
    admin.delete_object().bucket("ops").key("backup/private.txt").send().await.unwrap();
    admin.create_multipart_upload().bucket("ops").key("pending").send().await.unwrap();
    admin.delete_bucket().bucket("ops").send().await.unwrap();
    assert!(!tmp.path().join(".provisioner/uploads/ops").exists());

    // The handmade bucket can be deleted once empty; the non-buckets are untouched.
    admin.delete_object().bucket("handmade").key("note").send().await.unwrap();
    admin.delete_bucket().bucket("handmade").send().await.unwrap();
    assert_eq!(bucket_names(&admin).await, Vec::<String>::new());
    assert!(buckets.join("linked").exists() && buckets.join("stray-file").exists());

    server.stop().await;
}

#[tokio::test]
async fn the_operator_credential_exists_only_while_configured() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, admin) = start_with_admin(tmp.path()).await;
    admin.create_bucket().bucket("kept").send().await.unwrap();
    put(&admin, "kept", "k", b"v").await;

    let forged = client_for(server.addr, ADMIN_ID, "not-the-operator-secret");
    let err = forged.list_buckets().send().await.unwrap_err();
    assert_eq!(code(&err), "SignatureDoesNotMatch");

    // Removed at run time: refused at once.
    server.store.set_admin(None);
    let err = admin.list_buckets().send().await.unwrap_err();
    assert_eq!(code(&err), "InvalidAccessKeyId");
    server.stop().await;

    // Not persisted: a restart without one has no operator credential (the default)...
    let server = Server::start(tmp.path()).await;
    let admin = client_for(server.addr, ADMIN_ID, ADMIN_SECRET);
    let err = admin.create_bucket().bucket("another").send().await.unwrap_err();
    assert_eq!(code(&err), "InvalidAccessKeyId");
    assert!(!tmp.path().join("buckets/another").exists());

    // ...while its buckets and data stay, and a new (rotated) key pair takes over.
    server
        .store
        .set_admin(Some(AdminCredentials::new("ROTATEDADMIN", "rotated-secret-99").unwrap()));
    let rotated = client_for(server.addr, "ROTATEDADMIN", "rotated-secret-99");
    assert_eq!(bucket_names(&rotated).await, ["kept"]);
    assert_eq!(get(&rotated, "kept", "k").await, b"v");
    assert_eq!(server.store.bucket_record("kept").unwrap().owner, OPERATOR_OWNER);
    let err = admin.get_object().bucket("kept").key("k").send().await.unwrap_err();
    assert_eq!(code(&err), "InvalidAccessKeyId");

    server.stop().await;
}
