//! Buckets without long-lived keys: a claim names ServiceAccounts of its own namespace
//! (`additionalConfig` `serviceAccountName`), and pods running as them trade their projected
//! token for short-lived credentials of the claim's bucket, with the claim's access mode.
//!
//! The operator decides per StorageClass
//! ([`class_web_identity`](bucket_api::contract::class_web_identity)): `off` (the default) refuses
//! such claims, `allowed` gives them a key in their Secret as well, `only` requires them to name
//! ServiceAccounts and writes no key anywhere. The backend is told the subjects
//! ([`WebIdentityOptions`], in [`crate::BucketOptions::web_identity`]) with every provision,
//! grant and update, and answers the role they assume and where ([`WebIdentity`], through
//! [`crate::Provisioner::web_identity`], which refuses by default: a backend that cannot hold
//! it never hands out a static key instead). What it answered is recorded on the ObjectBucket,
//! which tenants cannot write, and the claim's ConfigMap carries what the SDKs read.

use std::collections::BTreeMap;
use std::time::Duration;

use bucket_api::ObjectBucket;
use bucket_api::contract::class_web_identity::{WEB_IDENTITY, WEB_IDENTITY_MAX_SESSION};
use bucket_api::contract::config_web_identity::{
    AWS_ENDPOINT_URL_STS, AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE, TOKEN_PATH,
};
use bucket_api::contract::{CLAIM_SERVICE_ACCOUNT_NAME, annotations};
use kube::ResourceExt;

use crate::bucket::duration::{format_duration, parse_duration};
use crate::bucket::error::Error;

/// The reason of the default [`crate::Provisioner::web_identity`].
pub const WEB_IDENTITY_NOT_SUPPORTED: &str = "WebIdentityNotSupported";

/// Shortest and longest session a class may allow.
const SESSION_RANGE: std::ops::RangeInclusive<Duration> =
    Duration::from_secs(60)..=Duration::from_secs(12 * 3600);
/// The longest session when the class names none.
const DEFAULT_MAX_SESSION: Duration = Duration::from_secs(3600);

/// What a StorageClass lets its claims do with ServiceAccounts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WebIdentityMode {
    /// Claims may not name ServiceAccounts.
    #[default]
    Off,
    /// Claims may name them, and still get a key.
    Allowed,
    /// Claims must name them, and get no key.
    Only,
}

/// A StorageClass's gate on web identities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WebIdentityGate {
    /// What claims may or must do.
    pub mode: WebIdentityMode,
    /// The longest session a claim's ServiceAccounts get.
    pub max_session: Duration,
}

impl Default for WebIdentityGate {
    fn default() -> Self {
        Self { mode: WebIdentityMode::Off, max_session: DEFAULT_MAX_SESSION }
    }
}

/// What the backend is told to let in: subjects of the claim's namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebIdentityOptions {
    /// `system:serviceaccount:<namespace>:<name>` of each ServiceAccount the claim names.
    pub subjects: Vec<String>,
    /// The longest session, in seconds.
    pub max_session_secs: u32,
    /// No key of the claim may be used with its own secret: only sessions.
    pub sessions_only: bool,
}

/// What the backend answers: the role a claim's ServiceAccounts assume, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebIdentity {
    /// The role's ARN, for `AWS_ROLE_ARN`.
    pub role_arn: String,
    /// The STS endpoint URL, for `AWS_ENDPOINT_URL_STS`.
    pub sts_endpoint: String,
}

impl WebIdentityGate {
    /// Reads (and removes) the web identity parameters of a StorageClass. The error says which
    /// parameter is wrong.
    pub fn take(parameters: &mut BTreeMap<String, String>) -> Result<Self, String> {
        let mode = match parameters.remove(WEB_IDENTITY).as_deref() {
            None | Some("off") => WebIdentityMode::Off,
            Some("allowed") => WebIdentityMode::Allowed,
            Some("only") => WebIdentityMode::Only,
            Some(other) => {
                return Err(format!(
                    "parameter {WEB_IDENTITY} {other:?} is not one of off, allowed, only"
                ));
            }
        };
        let max_session = match parameters.remove(WEB_IDENTITY_MAX_SESSION) {
            None => DEFAULT_MAX_SESSION,
            Some(text) => {
                let session = parse_duration(&text).map_err(|why| {
                    format!("parameter {WEB_IDENTITY_MAX_SESSION} {text:?} {why}")
                })?;
                if !SESSION_RANGE.contains(&session) {
                    return Err(format!(
                        "parameter {WEB_IDENTITY_MAX_SESSION} {text:?} is not between {} and {}",
                        format_duration(*SESSION_RANGE.start()),
                        format_duration(*SESSION_RANGE.end())
                    ));
                }
                session
            }
        };
        Ok(Self { mode, max_session })
    }

    /// Whether a claim naming `service_accounts` may bind under this gate.
    pub fn check(&self, service_accounts: &[String]) -> Result<(), Error> {
        match (self.mode, service_accounts.is_empty()) {
            (WebIdentityMode::Off, false) => Err(Error::InvalidAdditionalConfig(format!(
                "{CLAIM_SERVICE_ACCOUNT_NAME} needs a StorageClass with {WEB_IDENTITY} allowed or \
                 only; this one keeps to keys"
            ))),
            (WebIdentityMode::Only, true) => Err(Error::InvalidAdditionalConfig(format!(
                "the StorageClass gives no keys ({WEB_IDENTITY}: only): name the \
                 ServiceAccount(s) that use the bucket in {CLAIM_SERVICE_ACCOUNT_NAME}"
            ))),
            _ => Ok(()),
        }
    }

    /// What the backend is told for a claim of `namespace` naming `service_accounts`; `None`
    /// when it names none.
    pub fn options(
        &self,
        service_accounts: &[String],
        namespace: &str,
    ) -> Option<WebIdentityOptions> {
        if service_accounts.is_empty() {
            return None;
        }
        let subjects = service_accounts.iter().map(|sa| subject(namespace, sa)).collect::<Vec<_>>();
        let max_session_secs = u32::try_from(self.max_session.as_secs()).unwrap_or(u32::MAX);
        let sessions_only = self.mode == WebIdentityMode::Only;
        Some(WebIdentityOptions { subjects, max_session_secs, sessions_only })
    }
}

/// The token subject of ServiceAccount `name` of `namespace`.
pub fn subject(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// Takes `serviceAccountName` out of a claim's `additionalConfig`: the names it lists, sorted,
/// each a valid ServiceAccount name.
pub fn take_service_accounts(config: &mut BTreeMap<String, String>) -> Result<Vec<String>, Error> {
    let Some(text) = config.remove(CLAIM_SERVICE_ACCOUNT_NAME) else { return Ok(Vec::new()) };
    let mut names = Vec::new();
    for name in text.split(',').map(str::trim) {
        if !is_service_account_name(name) {
            return Err(Error::InvalidAdditionalConfig(format!(
                "{CLAIM_SERVICE_ACCOUNT_NAME} {text:?}: {name:?} is not a ServiceAccount name \
                 (lower-case letters, digits, '-' and '.', at most 253, starting and ending with \
                 a letter or digit)"
            )));
        }
        names.push(name.to_owned());
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// A DNS subdomain name, as Kubernetes names ServiceAccounts.
fn is_service_account_name(name: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    (1..=253).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && edge(name.chars().next())
        && edge(name.chars().last())
}

/// Records on `bound` what the backend was told and answered (or that there is none).
pub fn record(
    bound: &mut ObjectBucket,
    told: Option<&WebIdentityOptions>,
    answered: Option<&WebIdentity>,
) {
    let recorded = bound.metadata.annotations.get_or_insert_default();
    for key in ANNOTATIONS {
        recorded.remove(key);
    }
    if let (Some(told), Some(answered)) = (told, answered) {
        recorded.insert(annotations::WEB_IDENTITY_SUBJECTS.into(), told.subjects.join(","));
        recorded.insert(annotations::WEB_IDENTITY_ROLE.into(), answered.role_arn.clone());
        recorded.insert(annotations::WEB_IDENTITY_STS.into(), answered.sts_endpoint.clone());
        if told.sessions_only {
            recorded.insert(annotations::WEB_IDENTITY_ONLY.into(), "true".into());
        }
    }
}

/// The annotations [`record`] writes.
pub const ANNOTATIONS: [&str; 4] = [
    annotations::WEB_IDENTITY_SUBJECTS,
    annotations::WEB_IDENTITY_ROLE,
    annotations::WEB_IDENTITY_STS,
    annotations::WEB_IDENTITY_ONLY,
];

/// The ServiceAccount names `bound` records, sorted (empty when none).
pub fn recorded_service_accounts(bound: &ObjectBucket) -> Vec<String> {
    let Some(subjects) = bound.annotations().get(annotations::WEB_IDENTITY_SUBJECTS) else {
        return Vec::new();
    };
    let mut names: Vec<String> = subjects
        .split(',')
        .filter_map(|s| s.rsplit(':').next())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    names.sort();
    names
}

/// Whether `bound` records a claim that gets no key, only sessions.
pub fn sessions_only(bound: &ObjectBucket) -> bool {
    bound.annotations().get(annotations::WEB_IDENTITY_ONLY).is_some_and(|v| v == "true")
}

/// The ConfigMap entries of a claim `bound` records web identities for.
pub fn config_entries(bound: &ObjectBucket) -> BTreeMap<String, String> {
    let recorded = bound.annotations();
    let (Some(role), Some(sts)) =
        (recorded.get(annotations::WEB_IDENTITY_ROLE), recorded.get(annotations::WEB_IDENTITY_STS))
    else {
        return BTreeMap::new();
    };
    BTreeMap::from([
        (AWS_ROLE_ARN.to_owned(), role.clone()),
        (AWS_WEB_IDENTITY_TOKEN_FILE.to_owned(), TOKEN_PATH.to_owned()),
        (AWS_ENDPOINT_URL_STS.to_owned(), sts.clone()),
    ])
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn gate(parameters: &[(&str, &str)]) -> Result<WebIdentityGate, String> {
        let mut map: BTreeMap<String, String> =
            parameters.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let gate = WebIdentityGate::take(&mut map);
        assert!(map.is_empty(), "the library's parameters never reach the backend");
        gate
    }

    #[test]
    fn a_class_keeps_to_keys_unless_it_says_otherwise() {
        assert_eq!(gate(&[]).unwrap(), WebIdentityGate::default());
        assert_eq!(gate(&[(WEB_IDENTITY, "only")]).unwrap().mode, WebIdentityMode::Only);
        let allowed = gate(&[(WEB_IDENTITY, "allowed"), (WEB_IDENTITY_MAX_SESSION, "15m")]);
        assert_eq!(allowed.unwrap().max_session, Duration::from_secs(900));
        assert!(gate(&[(WEB_IDENTITY, "yes")]).unwrap_err().contains("off, allowed, only"));
        assert!(gate(&[(WEB_IDENTITY_MAX_SESSION, "13h")]).unwrap_err().contains("between"));
        assert!(gate(&[(WEB_IDENTITY_MAX_SESSION, "30s")]).unwrap_err().contains("between"));
        assert!(gate(&[(WEB_IDENTITY_MAX_SESSION, "soon")]).is_err());
    }

    #[test]
    fn the_gate_refuses_by_name_what_the_class_does_not_allow() {
        let names = vec!["app".to_owned()];
        let off = WebIdentityGate::default();
        assert!(off.check(&names).unwrap_err().to_string().contains(WEB_IDENTITY));
        assert!(off.check(&[]).is_ok());
        let only = WebIdentityGate { mode: WebIdentityMode::Only, ..Default::default() };
        assert!(only.check(&[]).unwrap_err().to_string().contains(CLAIM_SERVICE_ACCOUNT_NAME));
        let told = only.options(&names, "team-a").unwrap();
        assert_eq!(told.subjects, ["system:serviceaccount:team-a:app"]);
        assert!(told.sessions_only);
        assert_eq!(told.max_session_secs, 3600);
    }

    #[test]
    fn service_accounts_are_listed_checked_and_sorted() {
        let mut config =
            BTreeMap::from([(CLAIM_SERVICE_ACCOUNT_NAME.into(), "web, app,app".into())]);
        assert_eq!(take_service_accounts(&mut config).unwrap(), ["app", "web"]);
        assert!(config.is_empty());
        for bad in ["", "App", "a:b", "-a", "a,", "system:serviceaccount:x:y", "a b"] {
            let mut config = BTreeMap::from([(CLAIM_SERVICE_ACCOUNT_NAME.into(), bad.into())]);
            assert!(take_service_accounts(&mut config).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn what_is_recorded_is_read_back_and_removed_when_gone() {
        let mut bound = ObjectBucket::new("ob", Default::default());
        let told = WebIdentityGate { mode: WebIdentityMode::Only, ..Default::default() }
            .options(&["b".into(), "a".into()], "ns");
        let answered = WebIdentity { role_arn: "arn".into(), sts_endpoint: "http://s".into() };
        record(&mut bound, told.as_ref(), Some(&answered));
        assert_eq!(recorded_service_accounts(&bound), ["a", "b"]);
        assert!(sessions_only(&bound));
        assert_eq!(config_entries(&bound)[AWS_ROLE_ARN], "arn");
        assert_eq!(config_entries(&bound)[AWS_WEB_IDENTITY_TOKEN_FILE], TOKEN_PATH);
        record(&mut bound, None, None);
        assert!(recorded_service_accounts(&bound).is_empty() && !sessions_only(&bound));
        assert!(config_entries(&bound).is_empty());
    }

    proptest! {
        #[test]
        fn any_service_account_text_is_answered_never_a_panic(text in ".{0,300}") {
            let mut config = BTreeMap::from([(CLAIM_SERVICE_ACCOUNT_NAME.to_owned(), text)]);
            if let Ok(names) = take_service_accounts(&mut config) {
                for name in names {
                    prop_assert!(!name.contains(':') && !name.contains(','));
                }
            }
        }
    }
}
