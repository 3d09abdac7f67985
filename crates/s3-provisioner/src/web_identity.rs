//! Buckets without long-lived keys on AWS: per claim, an IAM role that the claim's
//! ServiceAccounts assume with their projected token (`AssumeRoleWithWebIdentity`) through the
//! cluster's IAM OIDC provider, holding the same policy as the claim's user would.
//!
//! The role is named after the claim's user id (as its user is), lives under [`ROLE_PATH`], and
//! trusts only the provider the StorageClass names, only for the audience it names, and only
//! the subjects (`system:serviceaccount:<namespace>:<name>`) the claim lists. Narrowing the
//! claim's mode replaces the role's policy; dropping every ServiceAccount, revoking or deleting
//! the claim deletes the role, and AWS judges a session by its role's policy at each request.
//! The IAM calls are in [`crate::iam_roles`].

use bucket_provisioner::bucket::remote::ServiceUrl;
use bucket_provisioner::{BackendError, WEB_IDENTITY_NOT_SUPPORTED};
use serde_json::json;

/// IAM path of every role this provisioner creates.
pub const ROLE_PATH: &str = "/bucket-provisioner/";

/// The audience AWS's STS expects by default in a web identity token.
pub const DEFAULT_AUDIENCE: &str = "sts.amazonaws.com";

/// The shortest `MaxSessionDuration` IAM accepts on a role, in seconds.
const SHORTEST_ROLE_SESSION: u32 = 3600;
/// The longest.
const LONGEST_ROLE_SESSION: u32 = 43200;

/// A StorageClass's `webIdentityProvider`: an IAM OIDC provider's ARN, as
/// `arn:<partition>:iam::<account>:oidc-provider/<issuer without https://>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OidcProvider {
    /// The ARN as written.
    pub arn: String,
    /// The provider's partition (`aws`, `aws-cn`, `aws-us-gov`).
    pub partition: String,
    /// The 12-digit account the provider (and so the roles) belong to.
    pub account: String,
    /// The issuer's host and path, the prefix of the trust policy's condition keys.
    pub issuer: String,
}

impl OidcProvider {
    /// Parses an OIDC provider ARN; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let example =
            "arn:aws:iam::111122223333:oidc-provider/oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLE";
        let wrong =
            |why: &str| format!("{text:?} is not an IAM OIDC provider ARN ({why}), e.g. {example}");
        let mut parts = text.splitn(6, ':');
        let (Some("arn"), Some(partition), Some("iam"), Some(""), Some(account), Some(resource)) =
            (parts.next(), parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(wrong(
                "it must read arn:<partition>:iam::<account>:oidc-provider/<issuer>",
            ));
        };
        if !["aws", "aws-cn", "aws-us-gov"].contains(&partition) {
            return Err(wrong("the partition is not aws, aws-cn or aws-us-gov"));
        }
        if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) {
            return Err(wrong("the account is not 12 digits"));
        }
        let Some(issuer) = resource.strip_prefix("oidc-provider/") else {
            return Err(wrong("the resource is not oidc-provider/<issuer>"));
        };
        let host = issuer.split('/').next().unwrap_or_default();
        let issuer_chars = |c: char| c.is_ascii_alphanumeric() || "-._~/".contains(c);
        if host.is_empty() || !issuer.chars().all(issuer_chars) || issuer.ends_with('/') {
            return Err(wrong("the issuer must be a host and path, without https://"));
        }
        Ok(Self {
            arn: text.to_owned(),
            partition: partition.to_owned(),
            account: account.to_owned(),
            issuer: issuer.to_owned(),
        })
    }

    /// The ARN of role `name` (under [`ROLE_PATH`]) in the provider's account.
    pub fn role_arn(&self, name: &str) -> String {
        format!("arn:{}:iam::{}:role{ROLE_PATH}{name}", self.partition, self.account)
    }

    /// The trust policy of a claim's role: `AssumeRoleWithWebIdentity` through this provider,
    /// for tokens of `audience` whose subject is one of `subjects`, and nothing else.
    pub fn trust_policy(&self, audience: &str, subjects: &[String]) -> String {
        let issuer = &self.issuer;
        json!({
            "Version": "2012-10-17",
            "Statement": [{
                "Effect": "Allow",
                "Principal": { "Federated": self.arn },
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {
                    "StringEquals": {
                        format!("{issuer}:aud"): audience,
                        format!("{issuer}:sub"): subjects,
                    }
                }
            }]
        })
        .to_string()
    }
}

/// Where a class's claims assume their roles: the class's `stsEndpoint`, else its S3-compatible
/// `endpoint` (such services answer STS there), else AWS's regional STS.
pub fn sts_url(sts: Option<&ServiceUrl>, endpoint: Option<&ServiceUrl>, region: &str) -> String {
    match sts.or(endpoint) {
        Some(url) => url.url(),
        None if region.starts_with("cn-") => format!("https://sts.{region}.amazonaws.com.cn"),
        None => format!("https://sts.{region}.amazonaws.com"),
    }
}

/// The role's longest session for a class allowing `max_session_secs`, within what IAM takes.
pub fn role_max_session(max_session_secs: u32) -> u32 {
    max_session_secs.clamp(SHORTEST_ROLE_SESSION, LONGEST_ROLE_SESSION)
}

/// The refusal of a claim naming ServiceAccounts under a class that cannot let them in.
pub fn not_configured(why: &str) -> BackendError {
    BackendError::permanent(WEB_IDENTITY_NOT_SUPPORTED, why.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ARN: &str =
        "arn:aws:iam::111122223333:oidc-provider/oidc.eks.eu-west-1.amazonaws.com/id/ABC";

    #[test]
    fn a_provider_arn_gives_the_account_partition_and_issuer() {
        let provider = OidcProvider::parse(ARN).unwrap();
        assert_eq!(provider.account, "111122223333");
        assert_eq!(provider.partition, "aws");
        assert_eq!(provider.issuer, "oidc.eks.eu-west-1.amazonaws.com/id/ABC");
        assert_eq!(
            provider.role_arn("obc-1"),
            "arn:aws:iam::111122223333:role/bucket-provisioner/obc-1"
        );
    }

    #[test]
    fn wrong_provider_arns_say_why() {
        for (text, says) in [
            ("oidc.eks.amazonaws.com", "arn:<partition>"),
            ("arn:aws:iam::1111:oidc-provider/x", "12 digits"),
            ("arn:aws:s3::111122223333:oidc-provider/x", "arn:<partition>"),
            ("arn:mars:iam::111122223333:oidc-provider/x", "partition"),
            ("arn:aws:iam::111122223333:role/x", "oidc-provider/"),
            ("arn:aws:iam::111122223333:oidc-provider/https://x", "without https"),
            ("arn:aws:iam::111122223333:oidc-provider/", "without https"),
            ("arn:aws:iam::111122223333:oidc-provider/x\"y", "without https"),
        ] {
            let error = OidcProvider::parse(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    /// The document IAM evaluates (moto does not): the provider, the action, the audience and
    /// exactly the claim's subjects, as AWS's IRSA documentation writes them.
    #[test]
    fn the_trust_policy_lets_in_only_the_claims_subjects_through_the_provider() {
        let provider = OidcProvider::parse(ARN).unwrap();
        let subjects = vec![
            "system:serviceaccount:team-a:app".to_owned(),
            "system:serviceaccount:team-a:batch".to_owned(),
        ];
        let policy: serde_json::Value =
            serde_json::from_str(&provider.trust_policy(DEFAULT_AUDIENCE, &subjects)).unwrap();
        let statements = policy["Statement"].as_array().unwrap();
        assert_eq!(statements.len(), 1);
        let statement = &statements[0];
        assert_eq!(statement["Effect"], "Allow");
        assert_eq!(statement["Principal"], json!({ "Federated": ARN }));
        assert_eq!(statement["Action"], "sts:AssumeRoleWithWebIdentity");
        assert_eq!(
            statement["Condition"],
            json!({ "StringEquals": {
                "oidc.eks.eu-west-1.amazonaws.com/id/ABC:aud": "sts.amazonaws.com",
                "oidc.eks.eu-west-1.amazonaws.com/id/ABC:sub": subjects,
            }})
        );
        let text = policy.to_string();
        assert!(!text.contains("StringLike") && !text.contains('*'), "no wildcard: {text}");
    }

    #[test]
    fn sts_is_the_named_endpoint_the_compatible_service_or_aws_regional() {
        let named = ServiceUrl::parse("stsEndpoint", "http://127.0.0.1:5000", "x").unwrap();
        let s3 = ServiceUrl::parse("endpoint", "http://10.0.0.1:9000", "x").unwrap();
        assert_eq!(sts_url(Some(&named), Some(&s3), "eu-west-1"), named.url());
        assert_eq!(sts_url(None, Some(&s3), "eu-west-1"), s3.url());
        assert_eq!(sts_url(None, None, "eu-west-1"), "https://sts.eu-west-1.amazonaws.com");
        assert_eq!(sts_url(None, None, "cn-north-1"), "https://sts.cn-north-1.amazonaws.com.cn");
        assert_eq!(role_max_session(900), 3600);
        assert_eq!(role_max_session(7200), 7200);
        assert_eq!(role_max_session(u32::MAX), 43200);
    }

    proptest! {
        /// An operator's text never panics the parser, and what parses names a role ARN and a
        /// trust policy that are valid JSON quoting the issuer as written.
        #[test]
        fn any_text_parses_or_is_refused(text in prop_oneof![
            any::<String>(),
            "arn:(aws|aws-cn|x):iam::[0-9]{10,13}:oidc-provider/[a-z0-9./:\"-]{0,30}",
        ]) {
            if let Ok(provider) = OidcProvider::parse(&text) {
                prop_assert!(provider.role_arn("r").ends_with(":role/bucket-provisioner/r"));
                let policy: serde_json::Value =
                    serde_json::from_str(&provider.trust_policy("a", &["s".into()])).unwrap();
                prop_assert_eq!(policy["Statement"][0]["Principal"]["Federated"].as_str(), Some(text.as_str()));
                prop_assert!(!provider.issuer.contains(['"', ':', ' ']));
            }
        }
    }
}
