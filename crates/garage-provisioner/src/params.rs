//! StorageClass parameters, checked up front, and the copy of them kept in the ObjectBucket's
//! `additionalState` so that cleanup never depends on the StorageClass.

use std::collections::BTreeMap;

use bucket_provisioner::bucket::features::defaults;
use bucket_provisioner::{BackendError, Endpoint};

use crate::endpoints::AdminEndpoints;

pub use crate::endpoints::ADMIN_ENDPOINT;
/// URL of Garage's S3 API as consumers reach it, e.g. `http://garage:3900`.
pub const ENDPOINT: &str = "endpoint";
/// Garage's `s3_region` (default [`DEFAULT_REGION`]).
pub const REGION: &str = "region";
/// Name of the Secret holding the admin token under [`TOKEN_KEY`].
pub const SECRET_NAME: &str = "secretName";
/// Namespace of that Secret.
pub const SECRET_NAMESPACE: &str = "secretNamespace";

/// Every parameter this backend accepts (`bucketName` is taken by the library before); the
/// last two, what claims may ask of their buckets, are read by [`crate::features`].
pub const PARAMETERS: [&str; 7] = [
    ADMIN_ENDPOINT,
    ENDPOINT,
    REGION,
    SECRET_NAME,
    SECRET_NAMESPACE,
    crate::features::PARAMETERS[0],
    crate::features::PARAMETERS[1],
];

/// The key of the admin token in the Secret.
pub const TOKEN_KEY: &str = "GARAGE_ADMIN_TOKEN";

/// The region Garage answers to unless its `s3_region` says otherwise.
pub const DEFAULT_REGION: &str = "garage";

pub use bucket_provisioner::bucket::remote::{SecretRef, ServiceUrl};

/// Everything one StorageClass asks of this backend.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Settings {
    /// Garage's admin API, on one node or several.
    pub admin: AdminEndpoints,
    /// Garage's S3 API, as consumers (and the provisioner, to empty buckets) reach it.
    pub endpoint: ServiceUrl,
    /// Garage's S3 region.
    pub region: String,
    /// The Secret holding the admin token.
    pub token_secret: SecretRef,
}

impl Settings {
    /// Parses StorageClass parameters; any parameter this backend does not know is an error.
    pub fn from_parameters(parameters: &BTreeMap<String, String>) -> Result<Self, BackendError> {
        defaults::refuse(parameters, "Garage has no object versioning or object lock")?;
        if let Some(unknown) = parameters.keys().find(|k| !PARAMETERS.contains(&k.as_str())) {
            return Err(BackendError::invalid_parameter(format!(
                "unknown StorageClass parameter {unknown:?}; this provisioner accepts {}",
                PARAMETERS.join(", ")
            )));
        }
        Self::parse(parameters)
    }

    /// Reads the settings back from an ObjectBucket's `additionalState`.
    pub fn from_state(state: &BTreeMap<String, String>) -> Result<Self, BackendError> {
        Self::parse(state).map_err(|e| {
            BackendError::permanent(
                "InvalidBucketState",
                format!("the ObjectBucket's additionalState is not usable: {e}"),
            )
        })
    }

    fn parse(values: &BTreeMap<String, String>) -> Result<Self, BackendError> {
        let get = |key: &str| values.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
        let required = |key: &str| {
            get(key).ok_or_else(|| {
                BackendError::invalid_parameter(format!(
                    "StorageClass parameter {key} is required (this provisioner needs {})",
                    [ADMIN_ENDPOINT, ENDPOINT, SECRET_NAME, SECRET_NAMESPACE].join(", ")
                ))
            })
        };
        let admin = AdminEndpoints::parse(required(ADMIN_ENDPOINT)?)?;
        let endpoint = ServiceUrl::parse(ENDPOINT, required(ENDPOINT)?, "http://garage:3900")?;
        let token_secret = SecretRef {
            name: required(SECRET_NAME)?.into(),
            namespace: required(SECRET_NAMESPACE)?.into(),
        };
        let region = get(REGION).unwrap_or(DEFAULT_REGION).to_string();
        if !region.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(BackendError::invalid_parameter(format!(
                "parameter {REGION} {region:?} is not a region name such as garage or eu-west-1"
            )));
        }
        Ok(Self { admin, endpoint, region, token_secret })
    }

    /// The parameters again, as the ObjectBucket's `additionalState` keeps them (no secrets:
    /// only where the token lives).
    pub fn to_state(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (ADMIN_ENDPOINT.into(), self.admin.to_string()),
            (ENDPOINT.into(), self.endpoint.url()),
            (REGION.into(), self.region.clone()),
            (SECRET_NAME.into(), self.token_secret.name.clone()),
            (SECRET_NAMESPACE.into(), self.token_secret.namespace.clone()),
        ])
    }

    /// Where consumers reach their buckets (the claim's ConfigMap).
    pub fn consumer_endpoint(&self) -> Endpoint {
        Endpoint {
            scheme: self.endpoint.scheme.clone(),
            host: self.endpoint.host.clone(),
            port: self.endpoint.port,
            region: self.region.clone(),
            sub_region: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn complete() -> BTreeMap<String, String> {
        params(&[
            (ADMIN_ENDPOINT, "http://garage.storage:3903"),
            (ENDPOINT, "https://s3.example.com"),
            (SECRET_NAME, "garage-admin"),
            (SECRET_NAMESPACE, "infra"),
        ])
    }

    #[test]
    fn parameters_round_trip_through_state() {
        let settings = Settings::from_parameters(&complete()).unwrap();
        assert_eq!(settings.region, DEFAULT_REGION);
        assert_eq!(settings.endpoint.port, 443);
        assert_eq!(Settings::from_state(&settings.to_state()).unwrap(), settings);
        let endpoint = settings.consumer_endpoint();
        assert_eq!(
            (endpoint.url(), endpoint.region),
            ("https://s3.example.com:443".into(), "garage".into())
        );
    }

    #[test]
    fn missing_unknown_and_malformed_parameters_are_refused() {
        let mut missing = complete();
        missing.remove(SECRET_NAME);
        let error = Settings::from_parameters(&missing).unwrap_err();
        assert!(error.is_permanent() && error.to_string().contains("secretName is required"));
        let mut unknown = complete();
        unknown.insert("adminToken".into(), "x".into());
        assert!(
            Settings::from_parameters(&unknown).unwrap_err().to_string().contains("adminToken")
        );
        let mut bad = complete();
        bad.insert(ADMIN_ENDPOINT.into(), "http://token@garage:3903".into());
        assert!(
            Settings::from_parameters(&bad).unwrap_err().to_string().contains("user information")
        );
        bad.insert(ADMIN_ENDPOINT.into(), "garage:3903".into());
        assert!(Settings::from_parameters(&bad).is_err());
        let mut retained = complete();
        retained.insert(defaults::DEFAULT_RETENTION.into(), "GOVERNANCE:1d".into());
        let error = Settings::from_parameters(&retained).unwrap_err().to_string();
        assert!(
            error.contains("defaultObjectLockRetention is not supported: Garage has no"),
            "{error}"
        );
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// Values close to what the parameters take, and any text.
        fn value() -> impl Strategy<Value = String> {
            prop_oneof![
                any::<String>(),
                "(https?|ftp)://(u@)?[a-zA-Z0-9.-]{0,10}(:[0-9]{0,6})?(/x)?",
                "[ a-zA-Z0-9_.-]{0,12}",
                // Several admin endpoints, some of them malformed.
                "(https?://[a-z0-9.]{0,8}(:[0-9]{0,5})?)?( ?, ?(https?://)?[a-z0-9.]{0,8}){0,3}",
            ]
        }

        fn parameters() -> impl Strategy<Value = BTreeMap<String, String>> {
            let key = prop_oneof![
                Just(ADMIN_ENDPOINT.to_string()),
                Just(ENDPOINT.to_string()),
                Just(REGION.to_string()),
                Just(SECRET_NAME.to_string()),
                Just(SECRET_NAMESPACE.to_string()),
                any::<String>(),
            ];
            prop::collection::btree_map(key, value(), 0..7)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            /// A class's parameters and the ObjectBucket's copy of them read alike, and the copy
            /// reads back as the settings it was made from.
            #[test]
            fn parameters_and_their_copy_read_alike(parameters in parameters()) {
                let known = parameters.keys().all(|k| PARAMETERS.contains(&k.as_str()));
                let read = Settings::from_parameters(&parameters).ok();
                if known {
                    prop_assert_eq!(&read, &Settings::from_state(&parameters).ok());
                }
                if let Some(settings) = read {
                    let again = Settings::from_state(&settings.to_state()).ok();
                    prop_assert_eq!(again, Some(settings));
                }
            }

            #[test]
            fn complete_parameters_with_any_values_are_judged(
                values in prop::collection::vec(value(), PARAMETERS.len()),
            ) {
                let parameters: BTreeMap<String, String> =
                    PARAMETERS.iter().map(|k| k.to_string()).zip(values).collect();
                if let Ok(settings) = Settings::from_parameters(&parameters) {
                    let again = Settings::from_state(&settings.to_state()).ok();
                    prop_assert_eq!(again, Some(settings));
                }
            }
        }
    }

    #[test]
    fn several_admin_endpoints_round_trip_through_state() {
        let mut several = complete();
        several.insert(ADMIN_ENDPOINT.into(), "http://g0:3903, http://g1:3903".into());
        let settings = Settings::from_parameters(&several).unwrap();
        assert_eq!(settings.admin.urls().len(), 2);
        assert_eq!(Settings::from_state(&settings.to_state()).unwrap(), settings);
    }
}
