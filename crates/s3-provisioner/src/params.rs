//! StorageClass parameters, checked up front, and the copy of them kept in the ObjectBucket's
//! `additionalState` so that cleanup never depends on the StorageClass.

use std::collections::BTreeMap;

use bucket_provisioner::bucket::features::class::{self, ClassFeatures};
use bucket_provisioner::bucket::features::defaults;
use bucket_provisioner::{BackendError, Endpoint};

use crate::web_identity::{DEFAULT_AUDIENCE, OidcProvider, sts_url};

/// Region of the bucket (default [`DEFAULT_REGION`]).
pub const REGION: &str = "region";
/// Name of the Secret holding the owner's `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`.
pub const SECRET_NAME: &str = "secretName";
/// Namespace of that Secret.
pub const SECRET_NAMESPACE: &str = "secretNamespace";
/// URL of an S3-compatible service, e.g. `https://s3.example.com:9000`.
pub const ENDPOINT: &str = "endpoint";
/// URL of the IAM API; defaults to [`ENDPOINT`] when that is set, else AWS IAM.
pub const IAM_ENDPOINT: &str = "iamEndpoint";
/// `true` to address buckets as `host/bucket` instead of `bucket.host`.
pub const FORCE_PATH_STYLE: &str = "forcePathStyle";
/// `true` (default): an IAM user per claim. `false`: the claim receives the owner's keys. `yes`
/// and `no`, the Go aws-s3-provisioner's values, mean the same.
pub const CREATE_BUCKET_USER: &str = "createBucketUser";
/// Principals (ARNs, comma-separated; `*` for anyone) a claim's `bucketPolicy` may name besides
/// the claim's own IAM user. None by default.
pub const BUCKET_POLICY_PRINCIPALS: &str = "bucketPolicyPrincipals";

/// ARN of the cluster's IAM OIDC provider: claims of the class may name ServiceAccounts that
/// assume a role of their own (see [`crate::web_identity`]). None by default.
pub const WEB_IDENTITY_PROVIDER: &str = "webIdentityProvider";
/// The audience of the tokens those ServiceAccounts present (default `sts.amazonaws.com`).
pub const WEB_IDENTITY_AUDIENCE: &str = "webIdentityAudience";
/// URL of the STS API those ServiceAccounts call (default: `endpoint`, else AWS's regional STS).
pub const STS_ENDPOINT: &str = "stsEndpoint";

pub use crate::cors::ALLOW_CORS;

/// Every parameter this backend accepts (`bucketName` is taken by the library before).
pub const PARAMETERS: [&str; 19] = [
    REGION,
    SECRET_NAME,
    SECRET_NAMESPACE,
    ENDPOINT,
    IAM_ENDPOINT,
    FORCE_PATH_STYLE,
    CREATE_BUCKET_USER,
    BUCKET_POLICY_PRINCIPALS,
    WEB_IDENTITY_PROVIDER,
    WEB_IDENTITY_AUDIENCE,
    STS_ENDPOINT,
    ALLOW_CORS,
    class::ALLOW_VERSIONING,
    class::ALLOW_OBJECT_LOCK,
    class::ALLOW_COMPLIANCE_RETENTION,
    class::MAX_RETENTION_DAYS,
    class::ALLOW_LIFECYCLE,
    defaults::DEFAULT_VERSIONING,
    defaults::DEFAULT_RETENTION,
];

/// `additionalState` key: the claim's IAM user.
pub const STATE_USER_NAME: &str = "userName";
/// `additionalState` key: the user's inline policy.
pub const STATE_POLICY_NAME: &str = "policyName";
/// `additionalState` key: the claim's IAM role for its ServiceAccounts.
pub const STATE_ROLE_NAME: &str = "roleName";

/// The region used when the StorageClass names none.
pub const DEFAULT_REGION: &str = "us-east-1";

pub use bucket_provisioner::bucket::remote::{SecretRef, ServiceUrl};

/// A good endpoint URL, for messages.
const EXAMPLE_URL: &str = "https://s3.example.com:9000";

/// Everything one StorageClass asks of this backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Region of the buckets.
    pub region: String,
    /// The owner's keys; `None` means the default AWS credential chain.
    pub owner_secret: Option<SecretRef>,
    /// An S3-compatible service instead of AWS S3.
    pub endpoint: Option<ServiceUrl>,
    /// The IAM API of that service, when it differs from `endpoint`.
    pub iam_endpoint: Option<ServiceUrl>,
    /// Path-style bucket addressing.
    pub force_path_style: bool,
    /// An IAM user per claim (`false` hands out the owner's keys).
    pub create_bucket_user: bool,
    /// Principals claims' bucket policies may name besides the claim's own user.
    pub policy_principals: Vec<String>,
    /// Whether claims may set their bucket's CORS rules (`allowCors`).
    pub allow_cors: bool,
    /// What claims may ask of versioning, object lock and lifecycle rules.
    pub features: ClassFeatures,
    /// Whose tokens claims' ServiceAccounts present, where the class lets them in.
    pub web_identity: Option<WebIdentitySettings>,
}

/// A class's web identity parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebIdentitySettings {
    /// The cluster's IAM OIDC provider.
    pub provider: OidcProvider,
    /// The audience of the ServiceAccounts' tokens.
    pub audience: String,
    /// The STS API, when the class names one.
    pub sts_endpoint: Option<ServiceUrl>,
}

impl Settings {
    /// Parses StorageClass parameters; any parameter this backend does not know is an error.
    pub fn from_parameters(parameters: &BTreeMap<String, String>) -> Result<Self, BackendError> {
        if let Some(unknown) = parameters.keys().find(|k| !PARAMETERS.contains(&k.as_str())) {
            return Err(BackendError::invalid_parameter(format!(
                "unknown StorageClass parameter {unknown:?}; this provisioner accepts {}",
                PARAMETERS.join(", ")
            )));
        }
        Self::parse(parameters)
    }

    /// Reads the settings back from an ObjectBucket's `additionalState`, which also holds the
    /// names of what was created.
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
        let region = get(REGION).unwrap_or(DEFAULT_REGION).to_string();
        if !region.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            || region.starts_with('-')
        {
            return Err(BackendError::invalid_parameter(format!(
                "parameter {REGION} {region:?} is not a region name such as eu-west-1"
            )));
        }
        let owner_secret = match (get(SECRET_NAME), get(SECRET_NAMESPACE)) {
            (Some(name), Some(namespace)) => {
                Some(SecretRef { namespace: namespace.into(), name: name.into() })
            }
            (None, None) => None,
            _ => {
                return Err(BackendError::invalid_parameter(format!(
                    "parameters {SECRET_NAME} and {SECRET_NAMESPACE} go together: set both to use \
                     owner keys from a Secret, or neither for the default AWS credential chain"
                )));
            }
        };
        let endpoint =
            get(ENDPOINT).map(|v| ServiceUrl::parse(ENDPOINT, v, EXAMPLE_URL)).transpose()?;
        let iam_endpoint = get(IAM_ENDPOINT)
            .map(|v| ServiceUrl::parse(IAM_ENDPOINT, v, EXAMPLE_URL))
            .transpose()?;
        let force_path_style = boolean(FORCE_PATH_STYLE, get(FORCE_PATH_STYLE), false)?;
        let create_bucket_user = match get(CREATE_BUCKET_USER) {
            // The values of the Go aws-s3-provisioner, so its StorageClasses apply unchanged.
            Some(v) if v.eq_ignore_ascii_case("yes") => true,
            Some(v) if v.eq_ignore_ascii_case("no") => false,
            value => boolean(CREATE_BUCKET_USER, value, true).map_err(|_| {
                BackendError::invalid_parameter(format!(
                    "parameter {CREATE_BUCKET_USER} must be \"true\" or \"false\" (or \"yes\" \
                     or \"no\"), not {:?}",
                    value.unwrap_or_default()
                ))
            })?,
        };
        if !create_bucket_user && owner_secret.is_none() {
            return Err(BackendError::invalid_parameter(format!(
                "{CREATE_BUCKET_USER}=false hands the owner's keys to every claim, which needs them \
                 in a Secret: set {SECRET_NAME} and {SECRET_NAMESPACE}"
            )));
        }
        let allow_cors = boolean(ALLOW_CORS, get(ALLOW_CORS), false)?;
        let policy_principals: Vec<String> = get(BUCKET_POLICY_PRINCIPALS)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect();
        if let Some(bad) = policy_principals.iter().find(|p| *p != "*" && !p.starts_with("arn:")) {
            return Err(BackendError::invalid_parameter(format!(
                "parameter {BUCKET_POLICY_PRINCIPALS} lists {bad:?}, which is neither an ARN nor *"
            )));
        }
        let web_identity = web_identity(&get)?;
        Ok(Self {
            region,
            owner_secret,
            endpoint,
            iam_endpoint,
            force_path_style,
            create_bucket_user,
            policy_principals,
            allow_cors,
            features: ClassFeatures::from_parameters(values)?,
            web_identity,
        })
    }

    /// The settings as parameters, the part of `additionalState` that cleanup reads back
    /// (what claims may ask of their buckets is not: cleanup never needs it).
    pub fn to_state(&self) -> BTreeMap<String, String> {
        let mut state = BTreeMap::from([
            (REGION.to_string(), self.region.clone()),
            (FORCE_PATH_STYLE.to_string(), self.force_path_style.to_string()),
            (CREATE_BUCKET_USER.to_string(), self.create_bucket_user.to_string()),
        ]);
        if let Some(secret) = &self.owner_secret {
            state.insert(SECRET_NAME.into(), secret.name.clone());
            state.insert(SECRET_NAMESPACE.into(), secret.namespace.clone());
        }
        if let Some(endpoint) = &self.endpoint {
            state.insert(ENDPOINT.into(), endpoint.url());
        }
        if let Some(endpoint) = &self.iam_endpoint {
            state.insert(IAM_ENDPOINT.into(), endpoint.url());
        }
        // Cleanup removes the claim's role only where its class could have made one.
        if let Some(web) = &self.web_identity {
            state.insert(WEB_IDENTITY_PROVIDER.into(), web.provider.arn.clone());
            state.insert(WEB_IDENTITY_AUDIENCE.into(), web.audience.clone());
            if let Some(sts) = &web.sts_endpoint {
                state.insert(STS_ENDPOINT.into(), sts.url());
            }
        }
        state
    }

    /// Where the class's claims assume their roles.
    pub fn sts_url(&self) -> String {
        let sts = self.web_identity.as_ref().and_then(|w| w.sts_endpoint.as_ref());
        sts_url(sts, self.endpoint.as_ref(), &self.region)
    }

    /// The IAM API to call: `iamEndpoint`, else `endpoint`, else AWS (`None`).
    pub fn iam_url(&self) -> Option<String> {
        self.iam_endpoint.as_ref().or(self.endpoint.as_ref()).map(ServiceUrl::url)
    }

    /// The AWS partition of the region, for ARNs.
    pub fn partition(&self) -> &'static str {
        if self.region.starts_with("cn-") {
            "aws-cn"
        } else if self.region.starts_with("us-gov-") {
            "aws-us-gov"
        } else {
            "aws"
        }
    }

    /// Where consumers reach the buckets: the custom endpoint, or the regional AWS S3 host.
    pub fn consumer_endpoint(&self) -> Endpoint {
        let (scheme, host, port) = match &self.endpoint {
            Some(url) => (url.scheme.clone(), url.host.clone(), url.port),
            None => {
                let suffix = if self.region.starts_with("cn-") { ".cn" } else { "" };
                ("https".into(), format!("s3.{}.amazonaws.com{suffix}", self.region), 443)
            }
        };
        Endpoint { scheme, host, port, region: self.region.clone(), sub_region: String::new() }
    }

    /// How the owner's credentials are found, for messages (never the keys themselves).
    pub fn owner_description(&self) -> String {
        match &self.owner_secret {
            Some(secret) => format!("the owner credentials from Secret {secret}"),
            None => "the credentials from the default AWS credential chain".into(),
        }
    }
}

/// The web identity parameters: all unset, or a provider with what goes with it.
fn web_identity<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
) -> Result<Option<WebIdentitySettings>, BackendError> {
    let Some(arn) = get(WEB_IDENTITY_PROVIDER) else {
        return match [WEB_IDENTITY_AUDIENCE, STS_ENDPOINT].into_iter().find(|k| get(k).is_some()) {
            Some(orphan) => Err(BackendError::invalid_parameter(format!(
                "parameter {orphan} needs {WEB_IDENTITY_PROVIDER}, the ARN of the cluster's IAM \
                 OIDC provider"
            ))),
            None => Ok(None),
        };
    };
    let provider = OidcProvider::parse(arn).map_err(|why| {
        BackendError::invalid_parameter(format!("parameter {WEB_IDENTITY_PROVIDER} {why}"))
    })?;
    let audience = get(WEB_IDENTITY_AUDIENCE).unwrap_or(DEFAULT_AUDIENCE);
    if audience.len() > 256 || audience.chars().any(|c| c.is_control() || c == '"') {
        return Err(BackendError::invalid_parameter(format!(
            "parameter {WEB_IDENTITY_AUDIENCE} {audience:?} is not an audience such as \
             {DEFAULT_AUDIENCE}"
        )));
    }
    let sts_endpoint =
        get(STS_ENDPOINT).map(|v| ServiceUrl::parse(STS_ENDPOINT, v, EXAMPLE_URL)).transpose()?;
    Ok(Some(WebIdentitySettings { provider, audience: audience.to_owned(), sts_endpoint }))
}

fn boolean(name: &str, value: Option<&str>, default: bool) -> Result<bool, BackendError> {
    match value {
        None => Ok(default),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(v) => Err(BackendError::invalid_parameter(format!(
            "parameter {name} must be \"true\" or \"false\", not {v:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_are_aws_with_a_user_per_claim() {
        let settings = Settings::from_parameters(&BTreeMap::new()).unwrap();
        assert_eq!(settings.region, "us-east-1");
        assert!(settings.create_bucket_user && !settings.force_path_style);
        assert_eq!(settings.iam_url(), None);
        let endpoint = settings.consumer_endpoint();
        assert_eq!(endpoint.url(), "https://s3.us-east-1.amazonaws.com:443");
        assert_eq!(endpoint.region, "us-east-1");
    }

    #[test]
    fn custom_endpoints_round_trip_through_state() {
        let settings = Settings::from_parameters(&params(&[
            (REGION, "eu-west-1"),
            (SECRET_NAME, "owner"),
            (SECRET_NAMESPACE, "infra"),
            (ENDPOINT, "http://127.0.0.1:5000"),
            (FORCE_PATH_STYLE, "TRUE"),
        ]))
        .unwrap();
        assert_eq!(settings.iam_url().as_deref(), Some("http://127.0.0.1:5000"));
        assert_eq!(settings.consumer_endpoint().host, "127.0.0.1");
        assert_eq!(settings.consumer_endpoint().port, 5000);
        let mut state = settings.to_state();
        state.insert(STATE_USER_NAME.into(), "obc-1".into());
        assert_eq!(Settings::from_state(&state).unwrap(), settings);
        assert_eq!(settings.owner_description(), "the owner credentials from Secret infra/owner");
    }

    #[test]
    fn china_regions_use_their_partition_and_host() {
        let settings = Settings::from_parameters(&params(&[(REGION, "cn-north-1")])).unwrap();
        assert_eq!(settings.partition(), "aws-cn");
        assert_eq!(settings.consumer_endpoint().host, "s3.cn-north-1.amazonaws.com.cn");
    }

    #[test]
    fn bad_parameters_are_named() {
        let cases: [(&[(&str, &str)], &str); 13] = [
            (&[("colour", "blue")], "\"colour\""),
            (&[(REGION, "Mars 1")], REGION),
            (&[(SECRET_NAME, "x")], SECRET_NAMESPACE),
            (&[(ENDPOINT, "ftp://host")], "http://"),
            (&[(ENDPOINT, "https://user:pw@host")], "user information"),
            (&[(IAM_ENDPOINT, "https://host/path")], "path"),
            (&[(FORCE_PATH_STYLE, "yes")], FORCE_PATH_STYLE),
            (&[(CREATE_BUCKET_USER, "false")], SECRET_NAME),
            (&[(ALLOW_CORS, "maybe")], ALLOW_CORS),
            (&[(class::ALLOW_OBJECT_LOCK, "maybe")], class::ALLOW_OBJECT_LOCK),
            (&[(class::MAX_RETENTION_DAYS, "-1")], class::MAX_RETENTION_DAYS),
            (&[(defaults::DEFAULT_VERSIONING, "Enabled")], class::ALLOW_VERSIONING),
            (&[(defaults::DEFAULT_RETENTION, "GOVERNANCE:30")], defaults::DEFAULT_RETENTION),
        ];
        for (pairs, mentioned) in cases {
            let error = Settings::from_parameters(&params(pairs)).expect_err(mentioned);
            assert!(
                matches!(&error, BackendError::Permanent { reason, .. } if reason == "InvalidParameters"),
                "{error:?}"
            );
            assert!(error.to_string().contains(mentioned), "{error} should mention {mentioned}");
        }
    }

    #[test]
    fn owner_keys_for_claims_need_a_secret() {
        let ok = Settings::from_parameters(&params(&[
            (CREATE_BUCKET_USER, "false"),
            (SECRET_NAME, "s"),
            (SECRET_NAMESPACE, "n"),
        ]))
        .unwrap();
        assert!(!ok.create_bucket_user);
    }

    #[test]
    fn create_bucket_user_takes_the_old_provisioners_yes_and_no() {
        let with = |value: &str| {
            let parameters =
                [(CREATE_BUCKET_USER, value), (SECRET_NAME, "s"), (SECRET_NAMESPACE, "n")];
            Settings::from_parameters(&params(&parameters)).map(|s| s.create_bucket_user)
        };
        assert!(with("yes").unwrap());
        assert!(!with("No").unwrap());
        assert!(with("TRUE").unwrap());
        let error = with("maybe").unwrap_err().to_string();
        assert!(error.contains("\"yes\" or \"no\"") && error.contains("maybe"), "{error}");
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
                "(TRUE|true|False|false|yes)",
                "[0-9]{1,4}",
                "( ?(arn:aws:iam::[0-9]{3}:user/x|\\*|x),?){0,3}",
                "arn:aws:iam::[0-9]{12}:oidc-provider/[a-z.]{1,10}(/id/[A-Z0-9]{1,4})?",
            ]
        }

        fn parameters() -> impl Strategy<Value = BTreeMap<String, String>> {
            let key = prop_oneof![
                prop::sample::select(PARAMETERS.to_vec()).prop_map(str::to_string),
                any::<String>(),
            ];
            prop::collection::btree_map(key, value(), 0..9)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            /// A class's parameters and the ObjectBucket's copy of them read alike, and the copy
            /// reads back as the settings it was made from (but for the principals and
            /// what claims may ask of their buckets, which only matter while the bucket is
            /// configured, never to its cleanup).
            #[test]
            fn parameters_and_their_copy_read_alike(parameters in parameters()) {
                let known = parameters.keys().all(|k| PARAMETERS.contains(&k.as_str()));
                let read = Settings::from_parameters(&parameters).ok();
                if known {
                    prop_assert_eq!(&read, &Settings::from_state(&parameters).ok());
                }
                if let Some(settings) = read {
                    let again = Settings::from_state(&settings.to_state());
                    let expected = Settings {
                        policy_principals: Vec::new(),
                        allow_cors: false,
                        features: ClassFeatures::default(),
                        ..settings
                    };
                    prop_assert_eq!(again.ok(), Some(expected));
                }
            }
        }
    }
}
