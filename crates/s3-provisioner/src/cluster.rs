//! The adapter between the backend and Kubernetes: reads owner Secrets and StorageClasses with a
//! client, so that the S3 and IAM logic never holds one.

use std::collections::BTreeMap;

use async_trait::async_trait;
use bucket_provisioner::bucket::remote;
use bucket_provisioner::{BackendError, Credentials};
use kube::Client;

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

#[async_trait]
impl OwnerCredentials for KubeCluster {
    async fn owner_credentials(&self, secret: &SecretRef) -> Result<Credentials, BackendError> {
        let data = remote::secret_data(&self.client, secret)
            .await?
            .ok_or_else(|| secret_not_found(secret))?;
        credentials_from_data(secret, &data)
    }
}

#[async_trait]
impl ClassParameters for KubeCluster {
    async fn class_parameters(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, BackendError> {
        remote::class_parameters(&self.client, name).await
    }
}
