//! The `AssumeRoleWithWebIdentity` request as STS takes it (a form body, or the same in the
//! query): parsed and checked as AWS checks it, every refusal with the code AWS gives.

use super::answer::StsError;

/// Longest `WebIdentityToken` STS accepts.
pub const MAX_TOKEN_LEN: usize = 20_000;
/// Shortest and longest `DurationSeconds` STS accepts (the role's own limit comes after).
pub const DURATION_RANGE: std::ops::RangeInclusive<u32> = 900..=43_200;
/// The STS API version every SDK sends.
const VERSION: &str = "2011-06-15";

/// What a client asked for.
#[derive(Clone, PartialEq, Eq)]
pub struct AssumeRoleWithWebIdentity {
    /// The role, `arn:aws:iam::<account>:role/<name>`.
    pub role_arn: String,
    /// The name of the role (the part after `role/`).
    pub role_name: String,
    /// The caller's name for the session (2–64 of `[\w+=,.@-]`).
    pub role_session_name: String,
    /// The token to trade.
    pub web_identity_token: String,
    /// How long the session should last, if the caller said.
    pub duration_seconds: Option<u32>,
}

impl std::fmt::Debug for AssumeRoleWithWebIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AssumeRoleWithWebIdentity")
            .field("role_arn", &self.role_arn)
            .field("role_session_name", &self.role_session_name)
            .field("duration_seconds", &self.duration_seconds)
            .finish_non_exhaustive()
    }
}

/// Parses a form-encoded STS request (body or query).
pub fn parse(form: &[u8]) -> Result<AssumeRoleWithWebIdentity, StsError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(form)
        .map_err(|_| StsError::validation("the request body is not a form"))?;
    let one = |name: &str| -> Result<Option<&str>, StsError> {
        let mut values = pairs.iter().filter(|(n, _)| n == name).map(|(_, v)| v.as_str());
        let first = values.next();
        if values.next().is_some() {
            return Err(StsError::validation(&format!("{name} is given more than once")));
        }
        Ok(first)
    };
    let required = |name: &str, member: &str| -> Result<String, StsError> {
        match one(name)? {
            Some(value) if !value.is_empty() => Ok(value.to_owned()),
            _ => Err(StsError::validation(&format!(
                "1 validation error detected: Value null at '{member}' failed to satisfy \
                 constraint: Member must not be null"
            ))),
        }
    };
    match one("Action")? {
        Some("AssumeRoleWithWebIdentity") => {}
        Some(other) => return Err(StsError::invalid_action(other)),
        None => return Err(StsError::missing_action()),
    }
    if let Some(version) = one("Version")?
        && version != VERSION
    {
        return Err(StsError::invalid_parameter(&format!(
            "Version {version:?} is not supported; use {VERSION}"
        )));
    }
    let role_arn = required("RoleArn", "roleArn")?;
    let role_name = role_name_of(&role_arn)?;
    let role_session_name = required("RoleSessionName", "roleSessionName")?;
    check_session_name(&role_session_name)?;
    let web_identity_token = required("WebIdentityToken", "webIdentityToken")?;
    if web_identity_token.len() > MAX_TOKEN_LEN {
        return Err(StsError::validation(&format!(
            "1 validation error detected: Value at 'webIdentityToken' failed to satisfy \
             constraint: Member must have length less than or equal to {MAX_TOKEN_LEN}"
        )));
    }
    let duration_seconds = match one("DurationSeconds")? {
        None => None,
        Some(text) => Some(duration(text)?),
    };
    if one("Policy")?.is_some() || pairs.iter().any(|(n, _)| n.starts_with("PolicyArns.")) {
        // A session policy could only narrow the role; refusing it is clearer than ignoring it.
        return Err(StsError::invalid_parameter("session policies are not supported"));
    }
    Ok(AssumeRoleWithWebIdentity {
        role_arn,
        role_name,
        role_session_name,
        web_identity_token,
        duration_seconds,
    })
}

/// The role name of `arn:aws:iam::<account>:role/<name>`.
fn role_name_of(arn: &str) -> Result<String, StsError> {
    let invalid = || StsError::validation(&format!("{arn:?} is not a valid role ARN"));
    let mut parts = arn.splitn(6, ':');
    let (Some("arn"), Some(_partition), Some("iam"), Some(""), Some(_account), Some(resource)) =
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid());
    };
    let name = resource.strip_prefix("role/").ok_or_else(invalid)?;
    let name = name.rsplit('/').next().unwrap_or_default();
    if name.is_empty() || name.len() > 64 {
        return Err(invalid());
    }
    Ok(name.to_owned())
}

fn check_session_name(name: &str) -> Result<(), StsError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_+=,.@-".contains(c);
    if (2..=64).contains(&name.len()) && name.chars().all(allowed) {
        return Ok(());
    }
    Err(StsError::validation(
        "1 validation error detected: Value at 'roleSessionName' failed to satisfy constraint: \
         Member must have length between 2 and 64 and satisfy regular expression pattern: \
         [\\w+=,.@-]*",
    ))
}

fn duration(text: &str) -> Result<u32, StsError> {
    let refusal = || {
        StsError::validation(&format!(
            "1 validation error detected: Value '{text}' at 'durationSeconds' failed to satisfy \
             constraint: Member must have value between {} and {}",
            DURATION_RANGE.start(),
            DURATION_RANGE.end()
        ))
    };
    let secs: u32 = text.parse().map_err(|_| refusal())?;
    if !DURATION_RANGE.contains(&secs) {
        return Err(refusal());
    }
    Ok(secs)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn form(pairs: &[(&str, &str)]) -> Vec<u8> {
        serde_urlencoded::to_string(pairs).unwrap().into_bytes()
    }

    fn valid() -> Vec<(&'static str, &'static str)> {
        vec![
            ("Action", "AssumeRoleWithWebIdentity"),
            ("Version", "2011-06-15"),
            ("RoleArn", "arn:aws:iam::000000000000:role/obc-abc"),
            ("RoleSessionName", "pod-1"),
            ("WebIdentityToken", "eyJ.a.b"),
        ]
    }

    fn code(pairs: &[(&str, &str)]) -> &'static str {
        parse(&form(pairs)).unwrap_err().code
    }

    #[test]
    fn a_request_as_the_sdks_send_it_is_read() {
        let mut pairs = valid();
        pairs.push(("DurationSeconds", "900"));
        let request = parse(&form(&pairs)).unwrap();
        assert_eq!(request.role_name, "obc-abc");
        assert_eq!(request.role_session_name, "pod-1");
        assert_eq!(request.web_identity_token, "eyJ.a.b");
        assert_eq!(request.duration_seconds, Some(900));
        assert!(!format!("{request:?}").contains("eyJ"), "the token is never logged");
    }

    #[test]
    fn each_bad_field_gets_the_code_sts_gives() {
        let with = |name: &str, value: &'static str| {
            let mut pairs: Vec<_> = valid().into_iter().filter(|(n, _)| *n != name).collect();
            pairs.push((Box::leak(name.to_owned().into_boxed_str()), value));
            pairs
        };
        assert_eq!(code(&with("Action", "AssumeRole")), "InvalidAction");
        assert_eq!(code(&with("Version", "2099-01-01")), "InvalidParameterValue");
        assert_eq!(code(&with("RoleArn", "")), "ValidationError");
        assert_eq!(code(&with("RoleArn", "arn:aws:s3:::bucket")), "ValidationError");
        assert_eq!(code(&with("RoleArn", "arn:aws:iam::1:user/x")), "ValidationError");
        assert_eq!(code(&with("RoleSessionName", "a")), "ValidationError");
        assert_eq!(code(&with("RoleSessionName", "a b")), "ValidationError");
        assert_eq!(code(&with("DurationSeconds", "899")), "ValidationError");
        assert_eq!(code(&with("DurationSeconds", "43201")), "ValidationError");
        assert_eq!(code(&with("DurationSeconds", "-1")), "ValidationError");
        assert_eq!(code(&with("DurationSeconds", "1e3")), "ValidationError");
        assert_eq!(code(&with("Policy", "{}")), "InvalidParameterValue");
        let huge: &'static str = Box::leak("a".repeat(MAX_TOKEN_LEN + 1).into_boxed_str());
        assert_eq!(code(&with("WebIdentityToken", huge)), "ValidationError");
        let mut twice = valid();
        twice.push(("RoleArn", "arn:aws:iam::0:role/other"));
        assert_eq!(code(&twice), "ValidationError");
        assert_eq!(parse(b"").unwrap_err().code, "MissingAction");
    }

    proptest! {
        #[test]
        fn any_body_is_answered_never_a_panic(body in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let _ = parse(&body);
        }

        #[test]
        fn any_field_values_are_answered_never_a_panic(
            arn in ".{0,120}", name in ".{0,80}", token in ".{0,200}", duration in ".{0,12}",
        ) {
            let pairs = [
                ("Action", "AssumeRoleWithWebIdentity"),
                ("RoleArn", arn.as_str()),
                ("RoleSessionName", name.as_str()),
                ("WebIdentityToken", token.as_str()),
                ("DurationSeconds", duration.as_str()),
            ];
            if let Ok(request) = parse(&form(&pairs)) {
                prop_assert!(DURATION_RANGE.contains(&request.duration_seconds.unwrap()));
                prop_assert!(!request.role_name.is_empty() && request.role_name.len() <= 64);
            }
        }
    }
}
