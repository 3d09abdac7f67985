//! Lifecycle rules set, read and removed through the SDK and as raw signed XML, answered the
//! way they were written; refused with S3's error codes, leaving the rules in place unchanged;
//! changed only by full-access keys and the operator.

use aws_sdk_s3::primitives::DateTime;
use aws_sdk_s3::types::{
    AbortIncompleteMultipartUpload, ExpirationStatus, LifecycleExpiration, LifecycleRule,
    LifecycleRuleAndOperator, LifecycleRuleFilter, NoncurrentVersionExpiration, Tag, Transition,
    TransitionStorageClass,
};
use s3_endpoint::store::KeyMode;

use super::{configuration, expire, prefix, signed};
use crate::common::{Server, code, status};

const BUCKET: &str = "rules";

fn tag(key: &str, value: &str) -> Tag {
    Tag::builder().key(key).value(value).build().unwrap()
}

/// Three rules in three forms: a prefix, an `And` of prefix and tags with a date, and an empty
/// filter with the actions that have nothing to match but uploads and versions.
fn three_rules() -> Vec<LifecycleRule> {
    let and = LifecycleRuleAndOperator::builder()
        .prefix("logs/")
        .tags(tag("class", "scratch"))
        .tags(tag("team", "a"))
        .build();
    let dated = LifecycleRule::builder()
        .id("dated")
        .status(ExpirationStatus::Disabled)
        .filter(LifecycleRuleFilter::builder().and(and).build())
        .expiration(LifecycleExpiration::builder().date(DateTime::from_secs(1_893_456_000)).build())
        .build()
        .unwrap();
    let uploads = LifecycleRule::builder()
        .id("uploads")
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().build())
        .abort_incomplete_multipart_upload(
            AbortIncompleteMultipartUpload::builder().days_after_initiation(7).build(),
        )
        .noncurrent_version_expiration(
            NoncurrentVersionExpiration::builder().noncurrent_days(30).build(),
        )
        .build()
        .unwrap();
    vec![expire("tmp", prefix("tmp/"), 1), dated, uploads]
}

#[tokio::test]
async fn rules_are_set_read_and_removed_as_sent() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key(BUCKET, "obc-rules").await;
    let s3 = server.client(&key);
    let none = s3.get_bucket_lifecycle_configuration().bucket(BUCKET).send().await.unwrap_err();
    assert_eq!(code(&none), "NoSuchLifecycleConfiguration");
    assert_eq!(status(&none), Some(404));

    let put = s3.put_bucket_lifecycle_configuration().bucket(BUCKET);
    put.lifecycle_configuration(configuration(three_rules())).send().await.unwrap();
    let got = s3.get_bucket_lifecycle_configuration().bucket(BUCKET).send().await.unwrap();
    assert_eq!(got.rules(), three_rules());

    // Replaced whole, as S3 does.
    let one = vec![expire("only", prefix(""), 2)];
    let put = s3.put_bucket_lifecycle_configuration().bucket(BUCKET);
    put.lifecycle_configuration(configuration(one.clone())).send().await.unwrap();
    let got = s3.get_bucket_lifecycle_configuration().bucket(BUCKET).send().await.unwrap();
    assert_eq!(got.rules(), one);

    s3.delete_bucket_lifecycle().bucket(BUCKET).send().await.unwrap();
    s3.delete_bucket_lifecycle().bucket(BUCKET).send().await.unwrap();
    let gone = s3.get_bucket_lifecycle_configuration().bucket(BUCKET).send().await.unwrap_err();
    assert_eq!(code(&gone), "NoSuchLifecycleConfiguration");
}

#[tokio::test]
async fn what_s3_refuses_is_refused_with_its_code_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, admin) =
        Server::start_with_admin(tmp.path(), "OPERATORKEY", "operator-secret-1234").await;
    let key = server.bucket_with_key(BUCKET, "obc-rules").await;
    let s3 = server.client(&key);
    let kept = vec![expire("kept", prefix("a/"), 3)];
    let put = s3.put_bucket_lifecycle_configuration().bucket(BUCKET);
    put.lifecycle_configuration(configuration(kept.clone())).send().await.unwrap();

    let rule = |id: &str| LifecycleRule::builder().id(id).status(ExpirationStatus::Enabled);
    let days = |d| LifecycleExpiration::builder().days(d).build();
    let abort = AbortIncompleteMultipartUpload::builder().days_after_initiation(1).build();
    let tagged = LifecycleRuleFilter::builder().tag(tag("k", "v")).build();
    let transition =
        Transition::builder().days(30).storage_class(TransitionStorageClass::Glacier).build();
    let not_midnight = LifecycleExpiration::builder().date(DateTime::from_secs(1_893_456_001));
    let refused: Vec<(&str, Vec<LifecycleRule>, &str)> = vec![
        ("zero days", vec![expire("z", prefix(""), 0)], "InvalidArgument"),
        ("negative days", vec![expire("n", prefix(""), -1)], "InvalidArgument"),
        (
            "the same ID twice",
            vec![expire("twice", prefix("a"), 1), expire("twice", prefix("b"), 1)],
            "InvalidArgument",
        ),
        ("a 256-character ID", vec![expire(&"i".repeat(256), prefix(""), 1)], "InvalidArgument"),
        (
            "1001 rules",
            (0..1001).map(|i| expire(&i.to_string(), prefix(""), 1)).collect(),
            "MalformedXML",
        ),
        ("no action", vec![rule("idle").filter(prefix("")).build().unwrap()], "InvalidRequest"),
        (
            "an upload abort on a tag",
            vec![
                rule("t").filter(tagged).abort_incomplete_multipart_upload(abort).build().unwrap(),
            ],
            "InvalidRequest",
        ),
        (
            "an upload abort after 0 days",
            vec![
                rule("a")
                    .filter(prefix(""))
                    .abort_incomplete_multipart_upload(
                        AbortIncompleteMultipartUpload::builder().days_after_initiation(0).build(),
                    )
                    .build()
                    .unwrap(),
            ],
            "InvalidArgument",
        ),
        (
            "a date not at midnight",
            vec![rule("d").filter(prefix("")).expiration(not_midnight.build()).build().unwrap()],
            "InvalidArgument",
        ),
        (
            "a transition",
            vec![
                rule("tr")
                    .filter(prefix(""))
                    .expiration(days(40))
                    .transitions(transition)
                    .build()
                    .unwrap(),
            ],
            "NotImplemented",
        ),
        (
            "a lower-case status",
            vec![
                LifecycleRule::builder()
                    .id("s")
                    .status(ExpirationStatus::from("enabled"))
                    .filter(prefix(""))
                    .expiration(days(1))
                    .build()
                    .unwrap(),
            ],
            "MalformedXML",
        ),
    ];
    for (what, rules, expected) in refused {
        let put = s3.put_bucket_lifecycle_configuration().bucket(BUCKET);
        let err = put.lifecycle_configuration(configuration(rules)).send().await.unwrap_err();
        assert_eq!(code(&err), expected, "{what}: {err:?}");
        assert_eq!(
            status(&err),
            Some(if expected == "NotImplemented" { 501 } else { 400 }),
            "{what}"
        );
    }
    let got = s3.get_bucket_lifecycle_configuration().bucket(BUCKET).send().await.unwrap();
    assert_eq!(got.rules(), kept, "every refusal left the rules as they were");

    let missing = admin.get_bucket_lifecycle_configuration().bucket("missing").send().await;
    assert_eq!(code(&missing.unwrap_err()), "NoSuchBucket");
    let put = admin.put_bucket_lifecycle_configuration().bucket("missing");
    let missing = put.lifecycle_configuration(configuration(kept)).send().await;
    assert_eq!(code(&missing.unwrap_err()), "NoSuchBucket");
}

/// Documents an SDK would not send, as raw signed requests: the older rule-level `Prefix`
/// (answered in the same form), and XML that S3's schema refuses.
#[tokio::test]
async fn raw_documents_are_read_as_s3_reads_them() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key(BUCKET, "obc-rules").await;
    let path = format!("/{BUCKET}?lifecycle");
    let old_form = "<LifecycleConfiguration><Rule><ID>old</ID><Prefix>logs/</Prefix>\
        <Status>Enabled</Status><Expiration><Days>5</Days></Expiration></Rule>\
        </LifecycleConfiguration>";
    let response = signed(&server, &key, "PUT", &path, old_form).await;
    assert_eq!(response.status, 200, "{}", response.text());
    let got = signed(&server, &key, "GET", &path, "").await;
    assert_eq!(got.status, 200, "{}", got.text());
    let text = got.text();
    assert!(text.contains("<Prefix>logs/</Prefix>"), "{text}");
    assert!(!text.contains("<Filter>"), "answered in the form it was sent: {text}");
    let s3 = server.client(&key);
    let rules = s3.get_bucket_lifecycle_configuration().bucket(BUCKET).send().await.unwrap();
    #[allow(deprecated)]
    let prefix = rules.rules()[0].prefix();
    assert_eq!(prefix, Some("logs/"));

    let rule = |inner: &str| {
        format!("<LifecycleConfiguration><Rule><ID>r</ID>{inner}</Rule></LifecycleConfiguration>")
    };
    let days = "<Expiration><Days>1</Days></Expiration>";
    let refused = [
        ("not XML", "lifecycle: please".to_owned(), "MalformedXML"),
        ("no rule", "<LifecycleConfiguration></LifecycleConfiguration>".to_owned(), "MalformedXML"),
        (
            "two conditions outside And",
            rule(&format!(
                "<Filter><Prefix>a</Prefix><Tag><Key>k</Key><Value>v</Value></Tag></Filter>\
                 <Status>Enabled</Status>{days}"
            )),
            "MalformedXML",
        ),
        (
            "a Filter and a Prefix",
            rule(&format!(
                "<Filter><Prefix>a</Prefix></Filter><Prefix>a</Prefix><Status>Enabled</Status>{days}"
            )),
            "MalformedXML",
        ),
        (
            "neither Filter nor Prefix",
            rule(&format!("<Status>Enabled</Status>{days}")),
            "MalformedXML",
        ),
        (
            "Days and Date",
            rule(
                "<Filter></Filter><Status>Enabled</Status><Expiration><Days>1</Days>\
                  <Date>2030-01-01T00:00:00Z</Date></Expiration>",
            ),
            "MalformedXML",
        ),
        (
            "an abort without days",
            rule(
                "<Filter></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload>\
                  </AbortIncompleteMultipartUpload>",
            ),
            "MalformedXML",
        ),
        (
            "a repeated tag key",
            rule(&format!(
                "<Filter><And><Tag><Key>k</Key><Value>1</Value></Tag><Tag><Key>k</Key>\
                 <Value>2</Value></Tag></And></Filter><Status>Enabled</Status>{days}"
            )),
            "InvalidRequest",
        ),
    ];
    for (what, body, expected) in refused {
        let response = signed(&server, &key, "PUT", &path, &body).await;
        assert_eq!(response.status, 400, "{what}: {}", response.text());
        assert_eq!(response.error_code().as_deref(), Some(expected), "{what}: {}", response.text());
    }
    let still = signed(&server, &key, "GET", &path, "").await;
    assert_eq!(still.text(), text, "nothing refused replaced the rules");
}

#[tokio::test]
async fn only_full_access_keys_and_the_operator_change_rules() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, admin) =
        Server::start_with_admin(tmp.path(), "OPERATORKEY", "operator-secret-1234").await;
    let owner = server.client(&server.bucket_with_key(BUCKET, "owner").await);
    let rules = || configuration(vec![expire("r", prefix("x/"), 1)]);
    let put = admin.put_bucket_lifecycle_configuration().bucket(BUCKET);
    put.lifecycle_configuration(rules()).send().await.unwrap();
    for (user, mode) in [("reader", KeyMode::ReadOnly), ("writer", KeyMode::WriteOnly)] {
        let key = server.store.issue_key(user, BUCKET).await.unwrap();
        server.store.set_key_mode(user, BUCKET, mode).await.unwrap();
        let s3 = server.client(&key);
        let put = s3.put_bucket_lifecycle_configuration().bucket(BUCKET);
        let err = put.lifecycle_configuration(rules()).send().await.unwrap_err();
        assert_eq!(code(&err), "AccessDenied", "{mode} put");
        let err = s3.delete_bucket_lifecycle().bucket(BUCKET).send().await.unwrap_err();
        assert_eq!(code(&err), "AccessDenied", "{mode} delete");
        let got = s3.get_bucket_lifecycle_configuration().bucket(BUCKET).send().await;
        assert_eq!(got.is_ok(), mode == KeyMode::ReadOnly, "{mode} get");
    }
    owner.delete_bucket_lifecycle().bucket(BUCKET).send().await.unwrap();
    let gone = admin.get_bucket_lifecycle_configuration().bucket(BUCKET).send().await;
    assert_eq!(code(&gone.unwrap_err()), "NoSuchLifecycleConfiguration");
}
