//! A claim's CORS rules (`additionalConfig` `cors`) with the real binary on the real control
//! plane: applied to its bucket where the StorageClass allows them (`allowCors: "true"`),
//! answered to a browser's preflight, changed and removed with the claim, and refused by name
//! where the class does not allow them.

mod harness;

use std::collections::BTreeMap;

use bucket_api::{ClaimPhase, ObjectBucketClaimSpec};
use harness::*;
use serde_json::json;

const APP: &str = "https://app.example.com";

fn rules(origin: &str, method: &str) -> String {
    json!({ "CORSRules": [{
        "AllowedOrigins": [origin],
        "AllowedMethods": [method],
        "AllowedHeaders": ["content-type"],
        "MaxAgeSeconds": 600,
    }] })
    .to_string()
}

/// A browser's preflight to the endpoint, as raw HTTP: its status and headers.
async fn preflight(port: u16, path: &str, origin: &str, method: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let request = format!(
        "OPTIONS {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: {origin}\r\n\
         Access-Control-Request-Method: {method}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response.split(' ').nth(1).unwrap().parse().unwrap();
    (status, response.to_ascii_lowercase())
}

#[tokio::test]
async fn a_claims_cors_rules_follow_the_claim_where_its_class_allows_them() {
    let env = Env::new("hp-cors").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[("allowCors", "true")], "Delete").await;
    let spec = ObjectBucketClaimSpec {
        storage_class_name: class,
        generate_bucket_name: Some("web".into()),
        additional_config: Some(BTreeMap::from([("cors".to_owned(), rules(APP, "PUT"))])),
        ..Default::default()
    };
    env.home().create("web", spec).await;
    env.wait("web", ClaimPhase::Bound, "Bound").await;
    let (s3, bucket) = env.s3_for("web").await;

    let got = s3.get_bucket_cors().bucket(&bucket).send().await.unwrap();
    let rule = &got.cors_rules()[0];
    assert_eq!(
        (rule.allowed_origins(), rule.allowed_methods()),
        (&[APP.to_owned()][..], &["PUT".to_owned()][..])
    );
    assert_eq!(rule.max_age_seconds(), Some(600));
    let (status, text) = preflight(env.port, &format!("/{bucket}/upload"), APP, "PUT").await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(&format!("access-control-allow-origin: {APP}")), "{text}");
    assert!(text.contains("access-control-max-age: 600"), "{text}");

    // Changed on the bound claim: the new rules replace the old.
    let other = "https://other.example.org";
    env.change_config("web", json!({ "cors": rules(other, "GET") })).await;
    let (status, _) = preflight(env.port, &format!("/{bucket}/upload"), APP, "PUT").await;
    assert_eq!(status, 403);
    let (status, text) = preflight(env.port, &format!("/{bucket}/page"), other, "GET").await;
    assert_eq!(status, 200, "{text}");

    // Removed from the claim: the bucket has no rules any more.
    env.change_config("web", json!({ "cors": null })).await;
    let err = s3.get_bucket_cors().bucket(&bucket).send().await;
    assert_eq!(code(err), "NoSuchCORSConfiguration");
}

#[tokio::test]
async fn cors_rules_are_refused_by_name_where_the_class_does_not_allow_them() {
    let env = Env::new("hp-cors-bad").await;
    let _provisioner = env.start("node-a");
    let plain = env.class(&[], "Delete").await;
    let allowing = env.class(&[("allowCors", "true")], "Delete").await;
    let home = env.home();
    for (name, class, value) in [
        ("not-allowed", &plain, rules(APP, "PUT")),
        ("bad-method", &allowing, rules(APP, "PATCH")),
        ("typo", &allowing, json!({ "CORSRules": [{ "AllowedOrigin": ["*"] }] }).to_string()),
    ] {
        let spec = ObjectBucketClaimSpec {
            storage_class_name: class.clone(),
            generate_bucket_name: Some(name.into()),
            additional_config: Some(BTreeMap::from([("cors".to_owned(), value)])),
            ..Default::default()
        };
        home.create(name, spec).await;
    }
    for (name, says) in [
        ("not-allowed", "allowCors: \"true\""),
        ("bad-method", "Unsupported method is PATCH"),
        ("typo", "unknown field `AllowedOrigin`"),
    ] {
        let claim = env.wait(name, ClaimPhase::Failed, "InvalidParameters").await;
        let message = &claim.status.unwrap().conditions[0].message;
        assert!(message.contains("additionalConfig cors"), "{name}: {message}");
        assert!(message.contains(says), "{name}: {message}");
    }
    let buckets = std::fs::read_dir(env.root.path().join("buckets")).unwrap().count();
    assert_eq!(buckets, 0, "nothing was created for a refused claim");
}
