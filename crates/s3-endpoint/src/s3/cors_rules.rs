//! A PutBucketCors document as the store keeps it (checked by [`CorsConfig::check`], which
//! holds S3's rules), and which rule a browser's request matches.
//!
//! A request matches the first rule (in order) that names its `Origin` (a `*` standing for any
//! text, compared exactly otherwise), its method (for a preflight, the one in
//! `Access-Control-Request-Method`), and, for a preflight, every header listed in
//! `Access-Control-Request-Headers` (compared without case, `*` again standing for any text).

use s3s::dto::{CORSConfiguration, CORSRule};
use s3s::{S3Error, S3ErrorCode, S3Result};

use crate::store::{CorsConfig, CorsRefusal, CorsRule, InvalidCors};

/// The configuration of a PutBucketCors, checked (see [`CorsConfig::check`]).
pub fn config_of(input: CORSConfiguration) -> S3Result<CorsConfig> {
    let rules = input
        .cors_rules
        .into_iter()
        .map(|rule| CorsRule {
            id: rule.id,
            allowed_origins: rule.allowed_origins,
            allowed_methods: rule.allowed_methods,
            allowed_headers: rule.allowed_headers.unwrap_or_default(),
            expose_headers: rule.expose_headers.unwrap_or_default(),
            max_age_seconds: rule.max_age_seconds,
        })
        .collect();
    let config = CorsConfig { rules };
    match config.check() {
        Ok(()) => Ok(config),
        Err(InvalidCors { code, message }) => {
            let code = match code {
                CorsRefusal::MalformedXml => S3ErrorCode::MalformedXML,
                CorsRefusal::InvalidRequest => S3ErrorCode::InvalidRequest,
                CorsRefusal::InvalidArgument => S3ErrorCode::InvalidArgument,
            };
            Err(S3Error::with_message(code, message))
        }
    }
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
        assert_eq!(code(vec![rule(&["*"], &["GET"], &[]); 101]), "MalformedXML");
        assert!(
            config_of(CORSConfiguration { cors_rules: vec![rule(&["*"], &["GET"], &[]); 100] })
                .is_ok()
        );
        let long = "o".repeat(64 * 1024);
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
