//! Which Garage cluster a bucket lives in, told apart from how it is reached.
//!
//! Garage names no cluster: its layout lists node ids, which change as nodes are replaced, and
//! addresses change as a cluster moves. What is the cluster's own for as long as the
//! provisioner works with it is the provisioner's key there (see [`crate::names`]): made once
//! per cluster with a random secret, never handed out, and never made again (Garage does not
//! reuse a deleted key's id). The identity is a digest of that secret: the same through every
//! node and every address, different on any other cluster, and telling nothing of the secret.

use bucket_provisioner::{BackendError, Credentials};
use sha2::{Digest, Sha256};

use crate::names::{SERVICE_KEY_NAME, service_key_id};
use crate::store::Store;

/// In the ObjectBucket's `additionalState`: the identity of the cluster holding the bucket.
pub const STATE_CLUSTER_ID: &str = "clusterId";

/// The identity of the cluster whose provisioner key is `service`.
pub fn cluster_id(service: &Credentials) -> String {
    let digest = Sha256::digest(format!("garage cluster {}", service.secret_access_key));
    hex::encode(&digest[..16])
}

/// The provisioner's key on the cluster `store` reaches, read now, or `None` when that cluster
/// has none (the provisioner never worked with it).
pub async fn provisioner_key(store: &Store<'_>) -> Result<Option<Credentials>, BackendError> {
    match store.read_key(&service_key_id(), SERVICE_KEY_NAME).await {
        Ok(keys) => Ok(Some(keys)),
        Err(BackendError::Permanent { reason, .. }) if reason == "GarageKeyDeleted" => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(secret: &str) -> Credentials {
        Credentials { access_key_id: service_key_id(), secret_access_key: secret.into() }
    }

    #[test]
    fn the_identity_follows_the_secret_and_shows_none_of_it() {
        let secret = "5f1c".repeat(16);
        let id = cluster_id(&key(&secret));
        assert_eq!(id, cluster_id(&key(&secret)));
        assert_ne!(id, cluster_id(&key(&"5f1d".repeat(16))));
        assert_eq!(id.len(), 32);
        assert!(!secret.contains(&id) && !id.contains("5f1c5f1c"));
    }
}
