//! Random hostile tenants against the S3 provisioner run as deployed (its ServiceAccount's RBAC,
//! an owner allowed only what the book lists, moto with IAM enforced): the actions of
//! `test_support::hostile_tenant`, the same the hostPath fuzzer takes, by a tenant whose rights
//! end at its own namespace. Whatever it does, the victim's IAM user keeps its one key, the
//! victim's data and claim stay, nothing connects to the tenant's address (where a forged
//! `cleanup-state` would send the owner's signed requests), and the controller lives on.
//!
//! `make test` runs a few fixed seeds; `HOSTILE_FUZZ_SEEDS=7,8,9` or `HOSTILE_FUZZ_RUNS=20`
//! explore more.

mod common;

use bucket_api::{ClaimPhase, ObjectBucketClaimSpec};
use common::cluster::setup;
use common::error_code;
use kube::ResourceExt;
use s3_provisioner::iam;
use test_support::hostile_tenant::{Tenant, World, foreign_class, play, seeds};
use test_support::{Deployed, Harness, Tripwire};

#[tokio::test]
async fn random_hostile_tenants_reach_nothing_of_another_tenant_on_s3() {
    let s = setup("s3-fuzz").await;
    let controller = Harness::start(s.backend(), Deployed::S3);
    let owner = s.moto.least_privileged_owner("fuzz-owner").await;
    s.owner_keys("owner", &owner).await;
    let class = s.class(&controller.provisioner, "owner", &[], Some("Delete")).await;
    let theirs = foreign_class(&s.client, "s3-fuzz-theirs").await;
    let spec = ObjectBucketClaimSpec {
        storage_class_name: class.clone(),
        generate_bucket_name: Some("victim".into()),
        ..Default::default()
    };
    s.claim("victim", spec).await;
    let victim = s.wait_for("victim", ClaimPhase::Bound, "Bound").await;
    let bucket = victim.spec.bucket_name.clone().unwrap();
    let keys = s.claim_keys("victim").await;
    let victim_s3 = s.moto.s3(&keys);
    let put = victim_s3.put_object().bucket(&bucket).key("precious");
    put.body(b"the victim's data".to_vec().into()).send().await.unwrap();
    let user = iam::user_name(&bucket_provisioner::user_id_for_claim(&victim.uid().unwrap()));

    let world = World {
        provisioner: controller.provisioner.clone(),
        class,
        theirs,
        victim_bucket: bucket.clone(),
        victim_uid: victim.uid().unwrap(),
        tripwire: Tripwire::start().await,
        home_ns: s.ns.clone(),
        forged_secret: (s.ns.clone(), "owner".into()),
    };
    for seed in seeds() {
        let tenant = Tenant::scoped(&s.client, &format!("s3-fuzz-{seed}")).await;
        play(&world, &tenant, seed).await;

        let context = format!("seed {seed}");
        assert!(s.moto.user_exists(&user).await, "{context}: the victim's IAM user is there");
        assert_eq!(
            s.moto.access_keys(&user).await,
            [keys.access_key_id.as_str()],
            "{context}: the victim's user holds its one key"
        );
        let got = victim_s3.get_object().bucket(&bucket).key("precious").send().await;
        let body = got.unwrap_or_else(|e| panic!("{context}: the victim reads: {e:?}"));
        let body = body.body.collect().await.unwrap().into_bytes();
        assert_eq!(body.as_ref(), b"the victim's data", "{context}: the victim's object");
        let after = victim_s3.put_object().bucket(&bucket).key("after");
        after.body(b"still mine".to_vec().into()).send().await.unwrap_or_else(|e| {
            panic!("{context}: the victim's key still writes: {}", error_code(Err::<(), _>(e)))
        });
        assert_eq!(s.claim_keys("victim").await, keys, "{context}: the victim's Secret");
        s.wait_for("victim", ClaimPhase::Bound, "Bound").await;
        assert!(controller.reconciles() > 0, "{context}: the controller works on");
    }
}
