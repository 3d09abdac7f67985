//! The provisioner split in two processes, as `deploy/hostpath` runs it: the S3 endpoint owns the
//! root and serves tenants with no Kubernetes credential at all (no kubeconfig, an empty
//! environment), and the controller, which holds the deployed ServiceAccount's identity, makes
//! buckets and keys through the endpoint's socket. Each half may restart alone.

mod harness;

use std::collections::BTreeMap;

use bucket_api::{BucketUsage, ClaimPhase, ObjectBucket};
use harness::*;
use kube::api::Api;
use test_support::eventually;

const FLAGS: [&str; 2] = ["--leader-elect=false", "--usage-interval-seconds=1"];

/// The endpoint's environment, as the kernel holds it: nothing a Kubernetes client could use.
fn environment_of(pid: u32) -> BTreeMap<String, String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    environ
        .split(|b| *b == 0)
        .filter_map(|kv| {
            let (k, v) = std::str::from_utf8(kv).ok()?.split_once('=')?;
            Some((k.to_owned(), v.to_owned()))
        })
        .collect()
}

#[tokio::test]
async fn claims_are_served_by_an_endpoint_that_holds_no_credential() {
    let env = Env::new("hp-split").await;
    let mut provisioner = env.start_split("node-a", &FLAGS);
    let endpoint_pid = provisioner.endpoint().and_then(|e| e.id()).expect("the endpoint runs");
    let held = environment_of(endpoint_pid);
    assert!(
        held.keys().all(|k| k == "RUST_LOG"),
        "the endpoint's environment holds nothing else: {held:?}"
    );
    let args = std::fs::read_to_string(format!("/proc/{endpoint_pid}/cmdline")).unwrap();
    assert!(!args.contains("kubeconfig"), "{args:?}");

    // A claim: the controller made its bucket and key in the endpoint's store.
    let (s3, bucket) = env.bound("split", "Delete").await;
    put(&s3, &bucket, "hello.txt", b"through the endpoint").await.unwrap();
    assert!(env.bucket_dir(&bucket).join("hello.txt").is_file(), "in the endpoint's root");
    // Usage, read from the endpoint's meters, reaches the ObjectBucket.
    let buckets: Api<ObjectBucket> = Api::all(env.client.clone());
    let name = format!("obc-{}-split", env.ns);
    eventually("the usage on the ObjectBucket", || async {
        let usage = buckets.get(&name).await.ok()?.status?.usage?;
        (BucketUsage { max_objects: None, max_bytes: None, ..usage }
            == BucketUsage {
                objects: 1,
                bytes: 20,
                claim_objects: Some(1),
                claim_bytes: Some(20),
                max_objects: None,
                max_bytes: None,
            })
        .then_some(())
    })
    .await;

    // The endpoint restarts alone: keys and data were on disk, and the controller reaches the
    // new process at its next call.
    provisioner.restart_endpoint().await;
    eventually("the key to work on the restarted endpoint", || async {
        get(&s3, &bucket, "hello.txt").await.ok()
    })
    .await;
    let (second, second_bucket) = env.bound("after-restart", "Delete").await;
    put(&second, &second_bucket, "k", b"v").await.unwrap();
    assert_eq!(
        code(second.get_object().bucket(&bucket).key("hello.txt").send().await),
        "AccessDenied"
    );

    // The controller stops: tenants' S3 goes on, since it never passes through the controller.
    provisioner.stop_controller().await;
    assert_eq!(get(&s3, &bucket, "hello.txt").await.unwrap(), b"through the endpoint");
}

#[tokio::test]
async fn the_operator_credential_crosses_to_the_endpoint_and_survives_its_restart() {
    let env = Env::new("hp-split-admin").await;
    let admin_secret = env.admin_secret("s3-admin", ("OPERATOR02", "operator-secret-4567")).await;
    let mut provisioner = env.start_split("node-a", &["--leader-elect=false", &admin_secret]);
    let admin = s3_with(env.port, "OPERATOR02", "operator-secret-4567");
    eventually("the operator to create a bucket", || async {
        admin.create_bucket().bucket("split-share").send().await.ok()
    })
    .await;
    // The endpoint keeps the credential in memory only; the controller hands it over again.
    provisioner.restart_endpoint().await;
    eventually("the operator credential on the restarted endpoint", || async {
        admin.list_objects_v2().bucket("split-share").send().await.ok()
    })
    .await;
    let class = env.class(&[("bucketName", "split-share")], "Delete").await;
    env.claim("member", &class, None).await;
    env.wait("member", ClaimPhase::Bound, "Bound").await;
    let (member, bucket) = env.s3_for("member").await;
    put(&member, &bucket, "k", b"shared").await.unwrap();
    assert_eq!(get(&admin, &bucket, "k").await.unwrap(), b"shared");
}
