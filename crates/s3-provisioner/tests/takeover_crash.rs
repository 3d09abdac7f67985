//! The takeover from the Go aws-s3-provisioner stopped dead after each of its steps: the
//! `s3-bucket-provisioner` binary, run as `deploy/s3/` deploys it, aborts at the test-only crash
//! point `BUCKET_PROVISIONER_CRASH_AT=<step>`, and the next run resumes there. The claim stays
//! Bound with its key throughout and ends with one ObjectBucket, told it was adopted. (A test
//! binary of its own: the old provisioner's name is fixed, so it needs a control plane of its
//! own.)

mod common;

use std::time::Duration;

use bucket_api::ObjectBucketClaimSpec;
use bucket_api::contract::{LABEL_PROVISIONER, legacy};
use bucket_api::{ClaimPhase, ObjectBucketClaim};
use common::cluster::{Setup, setup};
use common::moto::ALLOW_ALL;
use common::old_provisioner::{self, OldProvisioner};
use common::suffix;
use kube::ResourceExt;
use kube::api::ListParams;
use test_support::{ControlPlane, Deployed, Supervised, TlsProxy, deployed_identity};

const REGION: &str = "us-west-1";

/// The binary under the old provisioner's name, stopping at `crash_at` if given.
async fn start_binary(crash_at: Option<&str>) -> Supervised {
    let identity = deployed_identity(ControlPlane::shared(), Deployed::S3).await.unwrap();
    let kubeconfig = identity.kubeconfig.display().to_string();
    let dir = tempfile::Builder::new().prefix("s3-takeover-crash-").tempdir().unwrap().keep();
    let argv = [
        env!("CARGO_BIN_EXE_s3-bucket-provisioner"),
        "--provisioner-name",
        old_provisioner::NAME,
        "--kubeconfig",
        &kubeconfig,
        "--leader-elect=false",
        "--metrics-address=127.0.0.1:0",
    ];
    let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
    let mut env = vec![("RUST_LOG", "info")];
    if let Some(step) = crash_at {
        env.push(("BUCKET_PROVISIONER_CRASH_AT", step));
    }
    Supervised::start(&dir, &[("provisioner", argv)], &env).expect("starting the binary")
}

async fn phase(s: &Setup, name: &str) -> Option<ClaimPhase> {
    s.claims.get(name).await.ok()?.status?.phase
}

#[tokio::test]
async fn a_takeover_stopped_dead_after_any_step_is_resumed() {
    let s = setup("s3-takeover-crash").await;
    let broad = s.moto.user_with_policy(&format!("old-owner-{}", suffix()), ALLOW_ALL).await;
    s.owner_keys("owner", &broad).await;
    let class =
        s.class(old_provisioner::NAME, "owner", &[("region", REGION)], Some("Delete")).await;
    let proxy = TlsProxy::start(s.moto.port()).expect("starting the TLS proxy");
    let mut old = OldProvisioner::start(&proxy);
    let bucket = format!("crash-{}", suffix());
    s.claim(
        "c",
        ObjectBucketClaimSpec {
            storage_class_name: class,
            bucket_name: Some(bucket.clone()),
            ..Default::default()
        },
    )
    .await;
    let bound = tokio::time::timeout(Duration::from_secs(120), async {
        while phase(&s, "c").await != Some(ClaimPhase::Bound)
            || s.secrets.get_opt("c").await.unwrap().is_none()
        {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    assert!(bound.await.is_ok(), "bound by the old provisioner:\n{}", old.log_tail());
    let claim: ObjectBucketClaim = s.claims.get("c").await.unwrap();
    let keys = s.claim_keys("c").await;
    old.stop();

    for step in ["adoption-released", "adoption-converted", "adoption-told"] {
        let mut binary = start_binary(Some(step)).await;
        let stopped = tokio::time::timeout(Duration::from_secs(120), async {
            while !binary.log_tail("provisioner", 200).contains("stopping dead at a crash point") {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        assert!(stopped.await.is_ok(), "{step}:\n{}", binary.log_tail("provisioner", 60));
        binary.stop("provisioner").unwrap();
        assert_eq!(phase(&s, "c").await, Some(ClaimPhase::Bound), "still Bound after {step}");
        assert_eq!(s.claim_keys("c").await, keys, "the same key after {step}");
    }
    let ob = s.buckets.get(&legacy::object_bucket_name(&s.ns, "c")).await.unwrap();
    assert!(ob.labels().contains_key(LABEL_PROVISIONER), "converted before the last crash");

    let binary = start_binary(None).await;
    s.wait_for("c", ClaimPhase::Bound, "Bound").await;
    s.wait_event("c", "Adopted").await;
    assert_eq!(s.claim_keys("c").await, keys);
    let all = s.buckets.list(&ListParams::default()).await.unwrap();
    let bound: Vec<String> = all
        .iter()
        .filter(|b| b.spec.claim_ref.as_ref().and_then(|c| c.uid.clone()) == claim.uid())
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(bound, [legacy::object_bucket_name(&s.ns, "c")], "one ObjectBucket");
    let secret = s.secrets.get("c").await.unwrap();
    assert!(secret.finalizers().is_empty(), "{:?}", secret.finalizers());
    let listed = s.moto.s3_in(&keys, REGION).list_objects_v2().bucket(&bucket).send().await;
    listed.expect("the key works");

    s.delete_and_wait("c").await;
    assert!(!s.moto.bucket_exists(&bucket).await, "the claim's bucket goes under Delete");
    drop(binary);
    drop(proxy);
}
