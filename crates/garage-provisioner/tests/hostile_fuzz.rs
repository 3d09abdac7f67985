//! Random hostile tenants against the Garage provisioner run as deployed (its ServiceAccount's
//! RBAC, a real three-node Garage): the actions of `test_support::hostile_tenant`, the same the
//! hostPath and S3 fuzzers take, by a tenant whose rights end at its own namespace, with forged
//! backend state naming the operator's admin-token Secret and the tenant's address. Whatever it
//! does, the admin token goes nowhere, the victim's key, data and claim stay, and the controller
//! lives on.
//!
//! `make test` runs a few fixed seeds; `HOSTILE_FUZZ_SEEDS=7,8,9` or `HOSTILE_FUZZ_RUNS=20`
//! explore more.

mod common;

use bucket_api::ClaimPhase;
use common::{Harness, TOKEN_SECRET, setup, spec, write_read_list};
use kube::ResourceExt;
use test_support::hostile_tenant::{Tenant, World, foreign_class, play, seeds};
use test_support::{Deployed, Tripwire};

#[tokio::test]
async fn random_hostile_tenants_reach_nothing_of_another_tenant_on_garage() {
    let s = setup("garage-fuzz").await;
    let controller = Harness::start(s.backend(), Deployed::Garage);
    let class = s.class(&controller.provisioner, &[], "Delete").await;
    let theirs = foreign_class(&s.client, "garage-fuzz-theirs").await;
    s.claim("victim", spec(&class, "", &[])).await;
    let victim = s.wait_for("victim", ClaimPhase::Bound, "Bound").await;
    let (victim_s3, bucket) = s.consumer("victim").await;
    write_read_list(&victim_s3, &bucket, "precious", b"the victim's data").await;
    let keys = s.claim_keys("victim").await;

    let world = World {
        provisioner: controller.provisioner.clone(),
        class,
        theirs,
        victim_bucket: bucket.clone(),
        victim_uid: victim.uid().unwrap(),
        tripwire: Tripwire::start().await,
        home_ns: s.ns.clone(),
        forged_secret: (s.ns.clone(), TOKEN_SECRET.into()),
    };
    for seed in seeds() {
        let tenant = Tenant::scoped(&s.client, &format!("garage-fuzz-{seed}")).await;
        play(&world, &tenant, seed).await;

        let context = format!("seed {seed}");
        let got = victim_s3.get_object().bucket(&bucket).key("precious").send().await;
        let body = got.unwrap_or_else(|e| panic!("{context}: the victim reads: {e:?}"));
        let body = body.body.collect().await.unwrap().into_bytes();
        assert_eq!(body.as_ref(), b"the victim's data", "{context}: the victim's object");
        write_read_list(&victim_s3, &bucket, "after", b"still mine").await;
        assert_eq!(s.claim_keys("victim").await, keys, "{context}: the victim's Secret");
        assert!(s.bucket_info(&bucket).await.is_some(), "{context}: the victim's bucket");
        s.wait_for("victim", ClaimPhase::Bound, "Bound").await;
        assert!(controller.reconciles() > 0, "{context}: the controller works on");
    }
}
