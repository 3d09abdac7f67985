//! The real control plane with an S3 provisioner running in this process against moto.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bucket_api::{ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec};
use bucket_provisioner::Credentials;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use s3_provisioner::{KubeCluster, S3Provisioner};
use test_support::{
    ControlPlane, Deployed, bucket_class, client_with_crds, create_claim, delete_claim_and_wait,
    deployed_identity, eventually, test_namespace, wait_for_claim,
};

use super::moto::Moto;

/// One test's world: moto, a namespace on the shared control plane, and its APIs.
pub struct Setup {
    /// The S3/IAM server.
    pub moto: Moto,
    /// Administrator client of the control plane.
    pub client: Client,
    /// A client acting as `deploy/s3/` deploys the provisioner: its ServiceAccount and RBAC.
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
}

/// Starts moto and makes a namespace named after `prefix`.
pub async fn setup(prefix: &str) -> Setup {
    let moto = Moto::start().await;
    let client = client_with_crds().await;
    let ns = test_namespace(&client, prefix).await;
    let identity = deployed_identity(ControlPlane::shared(), Deployed::S3).await.unwrap();
    Setup {
        moto,
        deployed: identity.client().await,
        claims: Api::namespaced(client.clone(), &ns),
        secrets: Api::namespaced(client.clone(), &ns),
        config_maps: Api::namespaced(client.clone(), &ns),
        buckets: Api::all(client.clone()),
        client,
        ns,
    }
}

impl Setup {
    /// A fresh backend (as after a process start) reading owner Secrets through the cluster.
    pub fn backend(&self) -> S3Provisioner {
        let cluster = Arc::new(KubeCluster::new(self.deployed.clone()));
        S3Provisioner::new(cluster.clone()).with_class_parameters(cluster).with_max_attempts(2)
    }

    /// Stores `keys` in Secret `name` of the test namespace (only the keys given).
    pub async fn owner_secret(&self, name: &str, id: Option<&str>, secret: Option<&str>) {
        let mut data = BTreeMap::new();
        if let Some(id) = id {
            data.insert("AWS_ACCESS_KEY_ID".to_string(), id.to_string());
        }
        if let Some(secret) = secret {
            data.insert("AWS_SECRET_ACCESS_KEY".to_string(), secret.to_string());
        }
        let secret = Secret {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            string_data: Some(data),
            ..Default::default()
        };
        self.secrets.create(&PostParams::default(), &secret).await.expect("creating a Secret");
    }

    /// Stores the owner's `keys` in Secret `name`.
    pub async fn owner_keys(&self, name: &str, keys: &Credentials) {
        self.owner_secret(name, Some(&keys.access_key_id), Some(&keys.secret_access_key)).await;
    }

    /// A StorageClass for `provisioner` pointing at moto with owner Secret `secret`, plus
    /// `extra` parameters.
    pub async fn class(
        &self,
        provisioner: &str,
        secret: &str,
        extra: &[(&str, &str)],
        reclaim_policy: Option<&str>,
    ) -> String {
        let mut parameters = BTreeMap::from([
            ("endpoint".to_string(), self.moto.endpoint.clone()),
            ("forcePathStyle".to_string(), "true".to_string()),
            ("secretName".to_string(), secret.to_string()),
            ("secretNamespace".to_string(), self.ns.clone()),
        ]);
        parameters.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        bucket_class(&self.client, "s3-class", provisioner, parameters, reclaim_policy).await
    }

    /// Creates claim `name` with `spec`.
    pub async fn claim(&self, name: &str, spec: ObjectBucketClaimSpec) -> ObjectBucketClaim {
        create_claim(&self.claims, name, spec).await
    }

    /// Waits for claim `name` to reach `phase` with a `Ready` condition of `reason`.
    pub async fn wait_for(&self, name: &str, phase: ClaimPhase, reason: &str) -> ObjectBucketClaim {
        wait_for_claim(&self.claims, name, phase, reason).await
    }

    /// Deletes claim `name` and waits until it is gone.
    pub async fn delete_and_wait(&self, name: &str) {
        delete_claim_and_wait(&self.claims, name).await;
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

    /// Events about claim `name`: (reason, note).
    pub async fn events(&self, name: &str) -> Vec<(String, String)> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), &self.ns);
        events
            .list(&ListParams::default())
            .await
            .expect("listing Events")
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect()
    }

    /// Waits for an Event of `reason` about claim `name`.
    pub async fn wait_event(&self, name: &str, reason: &str) {
        eventually(&format!("an Event {reason} on claim {name}"), || async {
            self.events(name).await.iter().any(|(r, _)| r == reason).then_some(())
        })
        .await
    }

    /// Names (`namespace/name`) of every Secret in the cluster holding `value`.
    pub async fn secrets_holding(&self, value: &str) -> BTreeSet<String> {
        let all: Api<Secret> = Api::all(self.client.clone());
        all.list(&ListParams::default())
            .await
            .expect("listing Secrets")
            .into_iter()
            .filter(|s| {
                s.data.iter().flatten().any(|(_, v)| v.0 == value.as_bytes())
                    || s.string_data.iter().flatten().any(|(_, v)| v == value)
            })
            .map(|s| format!("{}/{}", s.namespace().unwrap_or_default(), s.name_any()))
            .collect()
    }
}

/// A claim spec for `class` and bucket `bucket`.
pub fn spec(class: &str, bucket: &str) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec {
        storage_class_name: class.into(),
        bucket_name: Some(bucket.into()),
        ..Default::default()
    }
}
