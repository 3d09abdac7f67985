//! Credential rotation on S3: a controller in this process on the real control plane, moto with
//! IAM enforced, and consumers reading with the keys the claim's Secret held.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bucket_api::{ClaimPhase, ObjectBucketClaimSpec};
use common::cluster::{Setup, setup};
use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use s3_provisioner::iam;
use serde_json::json;
use test_support::{Deployed, Harness, eventually};

type Log = Arc<Mutex<Vec<(Timestamp, Result<(), String>)>>>;

/// Reads `probe` every 50 ms with `s3`, the way a pod keeps using the key it started with.
fn consumer(s3: aws_sdk_s3::Client, bucket: String) -> (Log, tokio::task::JoinHandle<()>) {
    let log: Log = Arc::default();
    let written = log.clone();
    let task = tokio::spawn(async move {
        loop {
            let asked = Timestamp::now();
            let answer = s3.get_object().bucket(&bucket).key("probe").send().await;
            let answer = answer.map(drop).map_err(|e| format!("{:?}", e.into_service_error()));
            written.lock().unwrap().push((asked, answer));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    (log, task)
}

fn served_until(log: &Log, until: Timestamp) -> usize {
    let log = log.lock().unwrap();
    let before: Vec<_> = log.iter().filter(|(at, _)| *at < until).collect();
    let failed: Vec<_> = before.iter().filter(|(_, answer)| answer.is_err()).collect();
    assert!(failed.is_empty(), "{} of {} reads failed: {failed:?}", failed.len(), before.len());
    before.len()
}

async fn bound_claim(
    s: &Setup,
    provisioner: &str,
    parameters: &[(&str, &str)],
) -> (String, String) {
    let owner = s.moto.least_privileged_owner(&format!("owner-{}", common::suffix())).await;
    s.owner_keys("owner", &owner).await;
    let class = s.class(provisioner, "owner", parameters, Some("Delete")).await;
    let spec = ObjectBucketClaimSpec {
        storage_class_name: class,
        generate_bucket_name: Some("rotated".into()),
        ..Default::default()
    };
    s.claim("app", spec).await;
    let claim = s.wait_for("app", ClaimPhase::Bound, "Bound").await;
    let user = iam::user_name(&bucket_provisioner::user_id_for_claim(&claim.uid().unwrap()));
    (claim.spec.bucket_name.unwrap(), user)
}

async fn rotated_from(s: &Setup, old: &str) -> Timestamp {
    eventually("the claim's key to be replaced, overlapping the previous one", || async {
        let keys = s.claim_keys("app").await;
        let claim = s.claims.get("app").await.ok()?;
        let expires = claim.status?.credentials?.previous_expires_at?;
        (keys.access_key_id != old).then_some(expires.0)
    })
    .await
}

async fn retired(s: &Setup) {
    eventually("the previous key to be retired", || async {
        let claim = s.claims.get("app").await.ok()?;
        claim.status?.credentials?.previous_expires_at.is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn on_demand_rotation_uses_iams_second_key_and_deletes_the_first_after_the_overlap() {
    let s = setup("s3-rot").await;
    let controller = Harness::start(s.backend(), Deployed::S3);
    let (bucket, user) =
        bound_claim(&s, &controller.provisioner, &[("rotationOverlap", "5s")]).await;
    let first = s.claim_keys("app").await;
    let first_s3 = s.moto.s3(&first);
    first_s3
        .put_object()
        .bucket(&bucket)
        .key("probe")
        .body(b"p".to_vec().into())
        .send()
        .await
        .unwrap();
    let (first_reads, first_task) = consumer(first_s3.clone(), bucket.clone());

    let patch = json!({ "metadata": { "annotations": {
        "objectbucket.io/rotate-credentials": "after-the-leak" } } });
    s.claims.patch("app", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let expires = rotated_from(&s, &first.access_key_id).await;
    let second = s.claim_keys("app").await;
    let mut both = s.moto.access_keys(&user).await;
    both.sort();
    let mut expected = vec![first.access_key_id.clone(), second.access_key_id.clone()];
    expected.sort();
    assert_eq!(both, expected, "IAM holds exactly the previous and the new key");
    let (second_reads, second_task) = consumer(s.moto.s3(&second), bucket.clone());

    retired(&s).await;
    first_task.abort();
    second_task.abort();
    assert!(served_until(&first_reads, expires) > 30, "the first key was used all along");
    served_until(&second_reads, Timestamp::now());
    assert_eq!(s.moto.access_keys(&user).await, [second.access_key_id.as_str()]);
    let refused = first_s3.get_object().bucket(&bucket).key("probe").send().await;
    assert_eq!(common::error_code(refused), "InvalidAccessKeyId");
    for step in ["RotatingCredentials", "CredentialsRotated", "PreviousKeyRetired"] {
        s.wait_event("app", step).await;
    }
}

#[tokio::test]
async fn scheduled_rotation_replaces_the_key_every_period() {
    let s = setup("s3-rot-sched").await;
    let controller = Harness::start(s.backend(), Deployed::S3);
    let parameters = [("rotationPeriod", "6s"), ("rotationOverlap", "2s")];
    let (bucket, user) = bound_claim(&s, &controller.provisioner, &parameters).await;
    let first = s.claim_keys("app").await;
    rotated_from(&s, &first.access_key_id).await;
    retired(&s).await;
    let second = s.claim_keys("app").await;
    assert_eq!(s.moto.access_keys(&user).await, [second.access_key_id.as_str()]);
    let refused = s.moto.s3(&first).list_objects_v2().bucket(&bucket).send().await;
    assert_eq!(common::error_code(refused), "InvalidAccessKeyId");
    rotated_from(&s, &second.access_key_id).await;
}
