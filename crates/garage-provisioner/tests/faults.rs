//! Faults on both sides: a Garage node killed under load, and the provisioner's binary killed
//! (SIGKILL) through a burst of claims and their deletion.

mod common;

use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bucket_api::{ClaimPhase, ReclaimPolicy};
use bucket_provisioner::user_id_for_claim;
use common::{Harness, setup, spec, write_read_list};
use futures::FutureExt;
use garage_provisioner::api::BucketInfo;
use garage_provisioner::names::{SERVICE_KEY_NAME, claim_key_id, service_key_id};
use garage_provisioner::store::{Created, Store, creator};
use kube::ResourceExt;
use test_support::{
    ControlPlane, Deployed, Supervised, deployed_identity, eventually, unique_suffix,
};

/// Kills one of three Garage nodes while claims are provisioned and consumers write and read:
/// every claim binds, consumers keep working, no acknowledged write is lost, and the node,
/// restarted, rejoins and serves the data written while it was down.
#[tokio::test]
async fn a_garage_node_killed_under_load_loses_nothing_and_rejoins() {
    let mut s = setup("garage-node-down").await;
    let controller = Harness::start(s.backend(), Deployed::Garage);
    let class = s.class(&controller.provisioner, &[], "Delete").await;
    s.claim("before", spec(&class, "", &[])).await;
    s.wait_for("before", ClaimPhase::Bound, "Bound").await;
    let (s3, bucket) = s.consumer("before").await;

    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (s3, bucket, stop) = (s3.clone(), bucket.clone(), stop.clone());
        tokio::spawn(async move {
            let mut written = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("w/{i:05}");
                let body = format!("object {i}").into_bytes();
                // Every write must succeed: two of three nodes are a quorum.
                write_read_list(&s3, &bucket, &key, &body).await;
                written.push((key, body));
                i += 1;
            }
            written
        })
    };
    for i in 0..3 {
        s.claim(&format!("during-{i}"), spec(&class, "", &[])).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    s.garage.kill(2).await;
    // The survivors notice: the cluster is degraded (two of three nodes, still a quorum).
    eventually("the cluster to report a node down", || async {
        let (_, health) = s.garage.get(0, "/v2/GetClusterHealth").await.ok()?;
        health.contains("\"degraded\"").then_some(())
    })
    .await;
    for i in 3..6 {
        s.claim(&format!("during-{i}"), spec(&class, "", &[])).await;
    }
    for i in 0..6 {
        let name = format!("during-{i}");
        s.wait_for(&name, ClaimPhase::Bound, "Bound").await;
        let (s3, bucket) = s.consumer(&name).await;
        write_read_list(&s3, &bucket, "hello", b"while a node was down").await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let written = writer.await.expect("the consumer kept working with a node down");
    assert!(written.len() > 5, "the consumer wrote while the node was down: {}", written.len());

    s.garage.restart(2).await.expect("the node rejoins");
    // The restarted node serves what was written while it was down (read through its own API).
    let keys = s.claim_keys("before").await;
    let through_restarted = s.s3(2, &keys);
    for (key, body) in &written {
        let got = eventually(&format!("{key} through the restarted node"), || async {
            let got = through_restarted.get_object().bucket(&bucket).key(key).send().await.ok()?;
            Some(got.body.collect().await.ok()?.into_bytes())
        })
        .await;
        assert_eq!(got.as_ref(), body.as_slice(), "{key}");
    }
    let mut listed = 0;
    let mut token = None;
    loop {
        let page = s3
            .list_objects_v2()
            .bucket(&bucket)
            .set_continuation_token(token)
            .send()
            .await
            .unwrap();
        listed += page.contents().len();
        token = page.next_continuation_token().map(String::from);
        if token.is_none() {
            break;
        }
    }
    assert_eq!(listed, written.len(), "nothing lost, nothing extra");
}

/// The binary, as deployed, SIGKILLed at arbitrary moments through a burst of claims and
/// through their deletion: every claim ends with one bucket and one key (its Secret's), and
/// deletion leaves no bucket and no claim key behind.
#[tokio::test]
async fn a_burst_of_claims_survives_sigkills_of_the_provisioner() {
    const CLAIMS: usize = 10;
    let s = setup("garage-burst").await;
    let provisioner = format!("garage.test.objectbucket.io/burst-{}", unique_suffix());
    let identity = deployed_identity(ControlPlane::shared(), Deployed::Garage).await.unwrap();
    let kubeconfig = identity.kubeconfig.display().to_string();
    let dir = tempfile::Builder::new().prefix("garage-burst-").tempdir().unwrap().keep();
    let argv: Vec<String> = [
        env!("CARGO_BIN_EXE_garage-bucket-provisioner"),
        "--provisioner-name",
        &provisioner,
        "--kubeconfig",
        &kubeconfig,
        "--leader-elect=false",
        "--metrics-address=127.0.0.1:0",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let mut process = Supervised::start(&dir, &[("provisioner", argv)], &[("RUST_LOG", "info")])
        .expect("starting garage-bucket-provisioner");
    let class = s.class(&provisioner, &[], "Delete").await;
    let buckets: Vec<String> =
        (0..CLAIMS).map(|i| format!("burst-{i}-{}", unique_suffix())).collect();
    for (i, bucket) in buckets.iter().enumerate() {
        s.claim(&format!("c{i}"), spec(&class, bucket, &[])).await;
    }
    for pause in [300, 700, 500] {
        tokio::time::sleep(Duration::from_millis(pause)).await;
        process.stop("provisioner").unwrap();
        process.start_again("provisioner").unwrap();
    }
    let mut claim_keys = BTreeSet::new();
    for (i, bucket) in buckets.iter().enumerate() {
        let name = format!("c{i}");
        let bound =
            AssertUnwindSafe(s.wait_for(&name, ClaimPhase::Bound, "Bound")).catch_unwind().await;
        assert!(
            bound.is_ok(),
            "{name} unbound; the binary said:\n{}",
            process.log_tail("provisioner", 40)
        );
        let keys = s.claim_keys(&name).await;
        let user = user_id_for_claim(&s.claims.get(&name).await.unwrap().uid().unwrap());
        assert_eq!(keys.access_key_id, claim_key_id(&user), "{name}: the key derived from its UID");
        let info = s.bucket_info(bucket).await.expect("its bucket");
        let holders: BTreeSet<String> = info.keys.iter().map(|k| k.access_key_id.clone()).collect();
        assert_eq!(holders, BTreeSet::from([keys.access_key_id.clone(), service_key_id()]));
        write_read_list(&s.s3(0, &keys), bucket, "x", b"x").await;
        claim_keys.insert(keys.access_key_id);
    }
    let in_garage: BTreeSet<String> =
        s.all_buckets().await.into_iter().flat_map(|b| b.global_aliases).collect();
    assert_eq!(in_garage, buckets.iter().cloned().collect(), "one bucket per claim, no more");
    let keys: BTreeSet<String> = s.all_keys().await.into_iter().map(|k| k.id).collect();
    let mut expected = claim_keys.clone();
    expected.insert(service_key_id());
    assert_eq!(keys, expected, "one key per claim and the provisioner's own, no more");

    for i in 0..CLAIMS {
        s.claims.delete(&format!("c{i}"), &Default::default()).await.unwrap();
    }
    for pause in [200, 600] {
        tokio::time::sleep(Duration::from_millis(pause)).await;
        process.stop("provisioner").unwrap();
        process.start_again("provisioner").unwrap();
    }
    for i in 0..CLAIMS {
        s.wait_gone(&format!("c{i}")).await;
    }
    // What must not outlive a claim is a bucket anyone can name or that records a claim. Garage
    // drops a request whose client went away between its writes: a CreateBucket cut off after
    // storing the bucket and before its first alias leaves a bucket with neither, which no name
    // or record leads to. Those are reported, not failed on: a known leak of empty buckets.
    let service = service_key_id();
    let left = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let live = s.live_buckets().await;
            let (reachable, nameless): (Vec<_>, Vec<_>) = live
                .into_iter()
                .partition(|b| !b.global_aliases.is_empty() || creator(b, &service).is_some());
            let keys: Vec<String> = s.all_keys().await.into_iter().map(|k| k.id).collect();
            if reachable.is_empty() && keys == [service.clone()] {
                return nameless.len();
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;
    match left {
        Ok(0) => {}
        Ok(nameless) => eprintln!("{nameless} empty bucket(s) with no name or record left"),
        Err(_) => {
            let ids: Vec<String> = s.live_buckets().await.into_iter().map(|b| b.id).collect();
            let keys: Vec<String> = s.all_keys().await.into_iter().map(|k| k.id).collect();
            panic!("outlived their claims: buckets {ids:?}, keys {keys:?}");
        }
    }
}

/// A name found taken leaves the claim free to try another: the bucket made for it is deleted
/// again, and Garage keeps a deleted alias as a tombstone that a new `CreateBucket` with the
/// same record refuses; the next attempt still gets its bucket.
#[tokio::test]
async fn a_name_found_taken_leaves_the_claim_free_to_try_another() {
    let s = setup("garage-taken").await;
    let settings = s.settings(0);
    let store = Store { admin: s.admin(&settings.admin, &settings.token_secret) };
    let service = service_key_id();
    store.ensure_key(&service, SERVICE_KEY_NAME).await.unwrap();
    let taken = format!("taken-{}", unique_suffix());
    let body = serde_json::json!({ "globalAlias": taken });
    let _: BucketInfo = store.admin.post("CreateBucket", &[], Some(&body)).await.unwrap();
    let user = format!("obc-taken-{}", unique_suffix());
    let first = store.create_bucket(&taken, &user, ReclaimPolicy::Delete, &service).await;
    assert!(matches!(first, Ok(Created::Taken)), "{first:?}");
    let other = format!("other-{}", unique_suffix());
    let second = store.create_bucket(&other, &user, ReclaimPolicy::Delete, &service).await;
    let Ok(Created::Mine(info)) = second else { panic!("{second:?}") };
    assert_eq!(info.global_aliases, [other]);
    assert_eq!(creator(&info, &service), Some((user, ReclaimPolicy::Delete)));
    let holders: Vec<_> = s.all_buckets().await.into_iter().map(|b| b.global_aliases).collect();
    assert_eq!(holders.iter().filter(|a| a.is_empty()).count(), 0, "nothing nameless left");
}
