//! The adapter between the backend and Kubernetes: reads owner Secrets and StorageClasses with a
//! client, so that the S3 and IAM logic never holds one.

use std::collections::BTreeMap;

use async_trait::async_trait;
use bucket_provisioner::{BackendError, Credentials};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::{Api, Client};

use crate::owner::{ClassParameters, OwnerCredentials, credentials_from_data, secret_not_found};
use crate::params::SecretRef;

/// Reads owner credentials and StorageClass parameters from the cluster.
#[derive(Clone)]
pub struct KubeCluster {
    client: Client,
}

impl KubeCluster {
    /// An adapter using `client` (it needs `get` on Secrets and StorageClasses).
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

fn unavailable(what: &str, error: kube::Error) -> BackendError {
    // Forbidden is a deployment problem (RBAC); retrying lets a fixed Role take effect.
    BackendError::transient(format!("reading {what} from the Kubernetes API failed: {error}"))
}

#[async_trait]
impl OwnerCredentials for KubeCluster {
    async fn owner_credentials(&self, secret: &SecretRef) -> Result<Credentials, BackendError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &secret.namespace);
        let found = api
            .get_opt(&secret.name)
            .await
            .map_err(|e| unavailable(&format!("Secret {secret}"), e))?
            .ok_or_else(|| secret_not_found(secret))?;
        let mut data: BTreeMap<String, Vec<u8>> =
            found.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
        // stringData is write-only on the server, but a Secret built in memory may carry it.
        for (key, value) in found.string_data.unwrap_or_default() {
            data.entry(key).or_insert_with(|| value.into_bytes());
        }
        credentials_from_data(secret, &data)
    }
}

#[async_trait]
impl ClassParameters for KubeCluster {
    async fn class_parameters(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, BackendError> {
        let api: Api<StorageClass> = Api::all(self.client.clone());
        let class =
            api.get_opt(name).await.map_err(|e| unavailable(&format!("StorageClass {name}"), e))?;
        Ok(class.map(|c| {
            let mut parameters = c.parameters.unwrap_or_default();
            // What the library reads itself never reaches the backend's settings.
            parameters.remove(bucket_api::contract::STORAGE_CLASS_BUCKET_NAME);
            for name in bucket_api::contract::class_limits::ALL
                .iter()
                .chain(&bucket_api::contract::class_rotation::ALL)
            {
                parameters.remove(*name);
            }
            parameters
        }))
    }
}
