//! The v1alpha1 protocol over a real socket against the hostPath backend: what the v0.2.2
//! sidecar sends, and what a consumer of the Secret it writes can do.

mod common;

use bucket_provisioner::Provisioner;
use bucket_provisioner::bucket::standalone::{cosi_account_id, cosi_bucket_owner};
use common::{DRIVER, Harness, params, write_refused, writes_reads_lists};
use cosi_driver::proto::v1alpha1 as pb;
use cosi_driver::v1alpha1::secret_keys;
use tonic::Code;

fn create(name: &str, parameters: &[(&str, &str)]) -> pb::DriverCreateBucketRequest {
    pb::DriverCreateBucketRequest { name: name.to_owned(), parameters: params(parameters) }
}

fn grant(
    bucket_id: &str,
    name: &str,
    parameters: &[(&str, &str)],
) -> pb::DriverGrantBucketAccessRequest {
    pb::DriverGrantBucketAccessRequest {
        bucket_id: bucket_id.to_owned(),
        name: name.to_owned(),
        authentication_type: pb::AuthenticationType::Key.into(),
        parameters: params(parameters),
    }
}

fn revoke(bucket_id: &str, account_id: &str) -> pb::DriverRevokeBucketAccessRequest {
    pb::DriverRevokeBucketAccessRequest {
        bucket_id: bucket_id.to_owned(),
        account_id: account_id.to_owned(),
        revoke_access_context: Default::default(),
    }
}

/// The S3 details of a grant: endpoint, id, secret.
fn s3(answer: &pb::DriverGrantBucketAccessResponse) -> (String, String, String) {
    assert_eq!(answer.credentials.len(), 1, "the v0.2.2 sidecar wants exactly one entry");
    let secrets = &answer.credentials[secret_keys::S3].secrets;
    assert_eq!(secrets[secret_keys::REGION], "us-east-1");
    (
        secrets[secret_keys::ENDPOINT].clone(),
        secrets[secret_keys::ACCESS_KEY_ID].clone(),
        secrets[secret_keys::ACCESS_SECRET_KEY].clone(),
    )
}

#[tokio::test]
async fn a_bucket_and_its_accesses_live_and_go_through_v1alpha1() {
    let h = Harness::start().await;
    let info = pb::identity_client::IdentityClient::new(h.channel.clone())
        .driver_get_info(pb::DriverGetInfoRequest {})
        .await
        .unwrap();
    assert_eq!(info.into_inner().name, DRIVER);

    let mut cosi = h.v1();
    let name = "bucketclass-0f6a3c1e-4d2b-4d8e-9a51-5c1f8e2d7b3a";
    let created = cosi.driver_create_bucket(create(name, &[("maxObjects", "100")])).await.unwrap();
    let created = created.into_inner();
    assert!(created.bucket_id.starts_with(&format!("{name}..cosi-b-")), "{}", created.bucket_id);
    assert!(h.store.bucket_exists(name).unwrap());
    // Repeated, as the sidecar does after a restart: the same answer, nothing new.
    let again = cosi.driver_create_bucket(create(name, &[("maxObjects", "100")])).await.unwrap();
    assert_eq!(again.into_inner(), created);
    assert_eq!(h.store.bucket_names().await.unwrap(), vec![name.to_owned()]);

    let id = &created.bucket_id;
    let first =
        cosi.driver_grant_bucket_access(grant(id, "ba-1111", &[])).await.unwrap().into_inner();
    let (endpoint, key, secret) = s3(&first);
    writes_reads_lists(&h.s3_client(&endpoint, &key, &secret), name).await;
    let repeated = cosi.driver_grant_bucket_access(grant(id, "ba-1111", &[])).await.unwrap();
    assert_eq!(repeated.into_inner(), first, "a repeated grant answers the same key");
    assert_eq!(h.key_count(&first.account_id), 1);

    let reader = cosi
        .driver_grant_bucket_access(grant(id, "ba-2222", &[("accessMode", "ReadOnly")]))
        .await
        .unwrap()
        .into_inner();
    let (_, reader_key, reader_secret) = s3(&reader);
    assert_ne!(reader_key, key, "a second access gets a key of its own");
    let reading = h.s3_client(&endpoint, &reader_key, &reader_secret);
    assert_eq!(write_refused(&reading, name).await, "AccessDenied");
    reading.get_object().bucket(name).key("hello.txt").send().await.unwrap();

    cosi.driver_revoke_bucket_access(revoke(id, &first.account_id)).await.unwrap();
    cosi.driver_revoke_bucket_access(revoke(id, &first.account_id)).await.unwrap();
    let revoked = h.s3_client(&endpoint, &key, &secret);
    assert_eq!(write_refused(&revoked, name).await, "InvalidAccessKeyId");
    // The other access is untouched.
    reading.get_object().bucket(name).key("hello.txt").send().await.unwrap();

    let delete = || pb::DriverDeleteBucketRequest {
        bucket_id: id.clone(),
        delete_context: Default::default(),
    };
    cosi.driver_delete_bucket(delete()).await.unwrap();
    assert!(!h.store.bucket_exists(name).unwrap());
    assert_eq!(h.key_count(&reader.account_id), 0, "the bucket's keys went with it");
    cosi.driver_delete_bucket(delete()).await.unwrap();
}

#[tokio::test]
async fn v1alpha1_refusals_carry_the_spec_codes_and_create_nothing() {
    let h = Harness::start().await;
    let mut cosi = h.v1();
    let bad = cosi.driver_create_bucket(create("Not_A_Bucket", &[])).await.unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().contains("Not_A_Bucket"), "{}", bad.message());
    let bad =
        cosi.driver_create_bucket(create("b-quota", &[("maxSize", "lots")])).await.unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().contains("maxSize"), "{}", bad.message());
    let bad =
        cosi.driver_create_bucket(create("b-colour", &[("colour", "red")])).await.unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().contains("colour"), "{}", bad.message());
    assert!(h.store.bucket_names().await.unwrap().is_empty(), "nothing was created");

    let id = cosi.driver_create_bucket(create("b-one", &[])).await.unwrap().into_inner().bucket_id;
    let other =
        cosi.driver_create_bucket(create("b-one", &[("maxObjects", "5")])).await.unwrap_err();
    assert_eq!(other.code(), Code::AlreadyExists, "{}", other.message());

    let mut iam = grant(&id, "ba-3333", &[]);
    iam.authentication_type = pb::AuthenticationType::Iam.into();
    // IAM reads the access's ServiceAccount from the cluster: a driver without its Kubernetes
    // lookup cannot, and says so (and issues no key in its place).
    let refused = cosi.driver_grant_bucket_access(iam).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unimplemented);
    assert!(refused.message().contains("authenticationType IAM"), "{}", refused.message());
    assert!(h.store.keys_for_user(&cosi_account_id("ba-3333")).is_empty(), "no key issued");

    cosi.driver_grant_bucket_access(grant(&id, "ba-4444", &[])).await.unwrap();
    let changed = cosi
        .driver_grant_bucket_access(grant(&id, "ba-4444", &[("accessMode", "ReadOnly")]))
        .await
        .unwrap_err();
    assert_eq!(changed.code(), Code::AlreadyExists, "{}", changed.message());

    let bad =
        cosi.driver_grant_bucket_access(grant(&id, "ba-5555", &[("accessMode", "Always")])).await;
    assert_eq!(bad.unwrap_err().code(), Code::InvalidArgument);
    let forged = cosi.driver_grant_bucket_access(grant("b-one..obc-1234", "ba-6", &[])).await;
    assert_eq!(forged.unwrap_err().code(), Code::InvalidArgument);

    // A claim's bucket is not reachable through COSI, by its name or any id.
    h.claim_bucket("claims-bucket").await;
    let foreign = cosi.driver_grant_bucket_access(grant("claims-bucket", "ba-7777", &[])).await;
    assert_eq!(foreign.unwrap_err().code(), Code::NotFound);
    let gone = cosi.driver_grant_bucket_access(grant("no-such-bucket", "ba-7777", &[])).await;
    assert_eq!(gone.unwrap_err().code(), Code::NotFound);
    // Nor can COSI revoke a claim's keys or delete its bucket.
    let claim_user = bucket_provisioner::user_id_for_claim("0b1e6c1a-claim");
    let revoke_claim = cosi.driver_revoke_bucket_access(revoke("claims-bucket", &claim_user)).await;
    assert_eq!(revoke_claim.unwrap_err().code(), Code::InvalidArgument);
    let delete_claim = pb::DriverDeleteBucketRequest {
        bucket_id: format!("claims-bucket..{claim_user}"),
        delete_context: Default::default(),
    };
    assert_eq!(
        cosi.driver_delete_bucket(delete_claim).await.unwrap_err().code(),
        Code::InvalidArgument
    );
    let as_static = pb::DriverDeleteBucketRequest {
        bucket_id: "claims-bucket".into(),
        delete_context: Default::default(),
    };
    cosi.driver_delete_bucket(as_static).await.unwrap();
    // An id in the form this driver issues, naming the claim's bucket: the backend's record
    // decides, and it names the claim.
    let forged =
        format!("claims-bucket..{}", cosi_bucket_owner("claims-bucket", &Default::default()));
    let granted = cosi.driver_grant_bucket_access(grant(&forged, "ba-8888", &[])).await;
    assert_eq!(granted.unwrap_err().code(), Code::NotFound);
    let delete_forged =
        pb::DriverDeleteBucketRequest { bucket_id: forged, delete_context: Default::default() };
    cosi.driver_delete_bucket(delete_forged).await.unwrap();
    assert!(
        h.store.bucket_exists("claims-bucket").unwrap(),
        "neither a static nor a forged id deletes it"
    );
    assert_eq!(h.key_count(&claim_user), 1, "the claim keeps its key");
    // And a claim cannot take over the COSI bucket by name.
    let options =
        bucket_provisioner::BucketOptions { bucket_name: "b-one".into(), ..claim_options() };
    assert!(h.backend.provision(&options).await.unwrap_err().is_name_taken());
}

fn claim_options() -> bucket_provisioner::BucketOptions {
    bucket_provisioner::BucketOptions {
        bucket_name: String::new(),
        user_id: bucket_provisioner::user_id_for_claim("9c0e-other-claim"),
        reclaim_policy: bucket_api::ReclaimPolicy::Delete,
        parameters: Default::default(),
        additional_config: Default::default(),
        access_mode: Default::default(),
        storage_class_name: "hostpath".into(),
        web_identity: None,
        claim: Default::default(),
    }
}

#[tokio::test]
async fn class_quotas_hold_for_the_bucket_and_for_each_key() {
    let h = Harness::start().await;
    let mut cosi = h.v1();
    let put = |client: aws_sdk_s3::Client, key: &'static str| async move {
        let body = aws_sdk_s3::primitives::ByteStream::from_static(b"x");
        let sent = client.put_object().bucket("quota-bucket").key(key).body(body).send().await;
        sent.map(drop).map_err(|e| common::code(&e))
    };
    // The BucketClass limits the bucket to two objects, the access class each key to one.
    let created = cosi.driver_create_bucket(create("quota-bucket", &[("maxObjects", "2")])).await;
    let id = created.unwrap().into_inner().bucket_id;
    let limited = |name: &str| grant(&id, name, &[("maxObjects", "1")]);
    let one = cosi.driver_grant_bucket_access(limited("ba-q1")).await.unwrap().into_inner();
    let two = cosi.driver_grant_bucket_access(limited("ba-q2")).await.unwrap().into_inner();
    let three = cosi.driver_grant_bucket_access(grant(&id, "ba-q3", &[])).await.unwrap();
    let client = |answer: &pb::DriverGrantBucketAccessResponse| {
        let (endpoint, key, secret) = s3(answer);
        h.s3_client(&endpoint, &key, &secret)
    };
    assert_eq!(put(client(&one), "a").await, Ok(()));
    assert_eq!(put(client(&one), "b").await, Err("QuotaExceeded".into()), "the key's limit");
    assert_eq!(put(client(&two), "c").await, Ok(()));
    let unlimited_key = client(&three.into_inner());
    assert_eq!(put(unlimited_key, "d").await, Err("QuotaExceeded".into()), "the bucket's limit");
}
