//! What the backend needs from Kubernetes, as two small traits, and [`KubeCluster`], which
//! implements them with a client. The Garage logic never holds a client; tests may implement
//! the traits with anything.

use std::collections::BTreeMap;

use async_trait::async_trait;
use bucket_provisioner::BackendError;
use bucket_provisioner::bucket::remote;
use kube::Client;

use crate::params::{SecretRef, TOKEN_KEY};

/// Reads the admin token from the Secret a StorageClass names.
#[async_trait]
pub trait AdminToken: Send + Sync {
    /// The token in `secret` under [`TOKEN_KEY`]. A missing Secret or key is a permanent error
    /// naming the Secret; a cluster that cannot be asked right now is a transient one.
    async fn admin_token(&self, secret: &SecretRef) -> Result<String, BackendError>;
}

/// Looks up a StorageClass's parameters, to clean up after a claim whose ObjectBucket was never
/// written.
#[async_trait]
pub trait ClassParameters: Send + Sync {
    /// The parameters of StorageClass `name` as the backend is given them (without `bucketName`
    /// and what else the library reads itself), or `None` when it is gone.
    async fn class_parameters(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, BackendError>;
}

/// Reads admin tokens and StorageClass parameters from the cluster.
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

/// The token from a Secret's decoded data, with errors that name the Secret (never a value).
pub fn token_from_data(
    secret: &SecretRef,
    data: &BTreeMap<String, Vec<u8>>,
) -> Result<String, BackendError> {
    data.get(TOKEN_KEY)
        .map(|v| String::from_utf8_lossy(v).trim().to_string())
        .filter(|v| !v.is_empty())
        .ok_or_else(|| {
            BackendError::permanent(
                "AdminSecretInvalid",
                format!(
                    "admin token Secret {secret} lacks {TOKEN_KEY}; put Garage's admin token in it"
                ),
            )
        })
}

#[async_trait]
impl AdminToken for KubeCluster {
    async fn admin_token(&self, secret: &SecretRef) -> Result<String, BackendError> {
        let data = remote::secret_data(&self.client, secret).await?.ok_or_else(|| {
            BackendError::permanent(
                "AdminSecretNotFound",
                format!(
                    "admin token Secret {secret} (StorageClass parameters secretName/\
                     secretNamespace) does not exist; create it with {TOKEN_KEY}"
                ),
            )
        })?;
        token_from_data(secret, &data)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_token_names_the_secret_and_never_a_value() {
        let secret = SecretRef { namespace: "infra".into(), name: "garage-admin".into() };
        let data = BTreeMap::from([("OTHER".to_string(), b"s3cr3t".to_vec())]);
        let error = token_from_data(&secret, &data).unwrap_err();
        assert!(error.is_permanent());
        assert!(
            error.to_string().contains("infra/garage-admin")
                && !error.to_string().contains("s3cr3t")
        );
        let data = BTreeMap::from([(TOKEN_KEY.to_string(), b"tok\n".to_vec())]);
        assert_eq!(token_from_data(&secret, &data).unwrap(), "tok");
    }
}
