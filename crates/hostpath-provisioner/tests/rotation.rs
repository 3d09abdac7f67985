//! Credential rotation end to end: `hostpath-bucket-provisioner` as a real process against the
//! real control plane, consumers reading through the endpoint with the keys the Secret held.

mod harness;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_s3::Client as S3;
use bucket_api::{ClaimPhase, ObjectBucket, ObjectBucketClaim};
use bucket_provisioner::kubernetes::crash_point::ROTATION_STEPS;
use harness::*;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use test_support::eventually;

/// Every answer a consumer got: when it asked, and whether it was served.
type Log = Arc<Mutex<Vec<(Timestamp, Result<(), String>)>>>;

/// Reads `probe` every 50 ms with `s3` until dropped, the way a pod keeps using the key it
/// started with.
fn consumer(s3: S3, bucket: String) -> (Log, tokio::task::JoinHandle<()>) {
    let log: Log = Arc::default();
    let written = log.clone();
    let task = tokio::spawn(async move {
        loop {
            let asked = Timestamp::now();
            let answer = get(&s3, &bucket, "probe").await.map(drop);
            written.lock().unwrap().push((asked, answer));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    (log, task)
}

async fn request_rotation(env: &Env, claim: &str, token: &str) {
    let patch = json!({ "metadata": { "annotations": {
        "objectbucket.io/rotate-credentials": token } } });
    env.claims.patch(claim, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

async fn key_id(env: &Env, claim: &str) -> String {
    env.env_of(claim).await["AWS_ACCESS_KEY_ID"].clone()
}

/// Waits until the claim's Secret holds a key other than `old`.
async fn rotated_from(env: &Env, claim: &str, old: &str) {
    eventually(&format!("{claim}'s key to replace {old}"), || async {
        let current = env.home().secret(claim).await?;
        let id = current.data?.get("AWS_ACCESS_KEY_ID").map(|v| v.0.clone())?;
        (id != old.as_bytes()).then_some(())
    })
    .await
}

/// The claim while its previous key overlaps the new one, and when that ends.
async fn overlapping(env: &Env, claim: &str) -> (ObjectBucketClaim, Timestamp) {
    eventually(&format!("{claim}'s status to show the overlap"), || async {
        let claim = env.claims.get(claim).await.ok()?;
        let expires = claim.status.as_ref()?.credentials.as_ref()?.previous_expires_at.clone()?;
        Some((claim, expires.0))
    })
    .await
}

/// Waits until the previous key is retired (the status shows no previous key any more).
async fn retired(env: &Env, claim: &str) {
    eventually(&format!("{claim}'s previous key to be retired"), || async {
        let claim = env.claims.get(claim).await.ok()?;
        let credentials = claim.status?.credentials?;
        credentials.previous_expires_at.is_none().then_some(())
    })
    .await;
}

async fn reasons(env: &Env, claim: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(env.client.clone(), &env.ns);
    let selector = format!("involvedObject.name={claim}");
    let listed = events.list(&ListParams::default().fields(&selector)).await.unwrap();
    listed.items.into_iter().filter_map(|e| e.reason).collect()
}

/// The access key ids the store holds, from its files.
fn stored_keys(env: &Env) -> Vec<String> {
    let dir = env.root.path().join(".provisioner/keys");
    let entries = std::fs::read_dir(dir).map(|e| e.collect::<Vec<_>>()).unwrap_or_default();
    entries.into_iter().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
}

/// Asserts that every read up to `until` was served.
fn served_until(log: &Log, until: Timestamp, who: &str) -> usize {
    let log = log.lock().unwrap();
    let before: Vec<_> = log.iter().filter(|(at, _)| *at < until).collect();
    let failed: Vec<_> = before.iter().filter(|(_, answer)| answer.is_err()).collect();
    assert!(
        failed.is_empty(),
        "{who}: {} of {} reads failed: {failed:?}",
        failed.len(),
        before.len()
    );
    before.len()
}

#[tokio::test]
async fn rotation_on_demand_keeps_every_reader_served_through_the_overlap() {
    let env = Env::new("hp-rot").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[("rotationOverlap", "6s")], "Delete").await;
    env.claim("app", &class, None).await;
    let bound = env.wait("app", ClaimPhase::Bound, "Bound").await;
    assert_eq!(bound.status.unwrap().credentials, None, "nothing about keys before a rotation");
    let (old_client, bucket) = env.s3_for("app").await;
    put(&old_client, &bucket, "probe", b"data").await.unwrap();
    let old = key_id(&env, "app").await;
    let (old_reads, old_task) = consumer(old_client.clone(), bucket.clone());

    request_rotation(&env, "app", "2026-11-24T10:00:00Z").await;
    rotated_from(&env, "app", &old).await;
    let (claim, expires) = overlapping(&env, "app").await;
    let status = claim.status.unwrap().credentials.unwrap();
    assert!(status.created_at.is_some());
    assert_eq!(
        claim.metadata.annotations.unwrap()["objectbucket.io/rotate-credentials"],
        "2026-11-24T10:00:00Z"
    );
    // A pod restarted now gets the new key; it works at once.
    let (new_client, _) = env.s3_for("app").await;
    let (new_reads, new_task) = consumer(new_client.clone(), bucket.clone());
    assert_eq!(stored_keys(&env).len(), 2, "the previous key and the new one");

    retired(&env, "app").await;
    let retired_at = Timestamp::now();
    assert!(retired_at >= expires, "retired at {retired_at}, before {expires}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    old_task.abort();
    new_task.abort();
    let reads = served_until(&old_reads, expires, "the previous key");
    assert!(reads > 50, "the previous key was read with all through the overlap ({reads})");
    served_until(&new_reads, Timestamp::now(), "the new key");
    assert_eq!(get(&old_client, &bucket, "probe").await, Err("InvalidAccessKeyId".into()));
    assert_eq!(get(&new_client, &bucket, "probe").await.unwrap(), b"data");
    assert_eq!(stored_keys(&env).len(), 1);
    let reasons = reasons(&env, "app").await;
    for step in ["RotatingCredentials", "CredentialsRotated", "PreviousKeyRetired"] {
        assert!(reasons.iter().any(|r| r == step), "no {step} Event: {reasons:?}");
    }

    // The same value again asks nothing; the claim stays as it is.
    let current = key_id(&env, "app").await;
    let patch = json!({ "metadata": { "labels": { "touched": "yes" } } });
    env.claims.patch("app", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(key_id(&env, "app").await, current);
}

#[tokio::test]
async fn rotation_on_a_schedule_replaces_keys_every_period() {
    let env = Env::new("hp-rot-sched").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[("rotationPeriod", "8s"), ("rotationOverlap", "3s")], "Delete").await;
    env.claim("app", &class, None).await;
    let bound = env.wait("app", ClaimPhase::Bound, "Bound").await;
    let created = bound.status.unwrap().credentials.unwrap().created_at.unwrap();
    let (first_client, bucket) = env.s3_for("app").await;
    put(&first_client, &bucket, "probe", b"data").await.unwrap();
    let first = key_id(&env, "app").await;
    let (first_reads, first_task) = consumer(first_client.clone(), bucket.clone());

    rotated_from(&env, "app", &first).await;
    let (_, expires) = overlapping(&env, "app").await;
    let rotated_at = Timestamp::now();
    assert!(rotated_at.duration_since(created.0) >= jiff::SignedDuration::from_secs(8));
    let second = key_id(&env, "app").await;
    retired(&env, "app").await;
    first_task.abort();
    served_until(&first_reads, expires, "the first key");
    assert_eq!(get(&first_client, &bucket, "probe").await, Err("InvalidAccessKeyId".into()));

    // And again, a period after the second key was issued.
    rotated_from(&env, "app", &second).await;
    assert!(stored_keys(&env).len() <= 2);
}

/// The ObjectBucket's rotation record: the request last honoured, the step, and when the
/// previous key's overlap ends (if it is under way).
async fn rotation_record(
    buckets: &Api<ObjectBucket>,
    name: &str,
) -> (String, String, Option<Timestamp>) {
    let ob = buckets.get(name).await.unwrap();
    let record: BTreeMap<String, serde_json::Value> = ob
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("objectbucket.io/rotation"))
        .and_then(|r| serde_json::from_str(r).ok())
        .unwrap_or_default();
    let text = |key: &str| record.get(key).and_then(|v| v.as_str()).map(str::to_owned);
    let expires = text("previousExpiresAt").map(|t| t.parse().unwrap());
    (text("handled").unwrap_or_default(), text("step").unwrap_or("Idle".into()), expires)
}

/// Each crash point of a rotation, with what it leaves: the step recorded, how many keys the
/// store holds, and whether the Secret holds the new key yet.
const CRASHES: [(&str, &str, usize, bool); 6] = [
    ("rotation:issuing", "Issuing", 1, false),
    ("rotation:key-issued", "Issuing", 2, false),
    ("rotation:issued", "Issued", 2, false),
    ("rotation:secret-written", "Issued", 2, true),
    ("rotation:overlap", "Overlap", 2, true),
    ("rotation:key-retired", "Overlap", 1, true),
];

/// The binary aborted (as a SIGKILL would stop it) exactly after each step of a rotation, by its
/// crash points: the restarted process finishes the rotation, the Secret's key works as soon as
/// the endpoint answers, the previous key works until its overlap ends, and once it is retired
/// the claim holds one key.
#[tokio::test]
async fn a_rotation_survives_a_crash_at_every_step() {
    use std::os::unix::process::ExitStatusExt;
    let steps: Vec<&str> = CRASHES.iter().map(|(step, ..)| *step).collect();
    assert_eq!(steps, ROTATION_STEPS, "every crash point of a rotation is tried");
    let env = Env::new("hp-rot-crash").await;
    let mut provisioner = env.start("node-a");
    let class = env.class(&[("rotationOverlap", "4s")], "Delete").await;
    env.claim("app", &class, None).await;
    env.wait("app", ClaimPhase::Bound, "Bound").await;
    let (s3, bucket) = env.s3_for("app").await;
    put(&s3, &bucket, "probe", b"data").await.unwrap();
    let buckets: Api<ObjectBucket> = Api::all(env.client.clone());
    let ob_name = env.claims.get("app").await.unwrap().spec.object_bucket_name.expect("recorded");
    let record = || rotation_record(&buckets, &ob_name);

    for (round, (step, recorded, keys, new_in_secret)) in CRASHES.into_iter().enumerate() {
        provisioner.kill().await;
        let mut crashing = env.start_crashing_at("node-a", step);
        let (previous, _) = env.s3_for("app").await;
        let before = key_id(&env, "app").await;
        let request = format!("round-{round}");
        request_rotation(&env, "app", &request).await;
        let Some(status) = crashing.exited(Duration::from_secs(60)).await else {
            let claim = env.claims.get("app").await.unwrap();
            panic!("never reached {step}: record {:?}, {:?}", record().await, claim.status);
        };
        assert_eq!(status.signal(), Some(6), "aborted at {step}: {status}");
        let (_, at, recorded_expiry) = record().await;
        assert_eq!(at, recorded, "the step recorded at {step}");
        assert_eq!(stored_keys(&env).len(), keys, "keys stored at {step}");
        assert_eq!(key_id(&env, "app").await != before, new_in_secret, "the Secret at {step}");

        provisioner = env.start("node-a");
        let (current, _) = env.s3_for("app").await;
        let answer = eventually("the endpoint to answer again", || async {
            let answer = get(&current, &bucket, "probe").await;
            (answer != Err("unknown".into())).then_some(answer)
        })
        .await;
        assert_eq!(answer.unwrap(), b"data", "the Secret's key, after a crash at {step}");
        // Read with from here on, as a pod not yet restarted does.
        let (reads, task) = consumer(previous.clone(), bucket.clone());
        let expires = match recorded_expiry {
            Some(expires) => expires,
            None => eventually("the overlap to begin", || async { record().await.2 }).await,
        };
        eventually(&format!("round {round} to end"), || async {
            let (handled, at, _) = record().await;
            (handled == request && at == "Idle").then_some(())
        })
        .await;
        task.abort();
        if step != "rotation:key-retired" {
            served_until(&reads, expires, &format!("the previous key, after a crash at {step}"));
        }
        rotated_from(&env, "app", &before).await;
        let (current, _) = env.s3_for("app").await;
        assert_eq!(get(&current, &bucket, "probe").await.unwrap(), b"data", "after {step}");
        assert_eq!(stored_keys(&env).len(), 1, "after a crash at {step}, once retired");
        assert_eq!(get(&previous, &bucket, "probe").await, Err("InvalidAccessKeyId".into()));
    }
    drop(provisioner);
}

/// Makes StorageClass `name` again with `pairs` as its parameters (they cannot be edited).
async fn replace_class(env: &Env, name: &str, pairs: &[(&str, &str)]) {
    let classes: Api<StorageClass> = Api::all(env.client.clone());
    let mut class = classes.get(name).await.unwrap();
    classes.delete(name, &DeleteParams::default()).await.unwrap();
    eventually(&format!("class {name} to be gone"), || async {
        classes.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
    class.metadata = kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() };
    class.parameters = Some(test_support::parameters(pairs).collect());
    classes.create(&PostParams::default(), &class).await.unwrap();
}

/// An overlap too long to count from now is refused as the class's error, naming the limit:
/// never counted as no overlap, with the previous key retired at once.
#[tokio::test]
async fn an_overlap_too_long_to_count_is_refused_and_the_key_kept() {
    let env = Env::new("hp-rot-long").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[("rotationOverlap", "1h")], "Delete").await;
    env.claim("app", &class, None).await;
    env.wait("app", ClaimPhase::Bound, "Bound").await;
    let (s3, bucket) = env.s3_for("app").await;
    put(&s3, &bucket, "probe", b"data").await.unwrap();
    let before = key_id(&env, "app").await;

    replace_class(&env, &class, &[("rotationOverlap", "99999999h")]).await;
    request_rotation(&env, "app", "2026-11-27T10:00:00Z").await;
    let claim = eventually("the claim to fail or its key to change", || async {
        let claim = env.claims.get("app").await.ok()?;
        let failed = test_support::ready(&claim).is_some_and(|c| c.reason != "Bound");
        (failed || key_id(&env, "app").await != before).then_some(claim)
    })
    .await;
    let ready = test_support::ready(&claim).cloned();
    assert_eq!(key_id(&env, "app").await, before, "the key was replaced; ready: {ready:?}");
    let ready = ready.unwrap();
    assert_eq!(claim.status.unwrap().phase, Some(ClaimPhase::Failed));
    assert_eq!(ready.reason, "InvalidStorageClass");
    assert!(
        ready.message.contains("rotationOverlap") && ready.message.contains("876000h (100 years)"),
        "{}",
        ready.message
    );
    // Nothing was issued nor retired: the one key still works, a while later too.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(key_id(&env, "app").await, before);
    assert_eq!(stored_keys(&env).len(), 1, "only the key in the Secret");
    assert_eq!(get(&s3, &bucket, "probe").await.unwrap(), b"data");
    let reasons = reasons(&env, "app").await;
    assert!(reasons.iter().any(|r| r == "InvalidStorageClass"), "{reasons:?}");
    for step in ["RotatingCredentials", "CredentialsRotated", "PreviousKeyRetired"] {
        assert!(!reasons.iter().any(|r| r == step), "a {step} Event: {reasons:?}");
    }
}
