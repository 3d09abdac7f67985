//! `x-amz-expiration` on PutObject, GetObject and HeadObject of an object a lifecycle rule will
//! expire: when, and by which rule, as S3 writes it (`expiry-date="Fri, 23 Dec 2012 00:00:00
//! GMT", rule-id="..."`, the rule's `ID` URL-encoded). Of the rules that take the object, the
//! earliest names it, as the lifecycle pass decides.

use std::time::SystemTime;

use super::HostPathS3;
use crate::store::ObjectInfo;

impl HostPathS3 {
    /// The `x-amz-expiration` value for the current version `info` of `bucket`, if a rule
    /// expires it. Rules that cannot be read leave the header out, never the answer.
    pub(super) async fn expiration_of(&self, bucket: &str, info: &ObjectInfo) -> Option<String> {
        let config = match self.store.bucket_lifecycle_cached(bucket).await {
            Ok(config) => config?,
            Err(e) => {
                tracing::warn!(bucket, error = %e, "reading lifecycle rules for x-amz-expiration");
                return None;
            }
        };
        let (at, rule) =
            config.expiry(&info.key, info.size, &info.attrs.tags, info.last_modified)?;
        Some(expiration_header(at, rule.unwrap_or_default()))
    }
}

fn expiration_header(at: SystemTime, rule_id: &str) -> String {
    let date = jiff::Timestamp::try_from(at).unwrap_or(jiff::Timestamp::MAX);
    let date = date.strftime("%a, %d %b %Y %H:%M:%S GMT");
    format!("expiry-date=\"{date}\", rule-id=\"{}\"", url_encoded(rule_id))
}

/// `text` with every byte but the unreserved ones (RFC 3986) percent-encoded.
fn url_encoded(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    #[test]
    fn the_header_reads_as_s3_writes_it() {
        // 2012-12-23, a Sunday, at midnight UTC.
        let at = UNIX_EPOCH + Duration::from_secs(15_697 * 86_400);
        assert_eq!(
            expiration_header(at, "picture-deletion-rule"),
            "expiry-date=\"Sun, 23 Dec 2012 00:00:00 GMT\", rule-id=\"picture-deletion-rule\""
        );
        assert!(expiration_header(at, "a rule/é\"").ends_with("rule-id=\"a%20rule%2F%C3%A9%22\""));
    }
}
