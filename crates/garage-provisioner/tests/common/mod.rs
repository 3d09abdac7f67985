//! Shared pieces of the Garage provisioner's tests: a three-node Garage cluster, a namespace on
//! the shared control plane, a controller acting as `deploy/garage/` deploys it, and what a
//! consumer and an operator see.

#![allow(dead_code)] // each test binary uses its own part

use std::collections::BTreeMap;
use std::sync::Arc;

use bucket_api::{ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec};
use bucket_provisioner::Credentials;
use garage_provisioner::admin::{Admin, AdminHttp};
use garage_provisioner::api::{BucketInfo, BucketListItem, KeyListItem};
use garage_provisioner::empty::{http_client, s3_client};
use garage_provisioner::{GarageProvisioner, KubeCluster, SecretRef, Settings};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
pub use test_support::Harness;
use test_support::garage::{GARAGE_REGION, GarageCluster};
use test_support::{
    ControlPlane, Deployed, bucket_class, client_with_crds, create_claim, deployed_identity,
    test_namespace, wait_claim_gone, wait_for_claim,
};

/// The Secret in each test namespace holding the admin token.
pub const TOKEN_SECRET: &str = "garage-admin";

/// One test's world: a Garage cluster, a namespace on the shared control plane, its APIs.
pub struct Setup {
    /// The three Garage nodes.
    pub garage: GarageCluster,
    /// Administrator client of the control plane.
    pub client: Client,
    /// A client acting as `deploy/garage/` deploys the provisioner.
    pub deployed: Client,
    /// The test's namespace.
    pub ns: String,
    /// Claims in it.
    pub claims: Api<ObjectBucketClaim>,
    /// Secrets in it.
    pub secrets: Api<Secret>,
    /// ConfigMaps in it.
    pub config_maps: Api<ConfigMap>,
    /// ObjectBuckets.
    pub buckets: Api<ObjectBucket>,
    /// An admin client for checks.
    pub http: AdminHttp,
}

/// Starts three Garage nodes, makes a namespace named after `prefix` and stores the admin
/// token in Secret [`TOKEN_SECRET`] there.
pub async fn setup(prefix: &str) -> Setup {
    let garage = GarageCluster::start(3).await.expect("a three-node Garage cluster");
    let client = client_with_crds().await;
    let ns = test_namespace(&client, prefix).await;
    let identity = deployed_identity(ControlPlane::shared(), Deployed::Garage).await.unwrap();
    let s = Setup {
        deployed: identity.client().await,
        claims: Api::namespaced(client.clone(), &ns),
        secrets: Api::namespaced(client.clone(), &ns),
        config_maps: Api::namespaced(client.clone(), &ns),
        buckets: Api::all(client.clone()),
        http: AdminHttp::new(),
        garage,
        client,
        ns,
    };
    let token = s.garage.admin_token.clone();
    s.token_secret(TOKEN_SECRET, &token).await;
    s
}

impl Setup {
    /// A fresh backend (as after a process start) reading the token through the cluster.
    pub fn backend(&self) -> GarageProvisioner {
        let cluster = Arc::new(KubeCluster::new(self.deployed.clone()));
        GarageProvisioner::new(cluster.clone()).with_class_parameters(cluster)
    }

    /// Stores `token` in Secret `name`.
    pub async fn token_secret(&self, name: &str, token: &str) {
        let secret = Secret {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            string_data: Some(BTreeMap::from([("GARAGE_ADMIN_TOKEN".into(), token.into())])),
            ..Default::default()
        };
        self.secrets.create(&PostParams::default(), &secret).await.expect("creating a Secret");
    }

    /// StorageClass parameters for Garage node `node` with the namespace's token Secret.
    pub fn parameters(&self, node: usize) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("adminEndpoint".into(), self.garage.nodes[node].admin_url()),
            ("endpoint".into(), self.garage.nodes[node].s3_url()),
            ("region".into(), GARAGE_REGION.into()),
            ("secretName".into(), TOKEN_SECRET.into()),
            ("secretNamespace".into(), self.ns.clone()),
        ])
    }

    /// The settings those parameters make.
    pub fn settings(&self, node: usize) -> Settings {
        Settings::from_parameters(&self.parameters(node)).unwrap()
    }

    /// A StorageClass for `provisioner` on node 0, with `extra` parameters (which replace).
    pub async fn class(
        &self,
        provisioner: &str,
        extra: &[(&str, &str)],
        reclaim_policy: &str,
    ) -> String {
        let mut parameters = self.parameters(0);
        parameters.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        bucket_class(&self.client, "garage-class", provisioner, parameters, Some(reclaim_policy))
            .await
    }

    /// Creates claim `name` with `spec`.
    pub async fn claim(&self, name: &str, spec: ObjectBucketClaimSpec) -> ObjectBucketClaim {
        create_claim(&self.claims, name, spec).await
    }

    /// Waits for claim `name` to reach `phase` with a `Ready` condition of `reason`.
    pub async fn wait_for(&self, name: &str, phase: ClaimPhase, reason: &str) -> ObjectBucketClaim {
        wait_for_claim(&self.claims, name, phase, reason).await
    }

    /// Waits (up to `wait`) for claim `name` to be gone.
    pub async fn wait_gone(&self, name: &str) {
        wait_claim_gone(&self.claims, name).await;
    }

    /// Deletes claim `name` and waits until it is gone.
    pub async fn delete_and_wait(&self, name: &str) {
        self.claims.delete(name, &DeleteParams::default()).await.expect("deleting the claim");
        self.wait_gone(name).await;
    }

    /// The keys in the claim's Secret.
    pub async fn claim_keys(&self, name: &str) -> Credentials {
        let data = self.secrets.get(name).await.expect("the claim's Secret").data.unwrap();
        let read = |k: &str| String::from_utf8(data[k].0.clone()).unwrap();
        Credentials {
            access_key_id: read("AWS_ACCESS_KEY_ID"),
            secret_access_key: read("AWS_SECRET_ACCESS_KEY"),
        }
    }

    /// An S3 client as a consumer pod builds it from nothing but the claim's Secret and
    /// ConfigMap (`envFrom` both), and the bucket name the ConfigMap gives.
    pub async fn consumer(&self, name: &str) -> (aws_sdk_s3::Client, String) {
        let config = self.config_maps.get(name).await.expect("the claim's ConfigMap").data.unwrap();
        let parameters = BTreeMap::from([
            ("adminEndpoint".to_string(), "http://unused:1".to_string()),
            (
                "endpoint".to_string(),
                format!("http://{}:{}", config["BUCKET_HOST"], config["BUCKET_PORT"]),
            ),
            ("region".to_string(), config["BUCKET_REGION"].clone()),
            ("secretName".to_string(), "unused".to_string()),
            ("secretNamespace".to_string(), "unused".to_string()),
        ]);
        let settings = Settings::from_parameters(&parameters).unwrap();
        let keys = self.claim_keys(name).await;
        (s3_client(&settings, &keys, &http_client()), config["BUCKET_NAME"].clone())
    }

    /// An S3 client of node `node` with `keys`.
    pub fn s3(&self, node: usize, keys: &Credentials) -> aws_sdk_s3::Client {
        s3_client(&self.settings(node), keys, &http_client())
    }

    /// An admin client of `endpoints` with the cluster's token.
    pub fn admin<'a>(
        &'a self,
        endpoints: &'a garage_provisioner::endpoints::AdminEndpoints,
        secret: &'a SecretRef,
    ) -> Admin<'a> {
        Admin { http: &self.http, endpoints, token: &self.garage.admin_token, secret }
    }

    /// `GetBucketInfo` of the bucket named `name` on node 0, if it exists.
    pub async fn bucket_info(&self, name: &str) -> Option<BucketInfo> {
        let settings = self.settings(0);
        let admin = self.admin(&settings.admin, &settings.token_secret);
        match admin.get::<BucketInfo>("GetBucketInfo", &[("globalAlias", name)]).await {
            Ok(info) => Some(info),
            Err(e) if e.code() == Some("NoSuchBucket") => None,
            Err(e) => panic!("GetBucketInfo {name}: {e:?}"),
        }
    }

    /// Every bucket in Garage.
    pub async fn all_buckets(&self) -> Vec<BucketListItem> {
        let settings = self.settings(0);
        self.admin(&settings.admin, &settings.token_secret).get("ListBuckets", &[]).await.unwrap()
    }

    /// Every bucket in Garage that a quorum read by id still finds: a listing is answered from
    /// one node's copy of the table, which may still hold a bucket deleted moments ago.
    pub async fn live_buckets(&self) -> Vec<BucketInfo> {
        let settings = self.settings(0);
        let admin = self.admin(&settings.admin, &settings.token_secret);
        let mut live = Vec::new();
        for bucket in self.all_buckets().await {
            match admin.get::<BucketInfo>("GetBucketInfo", &[("id", &bucket.id)]).await {
                Ok(info) => live.push(info),
                Err(e) if e.code() == Some("NoSuchBucket") => {}
                Err(e) => panic!("GetBucketInfo {}: {e:?}", bucket.id),
            }
        }
        live
    }

    /// Every key in Garage.
    pub async fn all_keys(&self) -> Vec<KeyListItem> {
        let settings = self.settings(0);
        self.admin(&settings.admin, &settings.token_secret).get("ListKeys", &[]).await.unwrap()
    }
}

/// A claim spec for `class` and bucket `bucket` (a generated name when empty, which a class
/// naming an existing bucket overrides), with `config` as additionalConfig.
pub fn spec(class: &str, bucket: &str, config: &[(&str, &str)]) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec {
        storage_class_name: class.into(),
        bucket_name: (!bucket.is_empty()).then(|| bucket.into()),
        generate_bucket_name: bucket.is_empty().then(|| "gen".into()),
        additional_config: (!config.is_empty())
            .then(|| config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        ..Default::default()
    }
}

/// Writes, reads back and lists `key` in `bucket`.
pub async fn write_read_list(s3: &aws_sdk_s3::Client, bucket: &str, key: &str, body: &[u8]) {
    s3.put_object()
        .bucket(bucket)
        .key(key)
        .body(body.to_vec().into())
        .send()
        .await
        .unwrap_or_else(|e| panic!("PutObject {bucket}/{key}: {e:?}"));
    let got = s3.get_object().bucket(bucket).key(key).send().await.expect("GetObject");
    assert_eq!(got.body.collect().await.unwrap().into_bytes().as_ref(), body);
    let listed = s3.list_objects_v2().bucket(bucket).send().await.expect("ListObjectsV2");
    assert!(listed.contents().iter().any(|o| o.key() == Some(key)), "{key} listed");
}

/// The S3 error code of a failed call.
pub fn error_code<
    T: std::fmt::Debug,
    E: aws_sdk_s3::error::ProvideErrorMetadata + std::fmt::Debug,
>(
    result: Result<T, aws_sdk_s3::error::SdkError<E>>,
) -> String {
    match result {
        Ok(ok) => panic!("expected a refusal, got {ok:?}"),
        Err(aws_sdk_s3::error::SdkError::ServiceError(e)) => {
            e.err().code().unwrap_or("no code").to_string()
        }
        Err(other) => panic!("expected a service error, got {other:?}"),
    }
}
