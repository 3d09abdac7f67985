//! COSI accesses of `authenticationType: IAM` on S3 + IAM, against a real moto server with IAM
//! enforced and the owner allowed only what the book lists: a role per access with its mode on
//! each of its buckets, no user and no key, gone with the access or with a bucket it reaches.
//! Sessions come as in `web_identity.rs` (see there: moto evaluates no trust policy).

mod common;

use std::sync::Arc;

use bucket_provisioner::bucket::standalone::KeyRequest;
use bucket_provisioner::{
    AccessMode, BackendError, Provisioner, Removed, WEB_IDENTITY_NOT_SUPPORTED, WebIdentityOptions,
};
use common::FixedOwner;
use common::moto::Moto;
use common::sessions::{get, put, s3_with, session, trust_of};
use s3_provisioner::backend::cosi_roles::COSI_ROLE_OWNER_ACTIONS;
use s3_provisioner::backend::standalone::COSI_OWNER_ACTIONS;
use s3_provisioner::owner::{OWNER_ACTIONS, WEB_IDENTITY_OWNER_ACTIONS};
use s3_provisioner::{S3Provisioner, iam};
use serde_json::json;
use test_support::standalone_requests::{key_request, new_bucket};

const PROVIDER: &str = "arn:aws:iam::123456789012:oidc-provider/oidc.example.com/id/CLUSTER";
const READER: &str = "system:serviceaccount:app:reader";

/// A COSI driver whose owner may do what the book lists for COSI accesses of IAM; with
/// `provider`, its parameters name the cluster's OIDC provider.
async fn driver(moto: &Moto, provider: Option<&str>) -> S3Provisioner {
    let actions: Vec<&str> = [&OWNER_ACTIONS[..], &COSI_OWNER_ACTIONS, &WEB_IDENTITY_OWNER_ACTIONS]
        .into_iter()
        .chain([&COSI_ROLE_OWNER_ACTIONS[..]])
        .flatten()
        .copied()
        .collect();
    let owner = moto.user_allowed(&format!("owner-{}", common::suffix()), &actions).await;
    let mut parameters = common::store_parameters(&moto.endpoint);
    if let Some(provider) = provider {
        parameters.insert("webIdentityProvider".into(), provider.into());
    }
    S3Provisioner::new(Arc::new(FixedOwner(owner)))
        .with_standalone(&parameters)
        .expect("the driver's parameters are valid")
}

async fn bucket(driver: &S3Provisioner, name: &str) -> String {
    let new = new_bucket(name, &[]);
    driver.create_bucket(&new).await.unwrap();
    new.owner_id
}

fn iam_access(access: &str, buckets: &[(&str, AccessMode)]) -> KeyRequest {
    KeyRequest {
        web_identity: Some(WebIdentityOptions {
            subjects: vec![READER.to_owned()],
            max_session_secs: 3600,
            sessions_only: true,
        }),
        ..key_request(access, buckets)
    }
}

async fn users_named(moto: &Moto, name: &str) -> usize {
    let users = moto.iam(&moto.admin).list_users().send().await.unwrap();
    users.users().iter().filter(|u| u.user_name() == name).count()
}

#[tokio::test]
async fn an_iam_access_gets_a_role_with_its_mode_on_each_bucket_and_loses_it_when_revoked() {
    let moto = Moto::start().await;
    let driver = driver(&moto, Some(PROVIDER)).await;
    let suffix = common::suffix();
    let (read, write, other) =
        (format!("read-{suffix}"), format!("write-{suffix}"), format!("other-{suffix}"));
    for name in [&read, &write, &other] {
        bucket(&driver, name).await;
    }
    let admin = moto.s3(&moto.admin);
    admin.put_object().bucket(&read).key("k").body(b"x".to_vec().into()).send().await.unwrap();

    let access = format!("reader-{suffix}");
    let request =
        iam_access(&access, &[(&read, AccessMode::ReadOnly), (&write, AccessMode::ReadWrite)]);
    let issued = driver.issue_key(&request).await.unwrap();
    assert!(issued.credentials.access_key_id.is_empty(), "no key is handed out");
    let role = iam::user_name(&request.owner_id);
    let identity = issued.web_identity.expect("the role is answered");
    assert_eq!(
        identity.role_arn,
        format!("arn:aws:iam::123456789012:role/bucket-provisioner/{role}")
    );
    assert_eq!(identity.sts_endpoint, moto.endpoint);
    assert_eq!(users_named(&moto, &role).await, 0, "an access of IAM has no user");
    let trust = trust_of(&moto, &role).await.expect("the role exists");
    let condition = &trust["Statement"][0]["Condition"]["StringEquals"];
    assert_eq!(condition["oidc.example.com/id/CLUSTER:sub"], json!([READER]));
    assert_eq!(condition["oidc.example.com/id/CLUSTER:aud"], "sts.amazonaws.com");

    // The access's mode on each of its buckets, and nothing elsewhere.
    let s3 = s3_with(&moto, &session(&moto, &identity.role_arn).await);
    get(&s3, &read, "k").await.unwrap();
    assert_eq!(put(&s3, &read, "new").await, Err("AccessDenied".into()));
    put(&s3, &write, "new").await.unwrap();
    assert_eq!(put(&s3, &other, "new").await, Err("AccessDenied".into()));

    // A retry answers the same role; the same access asking for more is refused.
    assert_eq!(driver.issue_key(&request).await.unwrap().web_identity, Some(identity.clone()));
    let wider = iam_access(&access, &[(&read, AccessMode::ReadWrite)]);
    let conflict = driver.issue_key(&wider).await.unwrap_err();
    assert!(conflict.is_access_conflict(), "{conflict:?}");
    assert_eq!(put(&s3, &read, "new").await, Err("AccessDenied".into()), "nothing widened");

    // Revoked: the role goes, and its sessions are worth nothing from the next request.
    driver.revoke_key(&request.owner_id).await.unwrap();
    assert!(trust_of(&moto, &role).await.is_none());
    assert_ne!(get(&s3, &read, "k").await, Ok(()));
    driver.revoke_key(&request.owner_id).await.unwrap();
}

#[tokio::test]
async fn deleting_a_bucket_takes_the_roles_reaching_it() {
    let moto = Moto::start().await;
    let driver = driver(&moto, Some(PROVIDER)).await;
    let suffix = common::suffix();
    let name = format!("going-{suffix}");
    let owner_id = bucket(&driver, &name).await;
    let request = iam_access(&format!("left-{suffix}"), &[(&name, AccessMode::ReadWrite)]);
    driver.issue_key(&request).await.unwrap();
    let role = iam::user_name(&request.owner_id);
    assert!(trust_of(&moto, &role).await.is_some());

    assert_eq!(driver.delete_bucket(&name, &owner_id).await.unwrap(), Removed::Bucket);
    assert!(
        trust_of(&moto, &role).await.is_none(),
        "a role reaching the name would reach a new bucket"
    );
}

#[tokio::test]
async fn a_driver_naming_no_provider_refuses_iam_accesses_by_name_and_makes_nothing() {
    let moto = Moto::start().await;
    let driver = driver(&moto, None).await;
    let name = format!("keys-only-{}", common::suffix());
    bucket(&driver, &name).await;
    let request =
        iam_access(&format!("refused-{}", common::suffix()), &[(&name, AccessMode::ReadWrite)]);
    let refusal = driver.issue_key(&request).await.unwrap_err();
    let BackendError::Permanent { reason, message } = &refusal else { panic!("{refusal:?}") };
    assert_eq!(reason, WEB_IDENTITY_NOT_SUPPORTED);
    assert!(message.contains("webIdentityProvider"), "{message}");
    let made = iam::user_name(&request.owner_id);
    assert_eq!(users_named(&moto, &made).await, 0);
    assert!(trust_of(&moto, &made).await.is_none());
    // Revoking what was never made is done, and asks IAM for no role.
    driver.revoke_key(&request.owner_id).await.unwrap();
}
