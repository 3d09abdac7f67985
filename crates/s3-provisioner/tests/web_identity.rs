//! Claims whose ServiceAccounts assume a role of the claim's own, against a real moto server
//! with IAM enforced, the owner allowed only what the README lists.
//!
//! moto answers `AssumeRoleWithWebIdentity` only unsigned, and with IAM enforced it refuses
//! every unsigned request; nor does it evaluate trust policies. So the sessions here come from
//! `AssumeRoleWithWebIdentity` signed by moto's administrator: what moto proves is the
//! role's permissions at each request (the claim's mode on the claim's bucket, narrowed and
//! ended when the claim is), and the trust policy is checked as the document IAM would evaluate.

mod common;

use std::sync::Arc;

use bucket_provisioner::{AccessMode, BackendError, Credentials, Provisioner, WebIdentityOptions};
use common::moto::Moto;
use common::sessions::{get, put, s3_with, session, trust_of};
use common::{FixedOwner, claim, moto_parameters, object_bucket, options, with};
use kube::ResourceExt;
use s3_provisioner::S3Provisioner;
use s3_provisioner::iam;
use s3_provisioner::owner::{OWNER_ACTIONS, WEB_IDENTITY_OWNER_ACTIONS};
use serde_json::json;

const PROVIDER: &str = "arn:aws:iam::123456789012:oidc-provider/oidc.example.com/id/CLUSTER";

/// An owner allowed what the README lists for classes with web identity.
async fn owner(moto: &Moto) -> Credentials {
    let actions: Vec<&str> =
        OWNER_ACTIONS.iter().chain(&WEB_IDENTITY_OWNER_ACTIONS).copied().collect();
    moto.user_allowed(&format!("owner-{}", common::suffix()), &actions).await
}

fn letting_in(subjects: &[&str], sessions_only: bool) -> Option<WebIdentityOptions> {
    Some(WebIdentityOptions {
        subjects: subjects.iter().map(|s| s.to_string()).collect(),
        max_session_secs: 900,
        sessions_only,
    })
}

#[tokio::test]
async fn a_claims_service_accounts_assume_its_role_with_its_mode_and_lose_it_with_the_claim() {
    let moto = Moto::start().await;
    let backend = S3Provisioner::new(Arc::new(FixedOwner(owner(&moto).await)));
    let base = moto_parameters(&moto);
    let pairs = with(&base, &[("webIdentityProvider", PROVIDER)]);
    let mine = claim(&format!("mine-{}", common::suffix()));
    let other = claim(&format!("other-{}", common::suffix()));
    let mut asked = options(&mine, &pairs);
    asked.web_identity = letting_in(&["system:serviceaccount:ns:app"], false);
    let provisioned = backend.provision(&asked).await.unwrap();
    assert!(!provisioned.credentials.access_key_id.is_empty(), "allowed: the key as well");
    backend.provision(&options(&other, &pairs)).await.unwrap();
    let (bucket, elsewhere) = (&asked.bucket_name, other.spec.bucket_name.clone().unwrap());

    let answered = backend.web_identity(&asked).unwrap();
    let role = iam::user_name(&asked.user_id);
    assert_eq!(
        answered.role_arn,
        format!("arn:aws:iam::123456789012:role/bucket-provisioner/{role}")
    );
    assert_eq!(answered.sts_endpoint, moto.endpoint);
    let trust = trust_of(&moto, &role).await.expect("the claim's role");
    let condition = &trust["Statement"][0]["Condition"]["StringEquals"];
    assert_eq!(
        condition["oidc.example.com/id/CLUSTER:sub"],
        json!(["system:serviceaccount:ns:app"])
    );
    assert_eq!(condition["oidc.example.com/id/CLUSTER:aud"], "sts.amazonaws.com");
    assert_eq!(trust["Statement"][0]["Principal"]["Federated"], PROVIDER);

    // The session may use its claim's bucket and no other.
    let s3 = s3_with(&moto, &session(&moto, &answered.role_arn).await);
    put(&s3, bucket, "k").await.unwrap();
    get(&s3, bucket, "k").await.unwrap();
    assert_eq!(put(&s3, &elsewhere, "k").await.unwrap_err(), "AccessDenied");

    // Narrowed to ReadOnly: the same session reads and cannot write, at its next request.
    let narrowed =
        bucket_provisioner::BucketOptions { access_mode: AccessMode::ReadOnly, ..asked.clone() };
    let recorded = object_bucket(&mine, Some(&provisioned));
    backend.update(&narrowed, &recorded).await.unwrap();
    get(&s3, bucket, "k").await.unwrap();
    assert_eq!(put(&s3, bucket, "k2").await.unwrap_err(), "AccessDenied");

    // Another ServiceAccount added: the trust lists both, and only those.
    let two = bucket_provisioner::BucketOptions {
        web_identity: letting_in(
            &["system:serviceaccount:ns:app", "system:serviceaccount:ns:batch"],
            false,
        ),
        ..narrowed.clone()
    };
    backend.update(&two, &recorded).await.unwrap();
    let trust = trust_of(&moto, &role).await.unwrap();
    assert_eq!(
        trust["Statement"][0]["Condition"]["StringEquals"]["oidc.example.com/id/CLUSTER:sub"],
        json!(["system:serviceaccount:ns:app", "system:serviceaccount:ns:batch"])
    );

    // Every ServiceAccount dropped: the role goes, and its sessions with it.
    let none = bucket_provisioner::BucketOptions { web_identity: None, ..narrowed.clone() };
    backend.update(&none, &recorded).await.unwrap();
    assert!(trust_of(&moto, &role).await.is_none(), "the role is deleted");
    assert_ne!(get(&s3, bucket, "k").await, Ok(()), "a deleted role's session reads nothing");

    // Let in again, then the claim deleted: role, user and bucket go.
    backend.update(&two, &recorded).await.unwrap();
    let s3 = s3_with(&moto, &session(&moto, &answered.role_arn).await);
    get(&s3, bucket, "k").await.unwrap();
    backend.delete(&recorded).await.unwrap();
    assert!(trust_of(&moto, &role).await.is_none(), "deleting the claim deletes its role");
    assert!(moto.users_for(&asked.user_id).await.is_empty());
}

#[tokio::test]
async fn sessions_only_makes_no_user_and_a_revoked_claim_keeps_no_role() {
    let moto = Moto::start().await;
    let backend = S3Provisioner::new(Arc::new(FixedOwner(owner(&moto).await)));
    let base = moto_parameters(&moto);
    let pairs = with(&base, &[("webIdentityProvider", PROVIDER)]);
    let keyless = claim(&format!("keyless-{}", common::suffix()));
    let mut asked = options(&keyless, &pairs);
    asked.web_identity = letting_in(&["system:serviceaccount:ns:app"], true);
    let provisioned = backend.provision(&asked).await.unwrap();
    assert_eq!(provisioned.credentials.access_key_id, "", "no key under sessions only");
    assert!(moto.users_for(&asked.user_id).await.is_empty(), "no IAM user at all");
    let role_arn = backend.web_identity(&asked).unwrap().role_arn;
    let s3 = s3_with(&moto, &session(&moto, &role_arn).await);
    put(&s3, &asked.bucket_name, "k").await.unwrap();

    // A withdrawn share or a lost bucket revokes: the role goes.
    backend.revoke(&object_bucket(&keyless, Some(&provisioned))).await.unwrap();
    let role = iam::user_name(&asked.user_id);
    assert!(trust_of(&moto, &role).await.is_none());
    assert_ne!(get(&s3, &asked.bucket_name, "k").await, Ok(()));
}

#[tokio::test]
async fn classes_that_cannot_let_service_accounts_in_refuse_by_name() {
    let moto = Moto::start().await;
    let backend = S3Provisioner::new(Arc::new(FixedOwner(moto.admin.clone())));
    let c = claim(&format!("refused-{}", common::suffix()));
    let endpoint = moto.endpoint.clone();
    let without = [("endpoint", endpoint.as_str()), ("secretName", "o"), ("secretNamespace", "i")];
    let mut asked = options(&c, &without);
    asked.web_identity = letting_in(&["system:serviceaccount:ns:app"], false);
    let refusal = backend.web_identity(&asked).unwrap_err();
    let BackendError::Permanent { reason, message } = &refusal else { panic!("{refusal:?}") };
    assert_eq!(reason, bucket_provisioner::WEB_IDENTITY_NOT_SUPPORTED);
    assert!(message.contains("webIdentityProvider"), "{message}");

    let owner_keys = [
        ("endpoint", endpoint.as_str()),
        ("secretName", "o"),
        ("secretNamespace", "i"),
        ("createBucketUser", "false"),
        ("webIdentityProvider", PROVIDER),
    ];
    let mut asked = options(&c, &owner_keys);
    asked.web_identity = letting_in(&["system:serviceaccount:ns:app"], false);
    let refusal = backend.web_identity(&asked).unwrap_err().to_string();
    assert!(refusal.contains("createBucketUser"), "{refusal}");

    let bad = [("endpoint", endpoint.as_str()), ("webIdentityProvider", "oidc.example.com")];
    let refusal = backend.validate(&options(&c, &bad)).unwrap_err().to_string();
    assert!(refusal.contains("webIdentityProvider") && refusal.contains("arn:"), "{refusal}");
}

/// As deployed, on the real control plane: a claim of a class giving sessions only binds with
/// no Secret, its ConfigMap names its role and STS, and deleting it deletes the role.
#[tokio::test]
async fn on_the_control_plane_a_keyless_claim_gets_a_role_in_its_config_map_and_no_secret() {
    use bucket_api::{ClaimPhase, ObjectBucketClaimSpec};
    use std::collections::BTreeMap;
    use test_support::{Deployed, Harness};

    let s = common::cluster::setup("s3-keyless").await;
    let controller = Harness::start(s.backend(), Deployed::S3);
    s.owner_keys("owner", &owner(&s.moto).await).await;
    let extra = [("webIdentity", "only"), ("webIdentityProvider", PROVIDER)];
    let class = s.class(&controller.provisioner, "owner", &extra, Some("Delete")).await;
    let spec = ObjectBucketClaimSpec {
        storage_class_name: class,
        generate_bucket_name: Some("keyless".into()),
        additional_config: Some(BTreeMap::from([("serviceAccountName".into(), "app".into())])),
        ..Default::default()
    };
    s.claim("keyless", spec).await;
    let claim = s.wait_for("keyless", ClaimPhase::Bound, "Bound").await;
    let bucket = claim.spec.bucket_name.clone().unwrap();
    let role = iam::user_name(&bucket_provisioner::user_id_for_claim(&claim.uid().unwrap()));

    let config = s.config_maps.get("keyless").await.unwrap().data.unwrap();
    let role_arn = format!("arn:aws:iam::123456789012:role/bucket-provisioner/{role}");
    assert_eq!(config["AWS_ROLE_ARN"], role_arn);
    assert_eq!(config["AWS_ENDPOINT_URL_STS"], s.moto.endpoint);
    assert_eq!(
        config["AWS_WEB_IDENTITY_TOKEN_FILE"],
        "/var/run/secrets/objectbucket.io/serviceaccount/token"
    );
    assert!(s.secrets.get_opt("keyless").await.unwrap().is_none(), "no Secret: sessions only");
    assert!(
        s.moto
            .users_for(&bucket_provisioner::user_id_for_claim(&claim.uid().unwrap()))
            .await
            .is_empty()
    );
    let trust = trust_of(&s.moto, &role).await.expect("the claim's role");
    let subjects =
        &trust["Statement"][0]["Condition"]["StringEquals"]["oidc.example.com/id/CLUSTER:sub"];
    assert_eq!(*subjects, json!([format!("system:serviceaccount:{}:app", s.ns)]));
    let s3 = s3_with(&s.moto, &session(&s.moto, &role_arn).await);
    put(&s3, &bucket, "from-a-pod").await.unwrap();

    s.delete_and_wait("keyless").await;
    assert!(trust_of(&s.moto, &role).await.is_none(), "the role goes with the claim");
    assert!(!s.moto.bucket_exists(&bucket).await);
}
