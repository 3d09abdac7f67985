//! What a change of metadata does on disk before it is acknowledged, recorded with strace:
//! PutObjectTagging and DeleteObjectTagging (on a plain object, one kept beside the bucket and a
//! folder marker), PutBucketCors and DeleteBucketCors, PutBucketLifecycleConfiguration and
//! DeleteBucketLifecycle. Every attribute set or removed is synced with its file, every file
//! written is synced, and every name renamed into place or removed is synced in its directory,
//! all before the answer; after a restart everything acknowledged is there. Alone in its binary
//! so that the trace holds this test's requests only.

mod common;

use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, CorsConfiguration, CorsRule, ExpirationStatus,
    LifecycleExpiration, LifecycleRule, LifecycleRuleFilter, Tag, Tagging,
};
use common::Server;
use common::strace::{Trace, answers, calls, is_sync, parent, synced};

fn tagging(key: &str, value: &str) -> Tagging {
    let tag = Tag::builder().key(key).value(value).build().unwrap();
    Tagging::builder().tag_set(tag).build().unwrap()
}

fn lifecycle() -> BucketLifecycleConfiguration {
    let expiration = LifecycleExpiration::builder().days(1).build();
    let filter = LifecycleRuleFilter::builder().prefix("tmp/").build();
    let rule = LifecycleRule::builder().id("tmp").status(ExpirationStatus::Enabled);
    let rule = rule.filter(filter).expiration(expiration).build().unwrap();
    BucketLifecycleConfiguration::builder().rules(rule).build().unwrap()
}

fn cors() -> CorsConfiguration {
    let rule = CorsRule::builder().allowed_origins("*").allowed_methods("GET").build().unwrap();
    CorsConfiguration::builder().cors_rules(rule).build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_tags_cors_and_lifecycle_rules_are_synced_before_the_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("meta", "obc-m").await;
    let s3 = server.client(&key);
    let root = server.store.root().display().to_string();
    // A plain object, one beside the bucket (`a` is also the prefix of `a/b`), a folder marker.
    for object in ["plain", "a/b", "a", "dir/"] {
        let body = if object.ends_with('/') { Vec::new() } else { b"x".to_vec() };
        s3.put_object().bucket("meta").key(object).body(body.into()).send().await.unwrap();
    }
    s3.get_object_tagging().bucket("meta").key("plain").send().await.unwrap();

    let trace = Trace::start(&tmp.path().join("strace.log")).await;
    for object in ["plain", "a", "dir/"] {
        let put = s3.put_object_tagging().bucket("meta").key(object);
        put.tagging(tagging("set", object)).send().await.unwrap();
    }
    s3.delete_object_tagging().bucket("meta").key("plain").send().await.unwrap();
    s3.put_bucket_cors().bucket("meta").cors_configuration(cors()).send().await.unwrap();
    s3.delete_bucket_cors().bucket("meta").send().await.unwrap();
    s3.put_bucket_cors().bucket("meta").cors_configuration(cors()).send().await.unwrap();
    let put_lifecycle = || s3.put_bucket_lifecycle_configuration().bucket("meta");
    put_lifecycle().lifecycle_configuration(lifecycle()).send().await.unwrap();
    s3.delete_bucket_lifecycle().bucket("meta").send().await.unwrap();
    put_lifecycle().lifecycle_configuration(lifecycle()).send().await.unwrap();
    let requests = 10;
    let log = trace.stop().await;

    let all = calls(&log);
    let answers = answers(&all);
    assert_eq!(answers.len(), requests, "every request answered:\n{log}");
    let under_root = |p: &String| p.starts_with(&root);
    let mut start = 0;
    for answer in answers {
        let before = &all[start..answer];
        let mut changed = 0;
        for (i, call) in before.iter().enumerate() {
            let Some(path) = call.paths.iter().find(|p| under_root(p)) else { continue };
            match call.name.as_str() {
                "fsetxattr" | "fremovexattr" | "write" | "pwrite64" | "writev" | "pwritev"
                | "pwritev2" => {
                    changed += 1;
                    assert!(
                        synced(&before[i..], path),
                        "{} on {path} not followed by its sync before the answer:\n{log}",
                        call.name
                    );
                }
                "rename" | "renameat" | "renameat2" => {
                    let [from, to] = &call.paths[..] else { panic!("{call:?}") };
                    changed += 1;
                    assert!(synced(&before[..i], from), "{from} renamed before it was synced");
                    assert!(
                        synced(&before[i..], &parent(to)),
                        "{to} renamed into place but its directory not synced:\n{log}"
                    );
                }
                "unlink" | "unlinkat" => {
                    changed += 1;
                    assert!(
                        synced(&before[i..], &parent(path)),
                        "{path} removed but its directory not synced:\n{log}"
                    );
                }
                "mkdir" | "mkdirat" => {
                    assert!(
                        synced(&before[i..], &parent(path)),
                        "{path} made but its parent not synced:\n{log}"
                    );
                }
                _ => {}
            }
        }
        assert!(changed >= 1, "the request changed something on disk:\n{log}");
        assert!(before.iter().any(is_sync), "and synced it:\n{log}");
        start = answer + 1;
    }

    // What was acknowledged is what a restarted endpoint serves.
    server.stop().await;
    let server = Server::start(tmp.path()).await;
    let s3 = server.client(&key);
    for (object, expected) in [("plain", None), ("a", Some("a")), ("dir/", Some("dir/"))] {
        let got = s3.get_object_tagging().bucket("meta").key(object).send().await.unwrap();
        let values: Vec<&str> = got.tag_set().iter().map(|t| t.value()).collect();
        assert_eq!(values, expected.into_iter().collect::<Vec<_>>(), "{object}");
    }
    let got = s3.get_bucket_cors().bucket("meta").send().await.unwrap();
    assert_eq!(got.cors_rules(), cors().cors_rules());
    let got = s3.get_bucket_lifecycle_configuration().bucket("meta").send().await.unwrap();
    assert_eq!(got.rules(), lifecycle().rules());
    server.stop().await;
}
