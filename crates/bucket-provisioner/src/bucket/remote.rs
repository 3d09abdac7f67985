//! What a backend on a store reached over the network reads from its StorageClass besides its
//! own keys (the services' URLs, the Secret its credential is kept in) and from the cluster: that
//! Secret's data, and a StorageClass's parameters when a claim's cleanup needs them again.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::{Api, Client};

use crate::BackendError;
use bucket_api::contract;

/// A Secret named by StorageClass parameters, where a backend's credential is kept.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SecretRef {
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A service URL from a parameter: scheme, host and port, nothing else.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ServiceUrl {
    /// `http` or `https`.
    pub scheme: String,
    /// Host name or address (IPv6 in brackets).
    pub host: String,
    /// Port, the scheme's default when the URL names none.
    pub port: u16,
}

impl ServiceUrl {
    /// Parses `value`, the value of parameter `name`; a refusal shows `example` as a good one.
    pub fn parse(name: &str, value: &str, example: &str) -> Result<Self, BackendError> {
        let invalid = |why: &str| {
            BackendError::invalid_parameter(format!(
                "parameter {name} {value:?} {why}; expected a URL such as {example}"
            ))
        };
        let uri: http::Uri = value.parse().map_err(|_| invalid("is not a URL"))?;
        let scheme = match uri.scheme_str() {
            Some("http") => "http",
            Some("https") => "https",
            _ => return Err(invalid("must start with http:// or https://")),
        };
        let authority = uri.authority().ok_or_else(|| invalid("has no host"))?;
        // Credentials belong in a Secret, never in a StorageClass anyone can read.
        if authority.as_str().contains('@') {
            return Err(invalid("must not contain user information"));
        }
        if authority.host().is_empty() {
            return Err(invalid("has no host"));
        }
        if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
            return Err(invalid("must not have a path or query"));
        }
        let port = uri.port_u16().unwrap_or(if scheme == "https" { 443 } else { 80 });
        Ok(Self { scheme: scheme.into(), host: authority.host().into(), port })
    }

    /// `scheme://host:port`.
    pub fn url(&self) -> String {
        format!("{}://{}:{}", self.scheme, self.host, self.port)
    }
}

fn unavailable(what: &str, error: kube::Error) -> BackendError {
    // Forbidden is a deployment problem (RBAC); retrying lets a fixed Role take effect.
    BackendError::transient(format!("reading {what} from the Kubernetes API failed: {error}"))
}

/// The decoded data of `secret` (`stringData` too, which a Secret built in memory may carry), or
/// `None` when it does not exist. A cluster that cannot be asked is a transient error.
pub async fn secret_data(
    client: &Client,
    secret: &SecretRef,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, BackendError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &secret.namespace);
    let Some(found) =
        api.get_opt(&secret.name).await.map_err(|e| unavailable(&format!("Secret {secret}"), e))?
    else {
        return Ok(None);
    };
    let mut data: BTreeMap<String, Vec<u8>> =
        found.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
    for (key, value) in found.string_data.unwrap_or_default() {
        data.entry(key).or_insert_with(|| value.into_bytes());
    }
    Ok(Some(data))
}

/// The parameters of StorageClass `name` as the backend is given them, or `None` when the class
/// is gone.
pub async fn class_parameters(
    client: &Client,
    name: &str,
) -> Result<Option<BTreeMap<String, String>>, BackendError> {
    let api: Api<StorageClass> = Api::all(client.clone());
    let class =
        api.get_opt(name).await.map_err(|e| unavailable(&format!("StorageClass {name}"), e))?;
    Ok(class.map(|c| backend_parameters(c.parameters.unwrap_or_default())))
}

/// `parameters` without those the library reads itself (`bucketName`, the operator's limits,
/// rotation, sharing, web identity): what a backend's `BucketOptions::parameters` holds.
pub fn backend_parameters(mut parameters: BTreeMap<String, String>) -> BTreeMap<String, String> {
    parameters.remove(contract::STORAGE_CLASS_BUCKET_NAME);
    let library = contract::class_limits::ALL.iter().chain(&contract::class_rotation::ALL);
    let library = library.chain(&contract::class_sharing::ALL);
    for name in library.chain(&contract::class_web_identity::ALL) {
        parameters.remove(*name);
    }
    parameters
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backend_is_given_only_its_own_parameters() {
        let mut class: BTreeMap<String, String> = [("endpoint", "http://s3:9000")]
            .into_iter()
            .chain(contract::class_limits::ALL.iter().map(|n| (*n, "1")))
            .chain(contract::class_rotation::ALL.iter().map(|n| (*n, "1h")))
            .chain(contract::class_sharing::ALL.iter().map(|n| (*n, "true")))
            .chain(contract::class_web_identity::ALL.iter().map(|n| (*n, "only")))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        class.insert(contract::STORAGE_CLASS_BUCKET_NAME.into(), "shared".into());
        let own = BTreeMap::from([("endpoint".to_string(), "http://s3:9000".to_string())]);
        assert_eq!(backend_parameters(class), own);
    }

    #[test]
    fn service_urls_are_scheme_host_and_port_only() {
        let parsed = ServiceUrl::parse("endpoint", "https://s3.example.com", "x").unwrap();
        assert_eq!(parsed.url(), "https://s3.example.com:443");
        let parsed = ServiceUrl::parse("endpoint", "http://[::1]:9000/", "x").unwrap();
        assert_eq!((parsed.host.as_str(), parsed.port), ("[::1]", 9000));
        for (bad, why) in [
            ("s3.example.com", "must start with"),
            ("ftp://s3.example.com", "must start with"),
            ("https://key:secret@s3.example.com", "user information"),
            ("https://s3.example.com/bucket", "path or query"),
            ("https://s3.example.com/?x=1", "path or query"),
        ] {
            let refused = ServiceUrl::parse("endpoint", bad, "https://good:9000").unwrap_err();
            let message = refused.to_string();
            assert!(message.contains(why) && message.contains("https://good:9000"), "{message}");
        }
    }
}
