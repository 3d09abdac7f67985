//! Where the COSI front keeps each access's one key, secret included. IAM shows a secret only
//! when the key is made, and upstream main's sidecar grants every access again each time it
//! starts: without a record, that repeated grant could only replace the key, and every consumer
//! holding the old one would be locked out. With one, a repeated grant answers the key IAM still
//! holds for the access.
//!
//! [`KubeKeyRecords`] keeps each record in a Secret of one namespace (the driver's, beside the
//! owner's keys), which tenants cannot read.

use std::collections::BTreeMap;

use async_trait::async_trait;
use bucket_provisioner::{BackendError, Credentials};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

/// The access key id's key in a record.
const KEY_ID: &str = "AWS_ACCESS_KEY_ID";
/// The secret's key in a record.
const SECRET: &str = "AWS_SECRET_ACCESS_KEY";

/// The keys of COSI accesses, by IAM user.
#[async_trait]
pub trait KeyRecords: Send + Sync {
    /// The key recorded for IAM user `user`, if any.
    async fn read(&self, user: &str) -> Result<Option<Credentials>, BackendError>;
    /// Records `key` as `user`'s one key, replacing any earlier record.
    async fn write(&self, user: &str, key: &Credentials) -> Result<(), BackendError>;
    /// Forgets `user`'s key; done when there is no record.
    async fn remove(&self, user: &str) -> Result<(), BackendError>;
}

/// Records kept as Secrets `cosi-key-<user>` in one namespace.
pub struct KubeKeyRecords {
    secrets: Api<Secret>,
    namespace: String,
}

impl KubeKeyRecords {
    /// Records in `namespace`, through `client` (it needs `get`, `create`, `update` and
    /// `delete` on Secrets there).
    pub fn new(client: Client, namespace: &str) -> Self {
        Self { secrets: Api::namespaced(client, namespace), namespace: namespace.to_owned() }
    }

    fn unavailable(&self, what: &str, user: &str, error: kube::Error) -> BackendError {
        BackendError::transient(format!(
            "{what} the key record of COSI user {user} (Secret {}/{}): {error}",
            self.namespace,
            secret_name(user)
        ))
    }
}

/// The Secret holding `user`'s record: IAM user names may hold capitals and `+=,@_`, which a
/// Secret's name may not (COSI users are `cosi-a-<hex>`, so no two meet).
pub fn secret_name(user: &str) -> String {
    let safe: String = user
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c.to_ascii_lowercase() } else { '-' })
        .collect();
    format!("cosi-key-{safe}").trim_end_matches('-').to_owned()
}

#[async_trait]
impl KeyRecords for KubeKeyRecords {
    async fn read(&self, user: &str) -> Result<Option<Credentials>, BackendError> {
        let found = self.secrets.get_opt(&secret_name(user)).await;
        let Some(secret) = found.map_err(|e| self.unavailable("reading", user, e))? else {
            return Ok(None);
        };
        let data = secret.data.unwrap_or_default();
        let text = |key: &str| data.get(key).and_then(|v| String::from_utf8(v.0.clone()).ok());
        // A record written by hand or cut short is no record: the grant makes a new key.
        Ok(text(KEY_ID).zip(text(SECRET)).map(|(access_key_id, secret_access_key)| Credentials {
            access_key_id,
            secret_access_key,
        }))
    }

    async fn write(&self, user: &str, key: &Credentials) -> Result<(), BackendError> {
        let name = secret_name(user);
        let data = BTreeMap::from([
            (KEY_ID.to_owned(), ByteString(key.access_key_id.clone().into_bytes())),
            (SECRET.to_owned(), ByteString(key.secret_access_key.clone().into_bytes())),
        ]);
        let found = self.secrets.get_opt(&name).await;
        let written = match found.map_err(|e| self.unavailable("reading", user, e))? {
            Some(mut secret) => {
                secret.data = Some(data);
                secret.string_data = None;
                self.secrets.replace(&name, &PostParams::default(), &secret).await
            }
            None => {
                let labels = BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_owned(),
                    "s3-bucket-provisioner".to_owned(),
                )]);
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(name),
                        labels: Some(labels),
                        ..Default::default()
                    },
                    type_: Some("Opaque".into()),
                    data: Some(data),
                    ..Default::default()
                };
                self.secrets.create(&PostParams::default(), &secret).await
            }
        };
        written.map(drop).map_err(|e| self.unavailable("writing", user, e))
    }

    async fn remove(&self, user: &str) -> Result<(), BackendError> {
        match self.secrets.delete(&secret_name(user), &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(e) => Err(self.unavailable("deleting", user, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn record_names_are_secret_names() {
        assert_eq!(secret_name("cosi-a-0123abc"), "cosi-key-cosi-a-0123abc");
        assert_eq!(secret_name("Some+User@x_"), "cosi-key-some-user-x");
    }

    proptest! {
        #[test]
        fn any_iam_user_name_makes_a_valid_secret_name(user in "[A-Za-z0-9+=,.@_-]{1,64}") {
            let name = secret_name(&user);
            prop_assert!(name.len() <= 253);
            prop_assert!(name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
            prop_assert!(!name.ends_with('-'));
        }
    }
}
