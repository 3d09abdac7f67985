//! Shared pieces of the S3 provisioner's tests: a moto server, owner credentials without a
//! cluster, claims and buckets as the library would hand them, and S3 checks.

#![allow(dead_code)] // each test binary uses its own part

pub mod cluster;
pub mod cut_proxy;
pub mod features;
pub mod moto;
pub mod old_provisioner;
pub mod sessions;

use std::collections::BTreeMap;

use async_trait::async_trait;
use aws_sdk_s3::error::ProvideErrorMetadata;
use bucket_api::{
    BucketEndpoint, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec, ObjectBucketSpec,
    ReclaimPolicy,
};
use bucket_provisioner::bucket::objects::claim_ref;
use bucket_provisioner::{BackendError, BucketOptions, Credentials, ProvisionedBucket};
use kube::api::ObjectMeta;
use s3_provisioner::{OwnerCredentials, SecretRef};

/// Owner credentials held in memory, for tests without a cluster.
pub struct FixedOwner(pub Credentials);

#[async_trait]
impl OwnerCredentials for FixedOwner {
    async fn owner_credentials(&self, _: &SecretRef) -> Result<Credentials, BackendError> {
        Ok(self.0.clone())
    }
}

/// Key records held in memory, for tests without a cluster.
#[derive(Default)]
pub struct MemoryKeyRecords(pub std::sync::Mutex<std::collections::HashMap<String, Credentials>>);

#[async_trait]
impl s3_provisioner::KeyRecords for MemoryKeyRecords {
    async fn read(&self, user: &str) -> Result<Option<Credentials>, BackendError> {
        Ok(self.0.lock().unwrap().get(user).cloned())
    }

    async fn write(&self, user: &str, key: &Credentials) -> Result<(), BackendError> {
        self.0.lock().unwrap().insert(user.to_owned(), key.clone());
        Ok(())
    }

    async fn remove(&self, user: &str) -> Result<(), BackendError> {
        self.0.lock().unwrap().remove(user);
        Ok(())
    }
}

/// A short suffix that differs between calls, for unique names.
pub fn suffix() -> String {
    test_support::unique_suffix()
}

/// A claim with a fresh UID, as the library would see it.
pub fn claim(bucket: &str) -> ObjectBucketClaim {
    let mut claim = ObjectBucketClaim::new(
        "c",
        ObjectBucketClaimSpec {
            storage_class_name: "class".into(),
            bucket_name: Some(bucket.into()),
            ..Default::default()
        },
    );
    claim.metadata = ObjectMeta {
        name: Some("c".into()),
        namespace: Some("ns".into()),
        uid: Some(format!("0000{}-0000-4000-8000-000000000000", suffix())),
        ..Default::default()
    };
    claim
}

/// StorageClass parameters pointing at `moto`, the owner's keys in Secret `infra/owner`.
pub fn moto_parameters(moto: &moto::Moto) -> Vec<(&'static str, String)> {
    vec![
        ("endpoint", moto.endpoint.clone()),
        ("forcePathStyle", "true".into()),
        ("secretName", "owner".into()),
        ("secretNamespace", "infra".into()),
    ]
}

/// The COSI driver's store parameters (`--cosi-parameter`) for a store at `endpoint`, the
/// owner's keys in Secret `infra/owner`.
pub fn store_parameters(endpoint: &str) -> BTreeMap<String, String> {
    let entries = [
        ("endpoint", endpoint),
        ("forcePathStyle", "true"),
        ("secretName", "owner"),
        ("secretNamespace", "infra"),
    ];
    entries.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
}

/// `base` (as [`moto_parameters`] gives it) with `extra`, as [`options`] takes them.
pub fn with<'a>(
    base: &'a [(&'static str, String)],
    extra: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    base.iter().map(|(k, v)| (*k, v.as_str())).chain(extra.iter().copied()).collect()
}

/// Options for `claim`'s bucket with StorageClass `parameters`.
pub fn options(claim: &ObjectBucketClaim, parameters: &[(&str, &str)]) -> BucketOptions {
    let uid = claim.metadata.uid.clone().unwrap();
    BucketOptions {
        bucket_name: claim.spec.bucket_name.clone().unwrap(),
        user_id: bucket_provisioner::user_id_for_claim(&uid),
        reclaim_policy: ReclaimPolicy::Delete,
        parameters: parameters.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        additional_config: Default::default(),
        access_mode: Default::default(),
        storage_class_name: claim.spec.storage_class_name.clone(),
        web_identity: None,
        claim: claim.clone().into(),
    }
}

/// The ObjectBucket the library would write for `claim` after `provisioned`; `None` for the
/// record it synthesizes when the ObjectBucket was never written (no state).
pub fn object_bucket(
    claim: &ObjectBucketClaim,
    provisioned: Option<&ProvisionedBucket>,
) -> ObjectBucket {
    ObjectBucket {
        metadata: ObjectMeta { name: Some("obc-ns-c".into()), ..Default::default() },
        spec: ObjectBucketSpec {
            storage_class_name: claim.spec.storage_class_name.clone(),
            reclaim_policy: Some(ReclaimPolicy::Delete),
            claim_ref: Some(claim_ref(claim)),
            endpoint: Some(BucketEndpoint {
                bucket_name: claim.spec.bucket_name.clone().unwrap(),
                ..Default::default()
            }),
            additional_state: provisioned.map(|p| p.additional_state.clone()),
        },
        status: None,
    }
}

/// The error code of a failed S3 or IAM call.
pub fn error_code<E: ProvideErrorMetadata + std::fmt::Debug>(
    result: Result<impl std::fmt::Debug, aws_sdk_s3::error::SdkError<E>>,
) -> String {
    match result {
        Ok(ok) => panic!("expected a failure, got {ok:?}"),
        Err(aws_sdk_s3::error::SdkError::ServiceError(e)) => match e.err().code() {
            Some(code) => code.to_string(),
            // moto wraps IAM's authorization errors in <Errors>, as EC2 does, which the IAM
            // client does not parse: read the code from the body.
            None => {
                let body = String::from_utf8_lossy(e.raw().body().bytes().unwrap_or_default());
                let code = body.split("<Code>").nth(1).and_then(|r| r.split("</Code>").next());
                code.map(String::from).unwrap_or_else(|| format!("no code in {body}"))
            }
        },
        Err(other) => panic!("expected a service error, got {other:?}"),
    }
}

/// Writes, reads back, lists and deletes an object in `bucket` with `s3`.
pub async fn read_write(s3: &aws_sdk_s3::Client, bucket: &str) {
    s3.head_bucket().bucket(bucket).send().await.expect("HeadBucket with the claim's keys");
    s3.put_object()
        .bucket(bucket)
        .key("hello.txt")
        .body(b"hello".to_vec().into())
        .send()
        .await
        .expect("PutObject with the claim's keys");
    let got = s3.get_object().bucket(bucket).key("hello.txt").send().await.unwrap();
    assert_eq!(got.body.collect().await.unwrap().into_bytes().as_ref(), b"hello");
    let listed = s3.list_objects_v2().bucket(bucket).send().await.unwrap();
    assert_eq!(listed.contents().len(), 1);
    s3.delete_object().bucket(bucket).key("hello.txt").send().await.unwrap();
}

/// Checks that `s3`/`iam` (a claim's keys) are refused on `other` bucket and on IAM.
pub async fn denied_elsewhere(s3: &aws_sdk_s3::Client, iam: &aws_sdk_iam::Client, other: &str) {
    let put = s3.put_object().bucket(other).key("x").body(b"x".to_vec().into()).send().await;
    assert_eq!(error_code(put), "AccessDenied", "PutObject on another bucket");
    let get = s3.get_object().bucket(other).key("keep.txt").send().await;
    assert_eq!(error_code(get), "AccessDenied", "GetObject on another bucket");
    let list = s3.list_objects_v2().bucket(other).send().await;
    assert_eq!(error_code(list), "AccessDenied", "ListObjects on another bucket");
    assert_eq!(error_code(s3.list_buckets().send().await), "AccessDenied", "ListBuckets");
    assert_eq!(error_code(iam.list_users().send().await), "AccessDenied", "iam:ListUsers");
    let create = iam.create_user().user_name(format!("intruder-{}", suffix())).send().await;
    assert_eq!(error_code(create), "AccessDenied", "iam:CreateUser");
}
