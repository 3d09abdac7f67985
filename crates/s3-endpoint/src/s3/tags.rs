//! Object tags as tenants send them: the `x-amz-tagging` header of PutObject, CopyObject and
//! CreateMultipartUpload (URL-encoded `key=value&...`) and the `<Tagging>` document of
//! PutObjectTagging, checked against S3's limits before anything is stored.
//!
//! S3's rules: at most [`MAX_TAGS`] tags, a key of 1 to [`MAX_KEY_UNITS`] and a value of at most
//! [`MAX_VALUE_UNITS`] UTF-16 code units (S3 counts characters as Java does), no key twice, and
//! no key in the `aws:` namespace, which S3 keeps for itself. A broken rule is `InvalidTag`; a
//! header that is not URL-encoded UTF-8 is `InvalidArgument`, as S3 answers.
//!
//! A tag set has no order of its own: S3 lists it by key (a header `foo=bar&bar` reads back as
//! `bar`, then `foo`), so tags are kept sorted by key.

use s3s::dto::{Tag, Tagging};
use s3s::{S3Error, S3ErrorCode, S3Result, s3_error};

use crate::store::Tags;

/// Most tags one object may have.
pub const MAX_TAGS: usize = 10;
/// Most tags one bucket may have.
pub const MAX_BUCKET_TAGS: usize = 50;
/// Longest tag key, in UTF-16 code units.
pub const MAX_KEY_UNITS: usize = 128;
/// Longest tag value, in UTF-16 code units.
pub const MAX_VALUE_UNITS: usize = 256;

/// The tags of an `x-amz-tagging` header.
pub fn from_header(header: &str) -> S3Result<Tags> {
    let malformed = || {
        s3_error!(
            InvalidArgument,
            "The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query \
             parameters without tag name duplicates."
        )
    };
    let mut tags = Vec::new();
    for pair in header.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = url_decode(key).ok_or_else(malformed)?;
        let value = url_decode(value).ok_or_else(malformed)?;
        tags.push((key, value));
    }
    checked(tags)
}

/// The tags of a `<Tagging>` document (PutObjectTagging).
pub fn from_tagging(tagging: Tagging) -> S3Result<Tags> {
    pairs_of(tagging).and_then(checked)
}

/// The tags of a bucket's `<Tagging>` document (PutBucketTagging): the rules of object tags,
/// but up to [`MAX_BUCKET_TAGS`] of them.
pub fn bucket_tags_from(tagging: Tagging) -> S3Result<Tags> {
    pairs_of(tagging).and_then(|tags| checked_within(tags, (MAX_BUCKET_TAGS, "Bucket")))
}

/// The key and value of each tag of a `<Tagging>` document, which must have both.
fn pairs_of(tagging: Tagging) -> S3Result<Tags> {
    let mut tags = Vec::with_capacity(tagging.tag_set.len());
    for Tag { key, value } in tagging.tag_set {
        let (Some(key), Some(value)) = (key, value) else {
            return Err(s3_error!(
                MalformedXML,
                "The XML you provided was not well-formed or did not validate against our \
                 published schema: every Tag needs a Key and a Value"
            ));
        };
        tags.push((key, value));
    }
    Ok(tags)
}

/// The `<Tagging>` document of stored tags.
pub fn to_tag_set(tags: &Tags) -> Vec<Tag> {
    tags.iter().map(|(k, v)| Tag { key: Some(k.clone()), value: Some(v.clone()) }).collect()
}

/// An object's `tags` if they keep S3's rules, else the `InvalidTag` error S3 gives; sorted by
/// key, the order S3 lists a tag set in, whatever order it was given in.
pub fn checked(tags: Tags) -> S3Result<Tags> {
    checked_within(tags, (MAX_TAGS, "Object"))
}

/// [`checked`], for a tag set of at most `most` tags of an object or a bucket (`whose`).
fn checked_within(mut tags: Tags, (most, whose): (usize, &str)) -> S3Result<Tags> {
    let invalid = |message: String| S3Error::with_message(S3ErrorCode::InvalidTag, message);
    if tags.len() > most {
        return Err(invalid(format!("{whose} tags cannot be greater than {most}")));
    }
    for (i, (key, value)) in tags.iter().enumerate() {
        let key_units = key.encode_utf16().count();
        if key_units == 0 {
            return Err(invalid("The TagKey you have provided is invalid".to_owned()));
        }
        if key_units > MAX_KEY_UNITS {
            return Err(invalid(format!(
                "The TagKey you have provided is too long, max {MAX_KEY_UNITS}"
            )));
        }
        if value.encode_utf16().count() > MAX_VALUE_UNITS {
            return Err(invalid(format!(
                "The TagValue you have provided is too long, max {MAX_VALUE_UNITS}"
            )));
        }
        if key.get(..4).is_some_and(|prefix| prefix.eq_ignore_ascii_case("aws:")) {
            return Err(invalid("Your TagKey cannot be prefixed with aws:".to_owned()));
        }
        if tags[..i].iter().any(|(earlier, _)| earlier == key) {
            return Err(invalid("Cannot provide multiple Tags with the same key".to_owned()));
        }
    }
    tags.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
    Ok(tags)
}

/// Decodes one URL-encoded query component (`+` is a space); `None` for a broken `%` escape
/// or bytes that are not UTF-8.
fn url_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn code(result: S3Result<Tags>) -> String {
        result.unwrap_err().code().as_str().to_owned()
    }

    /// Encodes a component as clients do: everything but unreserved characters escaped.
    fn encode(text: &str) -> String {
        text.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    }

    #[test]
    fn headers_decode_as_query_strings() {
        let tags = from_header("a=1&b%20c=d+e&empty=&bare").unwrap();
        let expected = [("a", "1"), ("b c", "d e"), ("bare", ""), ("empty", "")];
        let expected: Tags = expected.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert_eq!(tags, expected);
        assert_eq!(from_header("").unwrap(), Vec::new());
        assert_eq!(code(from_header("a=%zz")), "InvalidArgument");
        assert_eq!(code(from_header("a=%ff")), "InvalidArgument", "not UTF-8");
        assert_eq!(code(from_header("a=%4")), "InvalidArgument");
    }

    #[test]
    fn tags_are_kept_sorted_by_key_whatever_order_they_came_in() {
        let expected: Tags = vec![("bar".into(), String::new()), ("foo".into(), "bar".into())];
        assert_eq!(from_header("foo=bar&bar").unwrap(), expected);
        let reversed: Tags = expected.iter().rev().cloned().collect();
        let tagging = Tagging { tag_set: to_tag_set(&reversed) };
        assert_eq!(from_tagging(tagging).unwrap(), expected);
    }

    #[test]
    fn a_bucket_takes_fifty_tags_under_the_same_rules() {
        let tagging = |count: usize| Tagging {
            tag_set: (0..count)
                .map(|i| Tag { key: Some(format!("k{i:02}")), value: Some(String::new()) })
                .collect(),
        };
        assert_eq!(bucket_tags_from(tagging(MAX_BUCKET_TAGS)).unwrap().len(), 50);
        assert_eq!(code(bucket_tags_from(tagging(MAX_BUCKET_TAGS + 1))), "InvalidTag");
        assert_eq!(code(from_tagging(tagging(MAX_TAGS + 1))), "InvalidTag", "objects take 10");
        let bad = |key: &str, value: &str| Tagging {
            tag_set: vec![Tag { key: Some(key.into()), value: Some(value.into()) }],
        };
        for (key, value) in
            [("", "v"), ("aws:cost", "v"), (&"k".repeat(129), ""), ("k", &"v".repeat(257))]
        {
            assert_eq!(code(bucket_tags_from(bad(key, value))), "InvalidTag", "{key} {value}");
        }
        let twice = Tagging { tag_set: [bad("k", "1").tag_set, bad("k", "2").tag_set].concat() };
        assert_eq!(code(bucket_tags_from(twice)), "InvalidTag");
        let no_value = Tagging { tag_set: vec![Tag { key: Some("k".into()), value: None }] };
        assert_eq!(code(bucket_tags_from(no_value)), "MalformedXML");
    }

    #[test]
    fn limits_are_counted_in_utf16_units() {
        let tag = |k: String, v: String| vec![(k, v)];
        assert!(checked(tag("k".repeat(128), "v".repeat(256))).is_ok());
        assert_eq!(code(checked(tag("k".repeat(129), String::new()))), "InvalidTag");
        assert_eq!(code(checked(tag("k".into(), "v".repeat(257)))), "InvalidTag");
        // 64 characters outside the BMP: 128 units, 256 bytes.
        assert!(checked(tag("😀".repeat(64), "😀".repeat(128))).is_ok());
        assert_eq!(code(checked(tag("😀".repeat(65), String::new()))), "InvalidTag");
        // 'é' is one unit, two bytes: 128 of them fit.
        assert!(checked(tag("é".repeat(128), "é".repeat(256))).is_ok());
        assert_eq!(code(checked(tag(String::new(), "v".into()))), "InvalidTag");
        for key in ["aws:x", "AWS:x", "Aws:"] {
            assert_eq!(code(checked(tag(key.into(), "v".into()))), "InvalidTag", "{key}");
        }
        assert!(checked(tag("awsx".into(), "v".into())).is_ok());
        let eleven = (0..11).map(|i| (format!("k{i}"), String::new())).collect();
        assert_eq!(code(checked(eleven)), "InvalidTag");
        let twice = vec![("k".into(), "1".into()), ("k".into(), "2".into())];
        assert_eq!(code(checked(twice)), "InvalidTag");
    }

    fn valid_tags() -> impl Strategy<Value = Tags> {
        let key = "\\PC{1,40}".prop_filter("not aws:", |k: &String| {
            !k.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("aws:"))
        });
        proptest::collection::btree_map(key, "\\PC{0,60}", 0..=10)
            .prop_map(|map| map.into_iter().collect())
    }

    proptest! {
        /// Whatever a header holds, parsing answers (never panics), and what it accepts keeps
        /// every rule.
        #[test]
        fn any_header_is_answered_and_accepted_tags_keep_the_rules(header in "\\PC{0,400}") {
            match from_header(&header) {
                Ok(tags) => {
                    prop_assert!(tags.len() <= MAX_TAGS);
                    for (i, (k, v)) in tags.iter().enumerate() {
                        prop_assert!((1..=MAX_KEY_UNITS).contains(&k.encode_utf16().count()));
                        prop_assert!(v.encode_utf16().count() <= MAX_VALUE_UNITS);
                        prop_assert!(!k.to_ascii_lowercase().starts_with("aws:"));
                        prop_assert!(tags[..i].iter().all(|(other, _)| other != k));
                    }
                }
                Err(e) => {
                    let code = e.code().as_str();
                    prop_assert!(code == "InvalidTag" || code == "InvalidArgument", "{}", code);
                }
            }
        }

        /// Valid tags encoded as clients encode them come back as they were.
        #[test]
        fn encoded_tags_round_trip(tags in valid_tags()) {
            let header: Vec<String> =
                tags.iter().map(|(k, v)| format!("{}={}", encode(k), encode(v))).collect();
            prop_assert_eq!(from_header(&header.join("&")).unwrap(), tags.clone());
            let tagging = Tagging { tag_set: to_tag_set(&tags) };
            prop_assert_eq!(from_tagging(tagging).unwrap(), tags);
        }

        /// One tag past a limit is refused with InvalidTag, whichever limit.
        #[test]
        fn one_unit_over_is_invalid(extra in 1usize..50, wide in any::<bool>()) {
            let unit = if wide { "😀" } else { "x" };
            let per = if wide { 2 } else { 1 };
            let long_key = unit.repeat(MAX_KEY_UNITS / per + extra);
            prop_assert_eq!(code(checked(vec![(long_key, String::new())])), "InvalidTag");
            let long_value = unit.repeat(MAX_VALUE_UNITS / per + extra);
            prop_assert_eq!(code(checked(vec![("k".into(), long_value)])), "InvalidTag");
            let many = (0..MAX_TAGS + extra).map(|i| (format!("k{i}"), String::new())).collect();
            prop_assert_eq!(code(checked(many)), "InvalidTag");
        }
    }
}
