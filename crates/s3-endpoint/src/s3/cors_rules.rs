//! What a bucket's CORS rules are allowed to say, and which rule a browser's request matches.
//!
//! PutBucketCors is refused as S3 refuses it: at most [`MAX_RULES`] rules, each with at least
//! one `AllowedOrigin` and one `AllowedMethod`, methods only among `GET`, `PUT`, `POST`,
//! `DELETE` and `HEAD` (exact spelling), at most one `*` in each `AllowedOrigin` and
//! `AllowedHeader`, an `ID` of at most 255 characters, a non-negative `MaxAgeSeconds`, and the
//! whole configuration within [`MAX_CONFIG_BYTES`].
//!
//! A request matches the first rule (in order) that names its `Origin` (a `*` standing for any
//! text, compared exactly otherwise), its method (for a preflight, the one in
//! `Access-Control-Request-Method`), and, for a preflight, every header listed in
//! `Access-Control-Request-Headers` (compared without case, `*` again standing for any text).

use s3s::dto::{CORSConfiguration, CORSRule};
use s3s::{S3Result, s3_error};

use crate::store::{CorsConfig, CorsRule};

/// Most rules one bucket may have.
pub const MAX_RULES: usize = 100;
/// Largest configuration, counted as the text of its rules: S3's 64 KB.
pub const MAX_CONFIG_BYTES: usize = 64 * 1024;
/// Longest rule `ID`, in characters.
pub const MAX_ID_CHARS: usize = 255;
/// The methods a rule may allow.
pub const METHODS: [&str; 5] = ["GET", "PUT", "POST", "DELETE", "HEAD"];

/// The configuration of a PutBucketCors, checked.
pub fn config_of(input: CORSConfiguration) -> S3Result<CorsConfig> {
    if input.cors_rules.is_empty() {
        return Err(s3_error!(
            MalformedXML,
            "The XML you provided was not well-formed or did not validate against our published \
             schema: a CORSConfiguration needs at least one CORSRule"
        ));
    }
    if input.cors_rules.len() > MAX_RULES {
        return Err(s3_error!(
            MalformedXML,
            "The number of CORS rules should not exceed allowed limit of {MAX_RULES} rules."
        ));
    }
    let rules = input.cors_rules.into_iter().map(rule_of).collect::<S3Result<Vec<_>>>()?;
    let size: usize = rules.iter().map(text_size).sum();
    if size > MAX_CONFIG_BYTES {
        return Err(s3_error!(
            InvalidRequest,
            "The CORS configuration size must be less than 64 KB (it is {size} bytes of text)"
        ));
    }
    Ok(CorsConfig { rules })
}

/// The configuration as GetBucketCors answers it.
pub fn rules_of(config: &CorsConfig) -> Vec<CORSRule> {
    let some = |list: &Vec<String>| (!list.is_empty()).then(|| list.clone());
    config
        .rules
        .iter()
        .map(|rule| CORSRule {
            allowed_headers: some(&rule.allowed_headers),
            allowed_methods: rule.allowed_methods.clone(),
            allowed_origins: rule.allowed_origins.clone(),
            expose_headers: some(&rule.expose_headers),
            id: rule.id.clone(),
            max_age_seconds: rule.max_age_seconds,
        })
        .collect()
}

fn rule_of(rule: CORSRule) -> S3Result<CorsRule> {
    if rule.allowed_origins.is_empty() || rule.allowed_methods.is_empty() {
        return Err(s3_error!(
            MalformedXML,
            "The XML you provided was not well-formed or did not validate against our published \
             schema: every CORSRule needs an AllowedOrigin and an AllowedMethod"
        ));
    }
    if let Some(method) = rule.allowed_methods.iter().find(|m| !METHODS.contains(&m.as_str())) {
        return Err(s3_error!(
            InvalidRequest,
            "Found unsupported HTTP method in CORS config. Unsupported method is {method}"
        ));
    }
    for origin in &rule.allowed_origins {
        if origin.matches('*').count() > 1 {
            return Err(s3_error!(
                InvalidRequest,
                "AllowedOrigin \"{origin}\" can not have more than one wildcard."
            ));
        }
    }
    let allowed_headers = rule.allowed_headers.unwrap_or_default();
    for header in &allowed_headers {
        if header.matches('*').count() > 1 {
            return Err(s3_error!(
                InvalidRequest,
                "AllowedHeader \"{header}\" can not have more than one wildcard."
            ));
        }
    }
    if rule.id.as_ref().is_some_and(|id| id.chars().count() > MAX_ID_CHARS) {
        return Err(s3_error!(
            InvalidArgument,
            "The ID of a CORSRule cannot be longer than {MAX_ID_CHARS} characters"
        ));
    }
    if rule.max_age_seconds.is_some_and(|age| age < 0) {
        return Err(s3_error!(InvalidArgument, "MaxAgeSeconds must not be negative"));
    }
    Ok(CorsRule {
        id: rule.id,
        allowed_origins: rule.allowed_origins,
        allowed_methods: rule.allowed_methods,
        allowed_headers,
        expose_headers: rule.expose_headers.unwrap_or_default(),
        max_age_seconds: rule.max_age_seconds,
    })
}

fn text_size(rule: &CorsRule) -> usize {
    let lists = [&rule.allowed_origins, &rule.allowed_methods, &rule.allowed_headers];
    let listed: usize =
        lists.iter().chain([&&rule.expose_headers]).flat_map(|l| l.iter()).map(String::len).sum();
    listed + rule.id.as_ref().map_or(0, String::len)
}

/// What a request asks of the rules: its origin, method and (for a preflight) the headers it
/// wants to send.
#[derive(Debug)]
pub struct CorsRequest<'a> {
    /// The `Origin` header.
    pub origin: &'a str,
    /// The method (a preflight's `Access-Control-Request-Method`).
    pub method: &'a str,
    /// The headers of `Access-Control-Request-Headers`, lower-cased.
    pub headers: Vec<String>,
}

/// The first rule of `config` that allows `request`.
pub fn matching<'c>(config: &'c CorsConfig, request: &CorsRequest<'_>) -> Option<&'c CorsRule> {
    config.rules.iter().find(|rule| {
        rule.allowed_origins.iter().any(|o| wildcard_match(o, request.origin))
            && rule.allowed_methods.iter().any(|m| m == request.method)
            && request.headers.iter().all(|wanted| {
                rule.allowed_headers
                    .iter()
                    .any(|allowed| wildcard_match(&allowed.to_ascii_lowercase(), wanted))
            })
    })
}

/// Whether `text` matches `pattern`, in which one `*` stands for any text.
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => {
            text.len() >= head.len() + tail.len() && text.starts_with(head) && text.ends_with(tail)
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn rule(origins: &[&str], methods: &[&str], headers: &[&str]) -> CORSRule {
        let list = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        CORSRule {
            allowed_origins: list(origins),
            allowed_methods: list(methods),
            allowed_headers: (!headers.is_empty()).then(|| list(headers)),
            ..CORSRule::default()
        }
    }

    fn code(rules: Vec<CORSRule>) -> String {
        let err = config_of(CORSConfiguration { cors_rules: rules }).unwrap_err();
        err.code().as_str().to_owned()
    }

    #[test]
    fn configurations_are_refused_as_s3_refuses_them() {
        assert_eq!(code(vec![rule(&["*"], &["get"], &[])]), "InvalidRequest");
        assert_eq!(code(vec![rule(&["*"], &["PATCH"], &[])]), "InvalidRequest");
        assert_eq!(code(vec![rule(&["https://*.*.example"], &["GET"], &[])]), "InvalidRequest");
        assert_eq!(code(vec![rule(&["*"], &["GET"], &["x-*-*"])]), "InvalidRequest");
        assert_eq!(code(vec![rule(&[], &["GET"], &[])]), "MalformedXML");
        assert_eq!(code(vec![rule(&["*"], &[], &[])]), "MalformedXML");
        assert_eq!(code(Vec::new()), "MalformedXML");
        assert_eq!(code(vec![rule(&["*"], &["GET"], &[]); MAX_RULES + 1]), "MalformedXML");
        assert!(
            config_of(CORSConfiguration {
                cors_rules: vec![rule(&["*"], &["GET"], &[]); MAX_RULES]
            })
            .is_ok()
        );
        let long = "o".repeat(MAX_CONFIG_BYTES);
        assert_eq!(code(vec![rule(&[&long], &["GET"], &[])]), "InvalidRequest");
        let mut with_id = rule(&["*"], &["GET"], &[]);
        with_id.id = Some("i".repeat(256));
        assert_eq!(code(vec![with_id]), "InvalidArgument");
        let mut negative = rule(&["*"], &["GET"], &[]);
        negative.max_age_seconds = Some(-1);
        assert_eq!(code(vec![negative]), "InvalidArgument");
    }

    #[test]
    fn the_first_rule_allowing_origin_method_and_every_header_applies() {
        let config = config_of(CORSConfiguration {
            cors_rules: vec![
                rule(&["https://app.example.com"], &["PUT"], &["content-type", "x-amz-*"]),
                rule(&["https://*.example.com"], &["GET", "HEAD"], &[]),
                rule(&["*"], &["GET"], &["*"]),
            ],
        })
        .unwrap();
        let ask = |origin, method, headers: &[&str]| {
            let headers = headers.iter().map(|h| (*h).to_owned()).collect();
            let request = CorsRequest { origin, method, headers };
            matching(&config, &request).map(|r| r.allowed_origins[0].clone())
        };
        let app = Some("https://app.example.com".to_owned());
        assert_eq!(ask("https://app.example.com", "PUT", &["content-type", "x-amz-date"]), app);
        assert_eq!(ask("https://app.example.com", "PUT", &["authorization"]), None);
        assert_eq!(
            ask("https://app.example.com", "GET", &[]),
            Some("https://*.example.com".into())
        );
        assert_eq!(ask("https://other.org", "GET", &["x-anything"]), Some("*".into()));
        assert_eq!(ask("https://other.org", "DELETE", &[]), None);
        assert_eq!(ask("https://APP.example.com", "PUT", &[]), None, "origins compare exactly");
    }

    proptest! {
        /// A pattern with its `*` replaced by any text matches that text; without a `*` only
        /// itself; and a text shorter than the pattern's fixed parts never.
        #[test]
        fn wildcards_stand_for_any_text(
            head in "[a-z.:/]{0,12}",
            tail in "[a-z.:/]{0,12}",
            middle in "\\PC{0,12}",
        ) {
            let pattern = format!("{head}*{tail}");
            let text = format!("{head}{middle}{tail}");
            prop_assert!(wildcard_match(&pattern, &text));
            prop_assert!(wildcard_match(&text, &text) || text.contains('*'));
            if !head.is_empty() || !tail.is_empty() {
                let short = &format!("{head}{tail}")[..head.len() + tail.len() - 1];
                prop_assert!(!wildcard_match(&pattern, short));
            }
        }
    }
}
