//! Random hostile tenants against the real `hostpath-bucket-provisioner`, run as deployed: a
//! tenant whose rights end at its own namespace creates, annotates and deletes claims carrying
//! every record a claim can hold (annotations, labels, finalizers, `additionalConfig`, class and
//! bucket names), valued with what would hurt: the provisioner's name, a victim's bucket, claim
//! and UID, and an address of the tenant's (a [`Tripwire`]). Whatever it does, the victim's data,
//! key and claim stay as they were, nothing connects to the tenant's address, and the process
//! lives on.
//!
//! The tenant's actions are `test_support::hostile_tenant`'s, shared with the S3 backend's
//! fuzzer. `make test` runs a few fixed seeds; `HOSTILE_FUZZ_SEEDS=7,8,9` or
//! `HOSTILE_FUZZ_RUNS=20` explore more, and a failure prints its seed and actions to replay.

mod harness;

use bucket_api::{ClaimPhase, ObjectBucketClaimSpec};
use harness::*;
use kube::ResourceExt;
use test_support::Tripwire;
use test_support::hostile_tenant::{self, World, foreign_class, play, seeds};

#[tokio::test]
async fn random_hostile_tenants_reach_nothing_of_another_tenant() {
    let env = Env::new("fuzz").await;
    let mut provisioner = env.start("node-a");
    let class = env.class(&[], "Delete").await;
    let theirs = foreign_class(&env.client, "fuzz-theirs").await;
    let home = env.home();
    home.create(
        "victim",
        ObjectBucketClaimSpec {
            storage_class_name: class.clone(),
            generate_bucket_name: Some("victim".into()),
            ..Default::default()
        },
    )
    .await;
    let victim = home.wait("victim", ClaimPhase::Bound, "Bound").await;
    let (victim_s3, victim_bucket) = home.s3_for("victim").await;
    put(&victim_s3, &victim_bucket, "precious", b"the victim's data").await.unwrap();
    let victim_env = home.env_of("victim").await;

    let world = World {
        provisioner: env.name.clone(),
        class,
        theirs,
        victim_bucket: victim_bucket.clone(),
        victim_uid: victim.uid().unwrap(),
        tripwire: Tripwire::start().await,
        home_ns: env.ns.clone(),
        forged_secret: (env.ns.clone(), "victim".into()),
    };
    for seed in seeds() {
        let scoped = env.scoped_tenant(&format!("fuzz-{seed}")).await;
        let tenant = hostile_tenant::Tenant {
            client: scoped.client.clone(),
            ns: scoped.ns.clone(),
            claims: scoped.claims.clone(),
        };
        play(&world, &tenant, seed).await;

        let context = format!("seed {seed}");
        assert!(provisioner.is_running(), "{context}: the provisioner lives on");
        assert_eq!(
            std::fs::read(env.bucket_dir(&victim_bucket).join("precious")).unwrap(),
            b"the victim's data",
            "{context}: the victim's object is on disk"
        );
        assert_eq!(
            get(&victim_s3, &victim_bucket, "precious").await.as_deref(),
            Ok(&b"the victim's data"[..]),
            "{context}: the victim's key reads it"
        );
        put(&victim_s3, &victim_bucket, "after", b"still mine").await.unwrap_or_else(|e| {
            panic!("{context}: the victim's key still writes: {e}");
        });
        assert_eq!(
            home.env_of("victim").await,
            victim_env,
            "{context}: the victim's Secret and ConfigMap"
        );
        home.wait("victim", ClaimPhase::Bound, "Bound").await;
    }
}
