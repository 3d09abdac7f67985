//! Random hostile COSI tenants against the hostPath driver under the upstream v0.2.2 controller
//! and sidecar, the driver as `deploy/cosi/hostpath` runs it: a tenant whose rights end at its
//! own namespace claims the victim's Bucket, asks for accesses of every class on any of its
//! claims (IAM ones naming the victim's ServiceAccount), forges the Secrets its credentials will
//! go to and annotates its claims (`test_support::cosi_hostile`). Whatever it does, none of its
//! accesses is granted on the victim's bucket, the victim's data and key stay, and the driver
//! lives on. `make test` runs a few fixed seeds; `HOSTILE_FUZZ_SEEDS=7,8,9` or
//! `HOSTILE_FUZZ_RUNS=20` explore more.

#[path = "cosi/world.rs"]
mod world;

use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use test_support::cosi::CosiVersion;
use test_support::cosi_hostile::{CosiTarget, granted_to_victims_bucket, play};
use test_support::hostile_tenant::seeds;
use world::{World, s3_client};

/// Long enough for the controller, the sidecar and the driver to act on every object made.
const SETTLE: Duration = Duration::from_secs(8);

#[tokio::test]
async fn random_hostile_cosi_tenants_reach_nothing_of_another_tenant() {
    let version = CosiVersion::V1Alpha1;
    let world = World::start(version).await;
    let victim = world.tenant("cosi-victim").await;
    let victim_bucket = world.claim(&victim, "data", &world.delete_class).await;
    let own = world.access(&victim, "own", "data", "ReadWrite").await;
    let s3 = s3_client(&own);
    let body = ByteStream::from_static(b"the victim's data");
    s3.put_object().bucket(&own.bucket).key("precious").body(body).send().await.unwrap();
    world.service_account(&victim.namespace, "app").await;
    let iam_class = world.iam_access_class().await;

    let target = CosiTarget {
        delete_class: world.delete_class.clone(),
        retain_class: world.retain_class.clone(),
        access_class: world.access_class.clone(),
        read_only_class: world.read_only_class.clone(),
        iam_class,
        victim_bucket: victim_bucket.clone(),
        victim_namespace: victim.namespace.clone(),
        victim_account: "app".into(),
    };
    for seed in seeds() {
        let tenant = world.tenant(&format!("cosi-fuzz-{seed}")).await;
        play(&target, &tenant, seed, SETTLE).await;

        let context = format!("seed {seed}");
        let granted = granted_to_victims_bucket(&target, &tenant).await;
        assert!(
            granted.is_empty(),
            "{context}: granted on the victim's bucket: {granted:?}\n{}",
            world.logs()
        );
        let on_disk = std::fs::read(world.bucket_dir(&own.bucket).join("precious"));
        assert_eq!(on_disk.ok().as_deref(), Some(&b"the victim's data"[..]), "{context}: on disk");
        let read = s3.get_object().bucket(&own.bucket).key("precious").send().await;
        let read = read.unwrap_or_else(|e| panic!("{context}: the victim's key reads: {e:?}"));
        assert_eq!(read.body.collect().await.unwrap().into_bytes().as_ref(), b"the victim's data");
        let after = ByteStream::from_static(b"still mine");
        s3.put_object()
            .bucket(&own.bucket)
            .key("after")
            .body(after)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{context}: the victim's key still writes: {e:?}"));
        assert!(world.bucket_object(&victim_bucket).await.is_some(), "{context}: the Bucket stays");
        assert!(!world.driver_log().contains("panicked"), "{context}: {}", world.driver_log());
    }
    world.assert_never_forbidden();
}
