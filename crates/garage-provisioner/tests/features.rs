//! Claims' CORS and lifecycle rules on a real three-node Garage cluster, the controller in this
//! process on the real control plane as `deploy/garage/` runs it: applied through Garage's S3
//! API, followed on the bound claim, and what Garage cannot honour refused by name.

mod common;

use bucket_api::ClaimPhase;
use common::{Harness, Setup, error_code, setup, spec};
use garage_provisioner::names::{SERVICE_KEY_NAME, service_key_id};
use garage_provisioner::store::Store;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use test_support::{Deployed, eventually, ready};

const ROOK_LIFECYCLE: &str = r#"{"Rules": [
    {"ID": "AbortIncompleteMultipartUploads", "Status": "Enabled", "Prefix": "",
     "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
    {"ID": "ExpireAfter30Days", "Status": "Enabled", "Prefix": "logs/",
     "Expiration": {"Days": 30}}]}"#;

fn cors(origin: &str) -> String {
    format!(r#"{{"CORSRules": [{{"AllowedOrigins": ["{origin}"], "AllowedMethods": ["GET"]}}]}}"#)
}

/// An S3 client with the provisioner's own key, which owns the buckets it creates: what the
/// operator reads the bucket's settings with (a claim's key may not).
async fn owner_s3(s: &Setup) -> aws_sdk_s3::Client {
    let settings = s.settings(0);
    let store = Store { admin: s.admin(&settings.admin, &settings.token_secret) };
    let keys = store.read_key(&service_key_id(), SERVICE_KEY_NAME).await.unwrap();
    s.s3(0, &keys)
}

async fn change_config(s: &Setup, name: &str, config: serde_json::Value) {
    let patch = json!({ "spec": { "additionalConfig": config } });
    s.claims.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

#[tokio::test]
async fn cors_and_expiration_rules_follow_the_claim_and_the_rest_is_refused_by_name() {
    let s = setup("garage-features").await;
    let controller = Harness::start(s.backend(), Deployed::Garage);
    let p = &controller.provisioner;
    let open = s.class(p, &[("allowCors", "true")], "Delete").await;
    let closed = s.class(p, &[("allowLifecycle", "false")], "Delete").await;
    let web = cors("https://app.example.com");
    s.claim("web", spec(&open, "", &[("cors", &web), ("bucketLifecycle", ROOK_LIFECYCLE)])).await;
    let transitions = r#"{"Rules": [{"Status": "Enabled", "Expiration": {"Days": 9},
        "Transitions": [{"Days": 1, "StorageClass": "GLACIER"}]}]}"#;
    let refusals = [
        ("archive", &open, ("bucketLifecycle", transitions), "rule 1: Transitions not supported"),
        ("versioned", &open, ("versioning", "Enabled"), "versioning (not supported: Garage has no"),
        ("locked", &open, ("objectLock", "Enabled"), "objectLock (not supported: Garage has no"),
        ("unruled", &closed, ("bucketLifecycle", ROOK_LIFECYCLE), "allowLifecycle: \"true\""),
        ("uncors", &closed, ("cors", &web), "allowCors: \"true\""),
    ];
    let mut names = Vec::new();
    for (name, class, config, _) in &refusals {
        let wanted = format!("{name}-{}", test_support::unique_suffix());
        s.claim(name, spec(class, &wanted, &[*config])).await;
        names.push(wanted);
    }

    let claim = s.wait_for("web", ClaimPhase::Bound, "Bound").await;
    let bucket = claim.spec.bucket_name.unwrap();
    let s3 = owner_s3(&s).await;
    let origins = || async {
        let found = s3.get_bucket_cors().bucket(&bucket).send().await.ok()?;
        Some(found.cors_rules().first()?.allowed_origins().to_vec())
    };
    assert_eq!(origins().await.unwrap(), ["https://app.example.com"]);
    let rules = s3.get_bucket_lifecycle_configuration().bucket(&bucket).send().await.unwrap();
    let rules = rules.rules();
    assert_eq!(
        rules[0].abort_incomplete_multipart_upload().and_then(|a| a.days_after_initiation()),
        Some(1)
    );
    assert_eq!(rules[1].expiration().and_then(|e| e.days()), Some(30));
    assert_eq!(rules[1].filter().and_then(|f| f.prefix()), Some("logs/"), "the prefix is kept");

    for ((name, _, _, says), wanted) in refusals.iter().zip(&names) {
        let failed = s.wait_for(name, ClaimPhase::Failed, "InvalidParameters").await;
        let message = &ready(&failed).unwrap().message;
        assert!(message.contains(says), "{name}: {message}");
        assert!(s.bucket_info(wanted).await.is_none(), "{name}: no bucket for a refused claim");
    }

    // Changed on the bound claim, then dropped: the bucket follows.
    change_config(&s, "web", json!({ "cors": cors("https://new.example.com") })).await;
    eventually("the changed CORS rules on the bucket", || async {
        (origins().await? == ["https://new.example.com"]).then_some(())
    })
    .await;
    change_config(&s, "web", json!({ "cors": null, "bucketLifecycle": null })).await;
    eventually("the rules removed from the bucket", || async {
        let lifecycle = s3.get_bucket_lifecycle_configuration().bucket(&bucket).send().await;
        (origins().await.is_none() && lifecycle.is_err()).then_some(())
    })
    .await;
    let gone = s3.get_bucket_lifecycle_configuration().bucket(&bucket).send().await;
    assert_eq!(error_code(gone), "NoSuchLifecycleConfiguration");

    for name in ["web", "archive", "versioned", "locked", "unruled", "uncors"] {
        s.delete_and_wait(name).await;
    }
    assert!(s.bucket_info(&bucket).await.is_none(), "deleted under Delete");
}
