//! The S3 + IAM driver under the real upstream COSI controller and sidecar, both versions, on
//! moto with IAM enforced: `s3-bucket-provisioner --cosi-only` as `deploy/cosi/s3` runs it (its
//! ServiceAccount's token and RBAC, the owner's keys in the Secret an operator fills), its store
//! named with `--cosi-parameter`, tenants as namespace-scoped identities. The checks are
//! `test_support::cosi_e2e`'s; a consumer uses nothing but the access Secret.

mod common;

use std::collections::BTreeMap;

use aws_sdk_s3::Client as S3;
use aws_sdk_s3::config::{Credentials, Region};
use aws_sdk_s3::error::ProvideErrorMetadata;
use common::moto::Moto;
use cosi_driver::proto::v1alpha2::DriverDeleteBucketRequest;
use cosi_driver::proto::v1alpha2::provisioner_client::ProvisionerClient;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use s3_provisioner::backend::cosi_roles::COSI_ROLE_OWNER_ACTIONS;
use s3_provisioner::backend::standalone::COSI_OWNER_ACTIONS;
use s3_provisioner::owner::{OWNER_ACTIONS, WEB_IDENTITY_OWNER_ACTIONS};
use test_support::cosi::CosiVersion;
use test_support::cosi_e2e::{self, CosiStore};
use test_support::cosi_world::{CosiWorld, DriverBinary};
use test_support::{DEPLOY_NAMESPACE, Deployed, S3Access};

/// The Secret `deploy/cosi/s3/30-owner-credentials.yaml` ships for the owner's keys.
const OWNER_SECRET: &str = "s3-owner-credentials";

/// moto, as a consumer and its operator reach it.
struct MotoStore {
    moto: Moto,
}

/// An S3 client made from nothing but an access Secret.
fn consumer(access: &S3Access) -> S3 {
    let credentials =
        Credentials::new(&access.access_key_id, &access.secret_access_key, None, None, "cosi");
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .region(Region::new(access.region.clone()))
        .endpoint_url(&access.endpoint)
        .credentials_provider(credentials)
        .force_path_style(true)
        .build();
    S3::from_conf(config)
}

/// A failed call's S3 error code ("unknown" when no service answered).
fn code<E: ProvideErrorMetadata, R>(error: aws_sdk_s3::error::SdkError<E, R>) -> String {
    error.code().unwrap_or("unknown").to_owned()
}

impl CosiStore for MotoStore {
    async fn put(&self, access: &S3Access, key: &str, body: &[u8]) -> Result<(), String> {
        let put = consumer(access).put_object().bucket(&access.bucket).key(key);
        put.body(body.to_vec().into()).send().await.map(drop).map_err(code)
    }

    async fn get(&self, access: &S3Access, key: &str) -> Result<Vec<u8>, String> {
        let got = consumer(access).get_object().bucket(&access.bucket).key(key).send().await;
        Ok(got.map_err(code)?.body.collect().await.unwrap().into_bytes().to_vec())
    }

    async fn list(&self, access: &S3Access) -> Result<Vec<String>, String> {
        let listed = consumer(access).list_objects_v2().bucket(&access.bucket).send().await;
        let listed = listed.map_err(code)?;
        Ok(listed.contents().iter().filter_map(|o| o.key().map(Into::into)).collect())
    }

    async fn delete(&self, access: &S3Access, key: &str) -> Result<(), String> {
        let delete = consumer(access).delete_object().bucket(&access.bucket).key(key);
        delete.send().await.map(drop).map_err(code)
    }

    async fn bucket_exists(&self, bucket: &str) -> bool {
        self.moto.bucket_exists(bucket).await
    }

    async fn operator_keys(&self, bucket: &str) -> Vec<String> {
        self.moto.object_keys(bucket).await
    }

    async fn operator_bucket(&self, bucket: &str, keys: &[&str]) {
        self.moto.existing_bucket(bucket, keys).await;
    }

    async fn delete_bucket_call(&self, world: &CosiWorld, bucket_id: &str) -> Result<(), String> {
        delete_bucket_call(world, bucket_id).await
    }
}

/// `DriverDeleteBucket` on the driver's v1alpha2 service, as main's sidecar would call it.
async fn delete_bucket_call(world: &CosiWorld, bucket_id: &str) -> Result<(), String> {
    let socket = format!("unix://{}", world.socket.display());
    let mut driver = ProvisionerClient::connect(socket).await.map_err(|e| format!("{e:?}"))?;
    let request = DriverDeleteBucketRequest {
        bucket_id: bucket_id.to_owned(),
        parameters: Default::default(),
    };
    driver.driver_delete_bucket(request).await.map(drop).map_err(|s| format!("{s:?}"))
}

/// moto, and the driver under `version` with an owner allowed what the book's S3 chapter lists;
/// with `provider`, the driver lets ServiceAccounts in through that OIDC provider.
async fn start(version: CosiVersion, provider: Option<&str>) -> (CosiWorld, MotoStore) {
    let moto = Moto::start().await;
    let mut actions: Vec<&str> = OWNER_ACTIONS.iter().chain(&COSI_OWNER_ACTIONS).copied().collect();
    if provider.is_some() {
        actions.extend(WEB_IDENTITY_OWNER_ACTIONS.iter().chain(&COSI_ROLE_OWNER_ACTIONS));
    }
    let owner = moto.user_allowed("cosi-owner", &actions).await;
    // moto in place of AWS; the owner's Secret is the one the Deployment names.
    let mut store = BTreeMap::from([
        ("endpoint".to_owned(), moto.endpoint.clone()),
        ("forcePathStyle".to_owned(), "true".to_owned()),
    ]);
    if let Some(provider) = provider {
        store.insert("webIdentityProvider".to_owned(), provider.to_owned());
    }
    let driver = DriverBinary {
        program: env!("CARGO_BIN_EXE_s3-bucket-provisioner").into(),
        args: Vec::new(),
        store,
    };
    let world = CosiWorld::start(version, Deployed::CosiS3, "s3", driver).await.unwrap();
    // The operator fills the owner's Secret, as 30-owner-credentials.yaml asks.
    let secret = Secret {
        metadata: ObjectMeta { name: Some(OWNER_SECRET.into()), ..Default::default() },
        string_data: Some(BTreeMap::from([
            ("AWS_ACCESS_KEY_ID".to_owned(), owner.access_key_id.clone()),
            ("AWS_SECRET_ACCESS_KEY".to_owned(), owner.secret_access_key.clone()),
        ])),
        ..Default::default()
    };
    let secrets: Api<Secret> = Api::namespaced(world.admin.clone(), DEPLOY_NAMESPACE);
    secrets.create(&PostParams::default(), &secret).await.unwrap();
    (world, MotoStore { moto })
}

/// Every key record the driver keeps beside the owner's keys is of an IAM user that still
/// exists: revoking an access or deleting a bucket forgot the keys that went. Answers how many
/// there are.
async fn no_record_outlives_its_key(world: &CosiWorld, store: &MotoStore) -> usize {
    let secrets: Api<Secret> = Api::namespaced(world.admin.clone(), DEPLOY_NAMESPACE);
    let records = secrets.list(&Default::default()).await.unwrap();
    let mut users = Vec::new();
    for name in records.items.iter().filter_map(|s| s.metadata.name.as_deref()) {
        if let Some(user) = name.strip_prefix("cosi-key-") {
            assert!(store.moto.user_exists(user).await, "record {name} outlived its user");
            users.push(user.to_owned());
        }
    }
    users.len()
}

#[tokio::test]
async fn v1alpha1_claim_access_and_consumer() {
    let (mut world, store) = start(CosiVersion::V1Alpha1, None).await;
    cosi_e2e::claim_access_and_consumer(&mut world, &store).await;
    // v0.2.2 revoked every access with its claim: no key, no record.
    assert_eq!(no_record_outlives_its_key(&world, &store).await, 0);
}

/// One world for both checks of main: a control plane and moto fewer.
#[tokio::test]
async fn v1alpha2_claim_access_consumer_and_static_bucket() {
    let (mut world, store) = start(CosiVersion::V1Alpha2, None).await;
    cosi_e2e::claim_access_and_consumer(&mut world, &store).await;
    cosi_e2e::static_bucket_is_granted_and_kept(&mut world, &store).await;
    // The accesses main never revoked keep their recorded keys.
    assert!(no_record_outlives_its_key(&world, &store).await > 0, "keys in use are recorded");
}

/// v1alpha1's `authenticationType: IAM` under the upstream v0.2.2 controller and sidecar, the
/// driver given the cluster's OIDC provider: the access's ServiceAccount (named on the
/// BucketAccess, in the access's namespace) gets an IAM role of the access's own, trusted for it
/// alone, whose sessions reach the bucket; the access holds no key, its `status.accountID` is the
/// role's ARN, and deleting the access deletes the role.
#[tokio::test]
async fn v1alpha1_an_iam_access_gets_a_role_of_its_own_and_no_key() {
    use common::sessions::{put, s3_with, session, trust_of};
    use kube::api::DeleteParams;

    const PROVIDER: &str = "arn:aws:iam::123456789012:oidc-provider/oidc.example.com/id/CLUSTER";
    let version = CosiVersion::V1Alpha1;
    let (world, store) = start(version, Some(PROVIDER)).await;
    let tenant = world.tenant("cosi-iam").await;
    let bucket = world.claim(&tenant, "data", &world.delete_class).await;
    world.service_account(&tenant.namespace, "app").await;
    let class_name = world.iam_access_class().await;
    let accesses = version.api(&tenant.client, "BucketAccess", Some(&tenant.namespace));
    let names = (class_name.as_str(), "data", "iam-creds");
    let role_arn = world.iam_access(&tenant, "pod-identity", names, "app").await;
    let role = role_arn
        .strip_prefix("arn:aws:iam::123456789012:role/bucket-provisioner/")
        .unwrap_or_else(|| panic!("not a role of the driver's: {role_arn}"));

    // Trusted for the access's ServiceAccount alone, through the provider.
    let moto = &store.moto;
    let trust = trust_of(moto, role).await.expect("the role exists");
    let subject = format!("system:serviceaccount:{}:app", tenant.namespace);
    let condition = &trust["Statement"][0]["Condition"]["StringEquals"];
    assert_eq!(condition["oidc.example.com/id/CLUSTER:sub"], serde_json::json!([subject]));
    assert_eq!(trust["Statement"][0]["Principal"]["Federated"], PROVIDER);
    assert!(!moto.user_exists(role).await, "an access of IAM has no user");

    // The Secret says where, and holds no key; a session of the role reaches the bucket.
    let secrets: Api<Secret> = Api::namespaced(world.admin.clone(), &tenant.namespace);
    let secret = test_support::eventually("the IAM access's Secret", || async {
        secrets.get_opt("iam-creds").await.ok().flatten()
    })
    .await;
    let info = String::from_utf8(secret.data.unwrap()["BucketInfo"].0.clone()).unwrap();
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    let s3_info = &info["spec"]["secretS3"];
    assert_eq!(s3_info["accessKeyID"].as_str().unwrap_or_default(), "", "no key: {info}");
    assert_eq!(s3_info["accessSecretKey"].as_str().unwrap_or_default(), "", "no key: {info}");
    assert_eq!(s3_info["endpoint"], moto.endpoint.as_str());
    let s3 = s3_with(moto, &session(moto, &role_arn).await);
    put(&s3, &bucket, "from-a-pod").await.unwrap();

    // Deleting the access deletes the role.
    accesses.delete("pod-identity", &DeleteParams::default()).await.unwrap();
    test_support::eventually("the deleted IAM access's role to go", || async {
        trust_of(moto, role).await.is_none().then_some(())
    })
    .await;
    world.assert_never_forbidden();
}
