//! Access modes at the endpoint: every operation class, through the AWS SDK, for a key of each
//! mode on the same bucket.

mod common;

use std::collections::BTreeMap;

use aws_sdk_s3::Client;
use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, CompletedMultipartUpload, CompletedPart, CorsConfiguration,
    CorsRule, Delete, ExpirationStatus, LifecycleExpiration, LifecycleRule, LifecycleRuleFilter,
    ObjectAttributes, ObjectCannedAcl, ObjectIdentifier, Tag, Tagging,
};
use common::Server;
use s3_endpoint::store::KeyMode;

const BUCKET: &str = "shared";
const SEED: &str = "seed.txt";

/// `true` when allowed, `false` when refused with 403; anything else fails the test.
fn outcome<T, E: std::fmt::Debug, R: std::fmt::Debug>(
    op: &str,
    result: Result<T, SdkError<E, R>>,
) -> bool {
    match result {
        Ok(_) => true,
        Err(SdkError::ServiceError(e)) if format!("{:?}", e.raw()).contains("403") => false,
        Err(e) => panic!("{op}: neither allowed nor refused: {e:?}"),
    }
}

/// A CORS configuration to set and read.
fn cors() -> CorsConfiguration {
    let rule = CorsRule::builder().allowed_origins("*").allowed_methods("GET").build().unwrap();
    CorsConfiguration::builder().cors_rules(rule).build().unwrap()
}

/// A lifecycle configuration to set and read (which expires nothing the test uses).
fn lifecycle() -> BucketLifecycleConfiguration {
    let expiration = LifecycleExpiration::builder().days(365).build();
    let rule = LifecycleRule::builder().id("old").status(ExpirationStatus::Enabled);
    let rule = rule.filter(LifecycleRuleFilter::builder().prefix("archive/").build());
    let rule = rule.expiration(expiration).build().unwrap();
    BucketLifecycleConfiguration::builder().rules(rule).build().unwrap()
}

/// Tries every operation class with `client`; `owner` (full access) sets up what an operation
/// needs that the client may not make itself.
async fn try_everything(
    client: &Client,
    owner: &Client,
    tag: &str,
) -> BTreeMap<&'static str, bool> {
    let mut seen = BTreeMap::new();
    let b = BUCKET;
    macro_rules! try_op {
        ($name:literal, $call:expr) => {
            seen.insert($name, outcome($name, $call.send().await));
        };
    }
    try_op!("HeadBucket", client.head_bucket().bucket(b));
    try_op!("GetBucketLocation", client.get_bucket_location().bucket(b));
    try_op!("ListBuckets", client.list_buckets());
    try_op!("GetObject", client.get_object().bucket(b).key(SEED));
    try_op!("HeadObject", client.head_object().bucket(b).key(SEED));
    try_op!(
        "GetObjectAttributes",
        client
            .get_object_attributes()
            .bucket(b)
            .key(SEED)
            .object_attributes(ObjectAttributes::Etag)
    );
    try_op!("ListObjectsV2", client.list_objects_v2().bucket(b));
    try_op!("ListObjects", client.list_objects().bucket(b));
    try_op!("ListObjectVersions", client.list_object_versions().bucket(b));
    try_op!("ListMultipartUploads", client.list_multipart_uploads().bucket(b));
    try_op!("GetBucketAcl", client.get_bucket_acl().bucket(b));
    try_op!("GetObjectAcl", client.get_object_acl().bucket(b).key(SEED));
    try_op!("GetObjectTagging", client.get_object_tagging().bucket(b).key(SEED));
    owner.put_bucket_cors().bucket(b).cors_configuration(cors()).send().await.unwrap();
    try_op!("GetBucketCors", client.get_bucket_cors().bucket(b));
    try_op!("PutBucketCors", client.put_bucket_cors().bucket(b).cors_configuration(cors()));
    try_op!("DeleteBucketCors", client.delete_bucket_cors().bucket(b));
    let set_lifecycle = |c: &Client| {
        c.put_bucket_lifecycle_configuration().bucket(b).lifecycle_configuration(lifecycle())
    };
    set_lifecycle(owner).send().await.unwrap();
    try_op!(
        "GetBucketLifecycleConfiguration",
        client.get_bucket_lifecycle_configuration().bucket(b)
    );
    try_op!("PutBucketLifecycleConfiguration", set_lifecycle(client));
    try_op!("DeleteBucketLifecycle", client.delete_bucket_lifecycle().bucket(b));
    let tagging = Tagging::builder().tag_set(Tag::builder().key("k").value(tag).build().unwrap());
    try_op!(
        "PutObjectTagging",
        client.put_object_tagging().bucket(b).key(SEED).tagging(tagging.build().unwrap())
    );
    try_op!("DeleteObjectTagging", client.delete_object_tagging().bucket(b).key(SEED));
    let new = format!("new-{tag}");
    try_op!(
        "PutObject",
        client.put_object().bucket(b).key(&new).body(ByteStream::from_static(b"x"))
    );
    try_op!(
        "PutObjectAcl",
        client.put_object_acl().bucket(b).key(SEED).acl(ObjectCannedAcl::Private)
    );
    try_op!(
        "CopyObject",
        client
            .copy_object()
            .bucket(b)
            .key(format!("copy-{tag}"))
            .copy_source(format!("{b}/{SEED}"))
    );

    // Multipart: an upload of the client's own where it may start one, else the owner's.
    let upload = format!("mp-{tag}");
    let created = client.create_multipart_upload().bucket(b).key(&upload).send().await;
    let id = match created {
        Ok(out) => {
            seen.insert("CreateMultipartUpload", true);
            out.upload_id.unwrap()
        }
        Err(e) => {
            seen.insert("CreateMultipartUpload", outcome("CreateMultipartUpload", Err::<(), _>(e)));
            let out = owner.create_multipart_upload().bucket(b).key(&upload).send().await.unwrap();
            out.upload_id.unwrap()
        }
    };
    let part = client
        .upload_part()
        .bucket(b)
        .key(&upload)
        .upload_id(&id)
        .part_number(1)
        .body(ByteStream::from_static(b"part"))
        .send()
        .await;
    let etag = match part {
        Ok(out) => {
            seen.insert("UploadPart", true);
            out.e_tag.unwrap()
        }
        Err(e) => {
            seen.insert("UploadPart", outcome("UploadPart", Err::<(), _>(e)));
            let body = ByteStream::from_static(b"part");
            let up = owner.upload_part().bucket(b).key(&upload).upload_id(&id).part_number(1);
            up.body(body).send().await.unwrap().e_tag.unwrap()
        }
    };
    try_op!(
        "UploadPartCopy",
        client
            .upload_part_copy()
            .bucket(b)
            .key(&upload)
            .upload_id(&id)
            .part_number(2)
            .copy_source(format!("{b}/{SEED}"))
    );
    try_op!("ListParts", client.list_parts().bucket(b).key(&upload).upload_id(&id));
    let parts = CompletedMultipartUpload::builder()
        .parts(CompletedPart::builder().part_number(1).e_tag(etag).build())
        .build();
    try_op!(
        "CompleteMultipartUpload",
        client
            .complete_multipart_upload()
            .bucket(b)
            .key(&upload)
            .upload_id(&id)
            .multipart_upload(parts)
    );
    let aborted = format!("abort-{tag}");
    let id = owner.create_multipart_upload().bucket(b).key(&aborted).send().await.unwrap();
    let id = id.upload_id.unwrap();
    try_op!(
        "AbortMultipartUpload",
        client.abort_multipart_upload().bucket(b).key(&aborted).upload_id(&id)
    );
    owner.abort_multipart_upload().bucket(b).key(&aborted).upload_id(&id).send().await.ok();

    // Deleting goes last: it may remove the seed, which everything above reads.
    let scratch = format!("scratch-{tag}");
    owner
        .put_object()
        .bucket(b)
        .key(&scratch)
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap();
    try_op!("DeleteObject", client.delete_object().bucket(b).key(&scratch));
    let one = ObjectIdentifier::builder().key(&scratch).build().unwrap();
    let delete = Delete::builder().objects(one).build().unwrap();
    let deleted = client.delete_objects().bucket(b).delete(delete).send().await;
    seen.insert("DeleteObjects", outcome("DeleteObjects", deleted));
    seen
}

#[tokio::test]
async fn each_access_mode_allows_exactly_its_operations() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path()).await;
    let owner_key = server.bucket_with_key(BUCKET, "owner").await;
    let owner = server.client(&owner_key);
    let seed = ByteStream::from_static(b"operator's data");
    owner.put_object().bucket(BUCKET).key(SEED).body(seed).send().await.unwrap();

    let mut keys = Vec::new();
    for (user, mode) in [("reader", KeyMode::ReadOnly), ("writer", KeyMode::WriteOnly)] {
        let key = server.store.issue_key(user, BUCKET).await.unwrap();
        server.store.set_key_mode(user, BUCKET, mode).await.unwrap();
        keys.push((mode, server.client(&key)));
    }
    keys.push((KeyMode::ReadWrite, owner.clone()));

    const LOOKUPS: [&str; 4] = ["HeadBucket", "GetBucketLocation", "ListBuckets", "ListParts"];
    const READS: [&str; 13] = [
        "GetObject",
        "HeadObject",
        "GetObjectAttributes",
        "ListObjectsV2",
        "ListObjects",
        "ListObjectVersions",
        "ListMultipartUploads",
        "GetBucketAcl",
        "GetObjectAcl",
        "GetObjectTagging",
        "GetBucketCors",
        "GetBucketLifecycleConfiguration",
        "CopyObject", // reads its source
    ];
    const WRITES: [&str; 9] = [
        "PutObject",
        "PutObjectAcl",
        "PutObjectTagging",
        "DeleteObjectTagging",
        "CreateMultipartUpload",
        "UploadPart",
        "CompleteMultipartUpload",
        "AbortMultipartUpload",
        "UploadPartCopy", // writes a part, reads its source
    ];
    // Deletes, and bucket configuration: full access only.
    const DELETES: [&str; 6] = [
        "DeleteObject",
        "DeleteObjects",
        "PutBucketCors",
        "DeleteBucketCors",
        "PutBucketLifecycleConfiguration",
        "DeleteBucketLifecycle",
    ];
    for (mode, client) in &keys {
        let seen = try_everything(client, &owner, mode.as_str()).await;
        assert_eq!(seen.len(), LOOKUPS.len() + READS.len() + WRITES.len() + DELETES.len());
        let copies = ["CopyObject", "UploadPartCopy"];
        for (op, allowed) in &seen {
            let expected = match mode {
                KeyMode::ReadWrite => true,
                _ if LOOKUPS.contains(op) => true,
                _ if DELETES.contains(op) => false,
                // Copies read their source and write their target: only full access does both.
                _ if copies.contains(op) => false,
                KeyMode::ReadOnly => READS.contains(op),
                KeyMode::WriteOnly => WRITES.contains(op),
            };
            assert_eq!(*allowed, expected, "{mode} {op}");
        }
    }
    // Nothing a narrowed key was refused changed the operator's object.
    let got = owner.get_object().bucket(BUCKET).key(SEED).send().await.unwrap();
    assert_eq!(got.body.collect().await.unwrap().into_bytes().as_ref(), b"operator's data");
}

#[tokio::test]
async fn a_changed_mode_holds_from_the_next_request() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path()).await;
    let key = server.bucket_with_key(BUCKET, "tenant").await;
    let client = server.client(&key);
    let put = || client.put_object().bucket(BUCKET).key("k").body(ByteStream::from_static(b"v"));
    assert!(outcome("PutObject", put().send().await));
    server.store.set_key_mode("tenant", BUCKET, KeyMode::ReadOnly).await.unwrap();
    assert!(!outcome("PutObject", put().send().await));
    let got = client.get_object().bucket(BUCKET).key("k").send().await;
    assert!(outcome("GetObject", got));
    // The mode is in the key's record: it survives a restart of the endpoint.
    server.stop().await;
    let server = Server::start(dir.path()).await;
    assert_eq!(server.store.lookup_key(&key.access_key_id).unwrap().mode, KeyMode::ReadOnly);
}

/// Whether each bucket-wide setting can be changed with `s3`: lifecycle rules, CORS rules,
/// versioning, a legal hold asked for on a write, and their removals.
async fn try_settings(s3: &Client) -> BTreeMap<&'static str, bool> {
    let hold = s3
        .put_object()
        .bucket(BUCKET)
        .key("held")
        .object_lock_legal_hold_status(aws_sdk_s3::types::ObjectLockLegalHoldStatus::On)
        .body(ByteStream::from_static(b"held"))
        .send()
        .await;
    let versioning = aws_sdk_s3::types::VersioningConfiguration::builder()
        .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
        .build();
    BTreeMap::from([
        (
            "PutBucketLifecycleConfiguration",
            outcome(
                "PutBucketLifecycleConfiguration",
                s3.put_bucket_lifecycle_configuration()
                    .bucket(BUCKET)
                    .lifecycle_configuration(lifecycle())
                    .send()
                    .await,
            ),
        ),
        (
            "DeleteBucketLifecycle",
            outcome(
                "DeleteBucketLifecycle",
                s3.delete_bucket_lifecycle().bucket(BUCKET).send().await,
            ),
        ),
        (
            "PutBucketCors",
            outcome(
                "PutBucketCors",
                s3.put_bucket_cors().bucket(BUCKET).cors_configuration(cors()).send().await,
            ),
        ),
        (
            "DeleteBucketCors",
            outcome("DeleteBucketCors", s3.delete_bucket_cors().bucket(BUCKET).send().await),
        ),
        (
            "PutBucketVersioning",
            outcome(
                "PutBucketVersioning",
                s3.put_bucket_versioning()
                    .bucket(BUCKET)
                    .versioning_configuration(versioning)
                    .send()
                    .await,
            ),
        ),
        // The bucket has no object lock: allowed, the write is refused as S3 refuses it (400).
        (
            "PutObject with a legal hold",
            !matches!(hold, Err(SdkError::ServiceError(e)) if format!("{:?}", e.raw()).contains("403")),
        ),
    ])
}

#[tokio::test]
async fn bucket_wide_settings_are_the_creators_and_within_its_class() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path()).await;
    let owner = server.client(&server.bucket_with_key(BUCKET, "owner").await);
    // A claim sharing the bucket with full access to its objects.
    let sharer = server.client(&server.store.issue_key("sharer", BUCKET).await.unwrap());

    let refused = try_settings(&sharer).await;
    assert!(refused.values().all(|allowed| !allowed), "a sharer changes nothing: {refused:?}");
    let put = sharer.put_object().bucket(BUCKET).key("k").body(ByteStream::from_static(b"x"));
    put.send().await.expect("a sharer still writes objects");
    let rules = owner.get_bucket_lifecycle_configuration().bucket(BUCKET).send().await;
    assert!(rules.is_err(), "no rule was left behind by the sharer");

    // A bucket recorded before its class's leave was: its creator changes everything, as before.
    let before = try_settings(&owner).await;
    assert!(before.values().all(|allowed| *allowed), "{before:?}");

    // A class allowing CORS rules only.
    let settable = s3_endpoint::store::Settable { cors: true, ..Default::default() };
    server.store.set_bucket_settable(BUCKET, "owner", settable).await.unwrap();
    let gated = try_settings(&owner).await;
    let allowed: Vec<_> =
        gated.iter().filter(|(_, allowed)| **allowed).map(|(op, _)| *op).collect();
    assert_eq!(allowed, ["DeleteBucketCors", "PutBucketCors"], "{gated:?}");
    // Only the creator records it.
    let refused = server.store.set_bucket_settable(BUCKET, "sharer", settable).await;
    assert!(refused.is_err());
}
