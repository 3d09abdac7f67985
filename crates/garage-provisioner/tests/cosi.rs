//! The Garage driver under the real upstream COSI controller and sidecar, both versions, on a
//! real three-node Garage cluster: `garage-bucket-provisioner --cosi-only` as
//! `deploy/cosi/garage` runs it (its ServiceAccount's token and RBAC, the admin token in the
//! Secret an operator fills), its cluster named with `--cosi-parameter`, tenants as
//! namespace-scoped identities. The checks are `test_support::cosi_e2e`'s; a consumer uses
//! nothing but the access Secret.

use std::collections::BTreeMap;

use aws_sdk_s3::Client as S3;
use aws_sdk_s3::config::{Credentials, Region};
use aws_sdk_s3::error::ProvideErrorMetadata;
use cosi_driver::proto::v1alpha2::DriverDeleteBucketRequest;
use cosi_driver::proto::v1alpha2::provisioner_client::ProvisionerClient;
use garage_provisioner::admin::{Admin, AdminHttp};
use garage_provisioner::api::BucketInfo;
use garage_provisioner::names::claim_key_id;
use garage_provisioner::store::Store;
use garage_provisioner::{Settings, empty};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use test_support::cosi::CosiVersion;
use test_support::cosi_e2e::{self, CosiStore};
use test_support::cosi_world::{CosiWorld, DriverBinary};
use test_support::garage::{GARAGE_REGION, GarageCluster};
use test_support::{DEPLOY_NAMESPACE, Deployed, S3Access};

/// The Secret `deploy/cosi/garage/30-admin-token.yaml` ships for the admin token.
const TOKEN_SECRET: &str = "garage-admin-token";

/// The Garage cluster, as a consumer and its operator reach it.
struct GarageStore {
    garage: GarageCluster,
    settings: Settings,
    http: AdminHttp,
    /// The operator's own S3 key, allowed on the buckets it looks into.
    operator: bucket_provisioner::Credentials,
}

/// The store: node 0's APIs, and the token's Secret as the Deployment names it.
fn store_parameters(garage: &GarageCluster) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("adminEndpoint".into(), garage.nodes[0].admin_url()),
        ("endpoint".into(), garage.nodes[0].s3_url()),
        ("region".into(), GARAGE_REGION.into()),
        ("secretName".into(), TOKEN_SECRET.into()),
        ("secretNamespace".into(), DEPLOY_NAMESPACE.into()),
    ])
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

impl GarageStore {
    async fn start() -> GarageStore {
        let garage = GarageCluster::start(3).await.expect("a three-node Garage cluster");
        let settings = Settings::from_parameters(&store_parameters(&garage)).unwrap();
        let http = AdminHttp::new();
        let admin = Admin {
            http: &http,
            endpoints: &settings.admin,
            token: &garage.admin_token,
            secret: &settings.token_secret,
        };
        let id = claim_key_id("operator");
        let operator = Store { admin }.ensure_key(&id, "operator").await.unwrap();
        GarageStore { garage, settings, http, operator }
    }

    fn operator_s3(&self) -> S3 {
        empty::s3_client(&self.settings, &self.operator, &empty::http_client())
    }

    async fn allow_operator(&self, bucket: &str) {
        let key = &self.operator.access_key_id;
        let allow = ["bucket", "allow", "--read", "--write", bucket, "--key", key];
        self.garage.cli(0, &allow).await.unwrap();
    }
}

impl CosiStore for GarageStore {
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
        let admin = Admin {
            http: &self.http,
            endpoints: &self.settings.admin,
            token: &self.garage.admin_token,
            secret: &self.settings.token_secret,
        };
        match admin.get::<BucketInfo>("GetBucketInfo", &[("globalAlias", bucket)]).await {
            Ok(_) => true,
            Err(e) if e.code() == Some("NoSuchBucket") => false,
            Err(e) => panic!("GetBucketInfo {bucket}: {e:?}"),
        }
    }

    async fn operator_keys(&self, bucket: &str) -> Vec<String> {
        self.allow_operator(bucket).await;
        let listed = self.operator_s3().list_objects_v2().bucket(bucket).send().await.unwrap();
        listed.contents().iter().filter_map(|o| o.key().map(Into::into)).collect()
    }

    async fn operator_bucket(&self, bucket: &str, keys: &[&str]) {
        self.garage.cli(0, &["bucket", "create", bucket]).await.unwrap();
        self.allow_operator(bucket).await;
        for key in keys {
            let put = self.operator_s3().put_object().bucket(bucket).key(*key);
            put.body(key.as_bytes().to_vec().into()).send().await.unwrap();
        }
    }

    async fn delete_bucket_call(&self, world: &CosiWorld, bucket_id: &str) -> Result<(), String> {
        let socket = format!("unix://{}", world.socket.display());
        let mut driver = ProvisionerClient::connect(socket).await.map_err(|e| format!("{e:?}"))?;
        let request = DriverDeleteBucketRequest {
            bucket_id: bucket_id.to_owned(),
            parameters: Default::default(),
        };
        driver.driver_delete_bucket(request).await.map(drop).map_err(|s| format!("{s:?}"))
    }
}

/// A Garage cluster, and the driver under `version` with the cluster's admin token.
async fn start(version: CosiVersion) -> (CosiWorld, GarageStore) {
    let store = GarageStore::start().await;
    // This cluster's APIs; the token's Secret is the one the Deployment names.
    let mut parameters = store_parameters(&store.garage);
    parameters.retain(|key, _| ["adminEndpoint", "endpoint", "region"].contains(&key.as_str()));
    let driver = DriverBinary {
        program: env!("CARGO_BIN_EXE_garage-bucket-provisioner").into(),
        args: Vec::new(),
        store: parameters,
    };
    let world = CosiWorld::start(version, Deployed::CosiGarage, "garage", driver).await.unwrap();
    // The operator fills the token's Secret, as 30-admin-token.yaml asks.
    let secret = Secret {
        metadata: ObjectMeta { name: Some(TOKEN_SECRET.into()), ..Default::default() },
        string_data: Some(BTreeMap::from([(
            "GARAGE_ADMIN_TOKEN".to_owned(),
            store.garage.admin_token.clone(),
        )])),
        ..Default::default()
    };
    let secrets: Api<Secret> = Api::namespaced(world.admin.clone(), DEPLOY_NAMESPACE);
    secrets.create(&PostParams::default(), &secret).await.unwrap();
    (world, store)
}

#[tokio::test]
async fn v1alpha1_claim_access_and_consumer() {
    let (mut world, store) = start(CosiVersion::V1Alpha1).await;
    cosi_e2e::claim_access_and_consumer(&mut world, &store).await;
}

/// One world for both checks of main: a control plane and a Garage cluster fewer.
#[tokio::test]
async fn v1alpha2_claim_access_consumer_and_static_bucket() {
    let (mut world, store) = start(CosiVersion::V1Alpha2).await;
    cosi_e2e::claim_access_and_consumer(&mut world, &store).await;
    cosi_e2e::static_bucket_is_granted_and_kept(&mut world, &store).await;
}
