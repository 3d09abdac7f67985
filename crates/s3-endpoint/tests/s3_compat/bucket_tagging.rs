//! Bucket tagging as S3 and s3-tests' test_set_bucket_tagging use it: none is `NoSuchTagSet`
//! (404), a set is read back by key and survives a restart, a delete answers 204; tags follow
//! S3's rules (`InvalidTag`), up to 50; and, a bucket-wide setting, only the creating claim's
//! full-access key (or the operator) may change them.

use aws_sdk_s3::Client;
use aws_sdk_s3::types::{Tag, Tagging};
use s3_endpoint::store::KeyMode;

use crate::common::{Server, code, status};

fn tagging(list: &[(&str, &str)]) -> Tagging {
    let tags = list.iter().map(|(k, v)| Tag::builder().key(*k).value(*v).build().unwrap());
    Tagging::builder().set_tag_set(Some(tags.collect())).build().unwrap()
}

async fn tags_of(s3: &Client, bucket: &str) -> Result<Vec<(String, String)>, String> {
    let got = s3.get_bucket_tagging().bucket(bucket).send().await.map_err(|e| code(&e))?;
    Ok(got.tag_set().iter().map(|t| (t.key().to_owned(), t.value().to_owned())).collect())
}

async fn put_tags(s3: &Client, bucket: &str, list: &[(&str, &str)]) -> Result<(), String> {
    let put = s3.put_bucket_tagging().bucket(bucket).tagging(tagging(list));
    put.send().await.map(drop).map_err(|e| code(&e))
}

#[tokio::test]
async fn tags_are_set_read_and_deleted_as_s3_does() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("tagged", "obc-t").await;
    let s3 = server.client(&key);
    let err = s3.get_bucket_tagging().bucket("tagged").send().await.unwrap_err();
    assert_eq!((code(&err), status(&err)), ("NoSuchTagSet".to_owned(), Some(404)));

    put_tags(&s3, "tagged", &[("team", "web"), ("Hello", "World")]).await.unwrap();
    let expected = vec![("Hello".into(), "World".into()), ("team".into(), "web".into())];
    assert_eq!(tags_of(&s3, "tagged").await.unwrap(), expected);
    server.stop().await;

    let server = Server::start(tmp.path()).await;
    let s3 = server.client(&key);
    assert_eq!(tags_of(&s3, "tagged").await.unwrap(), expected, "kept across a restart");
    put_tags(&s3, "tagged", &[("only", "")]).await.unwrap();
    assert_eq!(tags_of(&s3, "tagged").await.unwrap(), [("only".into(), String::new())]);
    let deleted = s3.delete_bucket_tagging().bucket("tagged").send().await;
    assert!(deleted.is_ok(), "{deleted:?}");
    assert_eq!(tags_of(&s3, "tagged").await.unwrap_err(), "NoSuchTagSet");
    let err = s3.get_bucket_tagging().bucket("missing").send().await.unwrap_err();
    assert_eq!(code(&err), "AccessDenied", "a bucket the key does not reach");
    server.stop().await;
}

#[tokio::test]
async fn tags_past_s3_rules_are_refused_and_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("rules", "obc-r").await;
    let s3 = server.client(&key);
    put_tags(&s3, "rules", &[("keep", "1")]).await.unwrap();
    let fifty: Vec<String> = (0..51).map(|i| format!("k{i:02}")).collect();
    let many = |n: usize| fifty[..n].iter().map(|k| (k.as_str(), "v")).collect::<Vec<_>>();
    let long_key = "k".repeat(129);
    let long_value = "v".repeat(257);
    for (what, list) in [
        ("51 tags", many(51)),
        ("an empty key", vec![("", "v")]),
        ("a key too long", vec![(long_key.as_str(), "v")]),
        ("a value too long", vec![("k", long_value.as_str())]),
        ("a key twice", vec![("k", "1"), ("k", "2")]),
        ("aws: keys", vec![("aws:cost", "1")]),
    ] {
        assert_eq!(put_tags(&s3, "rules", &list).await.unwrap_err(), "InvalidTag", "{what}");
    }
    assert_eq!(tags_of(&s3, "rules").await.unwrap(), [("keep".into(), "1".into())]);
    put_tags(&s3, "rules", &many(50)).await.unwrap();
    assert_eq!(tags_of(&s3, "rules").await.unwrap().len(), 50, "50 is the limit");
    server.stop().await;
}

#[tokio::test]
async fn only_the_creators_full_access_key_changes_them() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let owner = server.client(&server.bucket_with_key("shared", "obc-owner").await);
    let sharer = server.client(&server.store.issue_key("obc-sharer", "shared").await.unwrap());
    put_tags(&owner, "shared", &[("set-by", "owner")]).await.unwrap();
    let owners = vec![("set-by".to_owned(), "owner".to_owned())];

    assert_eq!(
        put_tags(&sharer, "shared", &[("set-by", "sharer")]).await,
        Err("AccessDenied".into())
    );
    let err = sharer.delete_bucket_tagging().bucket("shared").send().await.unwrap_err();
    assert_eq!(code(&err), "AccessDenied");
    assert_eq!(tags_of(&sharer, "shared").await.unwrap(), owners, "a sharer reads them");

    server.store.set_key_mode("obc-owner", "shared", KeyMode::ReadOnly).await.unwrap();
    assert_eq!(put_tags(&owner, "shared", &[("a", "b")]).await, Err("AccessDenied".into()));
    assert_eq!(tags_of(&owner, "shared").await.unwrap(), owners);
    server.stop().await;
}
