//! The provisioner split in two processes, as `deploy/hostpath` runs it: the S3 endpoint owns the
//! root and serves tenants with no Kubernetes credential at all (no kubeconfig, an empty
//! environment), and the controller, which holds the deployed ServiceAccount's identity, makes
//! buckets and keys through the endpoint's socket. Each half may restart alone.

mod harness;

use std::collections::BTreeMap;
use std::time::Duration;

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

/// A flag the other half would act on is refused at start, naming it, rather than silently
/// ignored: the controller serves no S3 and opens no root; the endpoint tells consumers nothing.
#[tokio::test]
async fn a_flag_of_the_other_half_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let socket = |name: &str| format!("={}", dir.path().join(name).display());
    let review = format!("--review-socket{}", socket("review.sock"));
    let controller = format!("--store-socket{}", socket("store.sock"));
    let endpoint = format!("--serve-store{}", socket("store.sock"));
    for (half, flag) in [
        (&controller, "--s3-listen=127.0.0.1:0"),
        (&controller, "--root=/tmp/elsewhere"),
        (&controller, "--lifecycle-interval-seconds=60"),
        (&controller, "--lifecycle-budget=1000"),
        (&endpoint, "--endpoint-host=s3.example"),
        (&endpoint, "--endpoint-port=9000"),
        (&endpoint, "--region=eu-west-1"),
        (&endpoint, "--web-identity-audience=elsewhere"),
    ] {
        let mut command =
            tokio::process::Command::new(env!("CARGO_BIN_EXE_hostpath-bucket-provisioner"));
        command
            .args([half.as_str(), &review, flag, "--kubeconfig=/nonexistent"])
            .env_clear()
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        // A process that took the flag runs on (waiting for the other half): accepted.
        let run = tokio::time::timeout(Duration::from_secs(20), command.output()).await;
        let output = run.unwrap_or_else(|_| panic!("{half} {flag} was accepted")).unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        let name = flag.split('=').next().unwrap();
        assert_eq!(output.status.code(), Some(2), "{half} {flag} was accepted: {stderr}");
        assert!(stderr.contains(name) && stderr.contains("cannot be used with"), "{stderr}");
    }
}
