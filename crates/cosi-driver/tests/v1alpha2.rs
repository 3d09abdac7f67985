//! The v1alpha2 protocol over a real socket against the hostPath backend: per-bucket modes,
//! static buckets, and the refusals the spec names.

mod common;

use common::{DRIVER, Harness, params, write_refused, writes_reads_lists};
use cosi_driver::proto::v1alpha2 as pb;
use tonic::Code;

use pb::access_mode::Mode;
use pb::driver_grant_bucket_access_request::AccessedBucket;

fn s3() -> Option<pb::ObjectProtocol> {
    Some(pb::ObjectProtocol { r#type: pb::object_protocol::Type::S3.into() })
}

fn create(name: &str, parameters: &[(&str, &str)]) -> pb::DriverCreateBucketRequest {
    pb::DriverCreateBucketRequest {
        name: name.to_owned(),
        protocols: s3().into_iter().collect(),
        parameters: params(parameters),
    }
}

fn grant(account: &str, buckets: &[(&str, Mode)]) -> pb::DriverGrantBucketAccessRequest {
    pb::DriverGrantBucketAccessRequest {
        account_name: account.to_owned(),
        protocol: s3(),
        authentication_type: Some(pb::AuthenticationType {
            r#type: pb::authentication_type::Type::Key.into(),
        }),
        service_account_name: String::new(),
        parameters: Default::default(),
        buckets: buckets
            .iter()
            .map(|(id, mode)| AccessedBucket {
                bucket_id: (*id).to_owned(),
                access_mode: Some(pb::AccessMode { mode: (*mode).into() }),
            })
            .collect(),
    }
}

fn revoke(account_id: &str, bucket_id: &str) -> pb::DriverRevokeBucketAccessRequest {
    pb::DriverRevokeBucketAccessRequest {
        account_id: account_id.to_owned(),
        protocol: s3(),
        authentication_type: None,
        service_account_name: String::new(),
        parameters: Default::default(),
        buckets: vec![pb::driver_revoke_bucket_access_request::AccessedBucket {
            bucket_id: bucket_id.to_owned(),
        }],
    }
}

fn delete(bucket_id: &str) -> pb::DriverDeleteBucketRequest {
    pb::DriverDeleteBucketRequest {
        bucket_id: bucket_id.to_owned(),
        parameters: Default::default(),
    }
}

/// The S3 key and the endpoint of a grant's first bucket.
fn key(answer: &pb::DriverGrantBucketAccessResponse) -> (String, String, String) {
    let creds = answer.credentials.as_ref().unwrap().s3.as_ref().unwrap();
    let info = answer.buckets[0].bucket_info.as_ref().unwrap().s3.as_ref().unwrap();
    (info.endpoint.clone(), creds.access_key_id.clone(), creds.access_secret_key.clone())
}

#[tokio::test]
async fn a_bucket_and_its_accesses_live_and_go_through_v1alpha2() {
    let h = Harness::start().await;
    let info = pb::identity_client::IdentityClient::new(h.channel.clone())
        .driver_get_info(pb::DriverGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, DRIVER);
    assert_eq!(info.supported_protocols, s3().into_iter().collect::<Vec<_>>());

    let mut cosi = h.v2();
    let name = "bc-7d1e2f30-5a6b-4c7d-8e9f-0a1b2c3d4e5f";
    let created = cosi.driver_create_bucket(create(name, &[])).await.unwrap().into_inner();
    let bucket_info = created.protocols.as_ref().unwrap().s3.as_ref().unwrap();
    assert_eq!(bucket_info.bucket_id, name);
    let again = cosi.driver_create_bucket(create(name, &[])).await.unwrap().into_inner();
    assert_eq!(again, created);
    let id = created.bucket_id.as_str();

    let writer = cosi.driver_grant_bucket_access(grant("ba-aaaa", &[(id, Mode::ReadWrite)])).await;
    let writer = writer.unwrap().into_inner();
    assert_eq!(writer.buckets[0].bucket_id, id);
    let (endpoint, k, s) = key(&writer);
    let writing = h.s3_client(&endpoint, &k, &s);
    writes_reads_lists(&writing, name).await;
    let repeated =
        cosi.driver_grant_bucket_access(grant("ba-aaaa", &[(id, Mode::ReadWrite)])).await;
    assert_eq!(repeated.unwrap().into_inner(), writer);
    assert_eq!(h.key_count(&writer.account_id), 1);

    let reader = cosi.driver_grant_bucket_access(grant("ba-bbbb", &[(id, Mode::ReadOnly)])).await;
    let reader = reader.unwrap().into_inner();
    let (_, rk, rs) = key(&reader);
    assert_ne!(rk, k);
    let reading = h.s3_client(&endpoint, &rk, &rs);
    assert_eq!(write_refused(&reading, name).await, "AccessDenied");
    reading.list_objects_v2().bucket(name).send().await.unwrap();

    let only_writes =
        cosi.driver_grant_bucket_access(grant("ba-cccc", &[(id, Mode::WriteOnly)])).await;
    let (_, wk, ws) = key(&only_writes.unwrap().into_inner());
    let blind = h.s3_client(&endpoint, &wk, &ws);
    let read = blind.get_object().bucket(name).key("hello.txt").send().await.unwrap_err();
    assert_eq!(common::code(&read), "AccessDenied");

    cosi.driver_revoke_bucket_access(revoke(&writer.account_id, id)).await.unwrap();
    cosi.driver_revoke_bucket_access(revoke(&writer.account_id, id)).await.unwrap();
    assert_eq!(write_refused(&writing, name).await, "InvalidAccessKeyId");

    cosi.driver_delete_bucket(delete(id)).await.unwrap();
    assert!(!h.store.bucket_exists(name).unwrap());
    cosi.driver_delete_bucket(delete(id)).await.unwrap();
}

#[tokio::test]
async fn static_buckets_are_found_granted_and_never_deleted() {
    let h = Harness::start().await;
    let mut cosi = h.v2();
    h.store.create_operator_bucket("operators-bucket", None).await.unwrap();
    let existing = pb::DriverGetExistingBucketRequest {
        existing_bucket_id: "operators-bucket".into(),
        protocols: s3().into_iter().collect(),
        parameters: Default::default(),
    };
    let found = cosi.driver_get_existing_bucket(existing.clone()).await.unwrap().into_inner();
    assert_eq!(found.bucket_id, "operators-bucket");
    let granted = cosi
        .driver_grant_bucket_access(grant("ba-static", &[("operators-bucket", Mode::ReadWrite)]))
        .await
        .unwrap()
        .into_inner();
    let (endpoint, k, s) = key(&granted);
    writes_reads_lists(&h.s3_client(&endpoint, &k, &s), "operators-bucket").await;
    cosi.driver_delete_bucket(delete("operators-bucket")).await.unwrap();
    assert!(h.store.bucket_exists("operators-bucket").unwrap(), "a static bucket stays");

    // A created bucket's id as a static one is refused: its Bucket's deletion would delete it.
    let created = cosi.driver_create_bucket(create("made-here", &[])).await.unwrap().into_inner();
    let as_static = pb::DriverGetExistingBucketRequest {
        existing_bucket_id: created.bucket_id.clone(),
        ..existing.clone()
    };
    let refused = cosi.driver_get_existing_bucket(as_static).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("\"made-here\""), "{}", refused.message());
    let by_name = pb::DriverGetExistingBucketRequest {
        existing_bucket_id: "made-here".into(),
        ..existing.clone()
    };
    assert_eq!(
        cosi.driver_get_existing_bucket(by_name).await.unwrap().into_inner().bucket_id,
        "made-here"
    );

    let missing = pb::DriverGetExistingBucketRequest {
        existing_bucket_id: "nowhere".into(),
        ..existing.clone()
    };
    assert_eq!(cosi.driver_get_existing_bucket(missing).await.unwrap_err().code(), Code::NotFound);
    h.claim_bucket("claims-bucket").await;
    let claims = pb::DriverGetExistingBucketRequest {
        existing_bucket_id: "claims-bucket".into(),
        ..existing
    };
    assert_eq!(cosi.driver_get_existing_bucket(claims).await.unwrap_err().code(), Code::NotFound);
}

#[tokio::test]
async fn v1alpha2_refusals_carry_the_spec_codes() {
    let h = Harness::start().await;
    let mut cosi = h.v2();
    let one =
        cosi.driver_create_bucket(create("bucket-one", &[])).await.unwrap().into_inner().bucket_id;
    let two =
        cosi.driver_create_bucket(create("bucket-two", &[])).await.unwrap().into_inner().bucket_id;

    let both = grant("ba-multi", &[(&one, Mode::ReadWrite), (&two, Mode::ReadOnly)]);
    let refused = cosi.driver_grant_bucket_access(both).await.unwrap_err();
    assert_eq!(refused.code(), Code::OutOfRange, "{}", refused.message());
    assert_eq!(
        h.key_count(&bucket_provisioner::bucket::standalone::cosi_account_id("ba-multi")),
        0
    );

    let mut azure = create("bucket-azure", &[]);
    azure.protocols = vec![pb::ObjectProtocol { r#type: pb::object_protocol::Type::Azure.into() }];
    let refused = cosi.driver_create_bucket(azure).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("AZURE"), "{}", refused.message());

    let mut by_identity = grant("ba-sa", &[(&one, Mode::ReadWrite)]);
    by_identity.authentication_type = Some(pb::AuthenticationType {
        r#type: pb::authentication_type::Type::ServiceAccount.into(),
    });
    by_identity.service_account_name = "app".into();
    let refused = cosi.driver_grant_bucket_access(by_identity).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("ServiceAccount"), "{}", refused.message());

    let unset = grant("ba-nomode", &[(&one, Mode::Unknown)]);
    let refused = cosi.driver_grant_bucket_access(unset).await.unwrap_err();
    assert!(refused.message().contains("buckets[0].access_mode"), "{}", refused.message());

    let mut capped = grant("ba-capped", &[(&one, Mode::ReadWrite)]);
    capped.parameters = params(&[("limitAccessMode", "ReadOnly")]);
    let refused = cosi.driver_grant_bucket_access(capped).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("limitAccessMode"), "{}", refused.message());

    cosi.driver_grant_bucket_access(grant("ba-same", &[(&one, Mode::ReadWrite)])).await.unwrap();
    let other_mode =
        cosi.driver_grant_bucket_access(grant("ba-same", &[(&one, Mode::ReadOnly)])).await;
    assert_eq!(other_mode.unwrap_err().code(), Code::AlreadyExists);
    let other_bucket =
        cosi.driver_grant_bucket_access(grant("ba-same", &[(&two, Mode::ReadWrite)])).await;
    assert_eq!(other_bucket.unwrap_err().code(), Code::AlreadyExists);
    let other_params = cosi.driver_create_bucket(create("bucket-one", &[("maxSize", "1Gi")])).await;
    assert_eq!(other_params.unwrap_err().code(), Code::AlreadyExists);
}
