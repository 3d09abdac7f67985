//! A hostile tenant against the real `hostpath-bucket-provisioner`: with nothing but the right to
//! write claims, Secrets and annotations in its own namespace, it must not reach, take over,
//! block or delete another tenant's bucket or data. Each test is one way that was tried.

mod harness;

use std::collections::BTreeMap;

use bucket_api::contract::FINALIZER;
use bucket_api::{
    BucketEndpoint, ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec,
    ObjectBucketPhase, ObjectBucketSpec, ReclaimPolicy,
};
use harness::*;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, ObjectReference, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;
use test_support::eventually;

fn spec(class: &str) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec { storage_class_name: class.into(), ..Default::default() }
}

fn named(class: &str, bucket: &str) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec { bucket_name: Some(bucket.into()), ..spec(class) }
}

fn generated(class: &str, prefix: &str) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec { generate_bucket_name: Some(prefix.into()), ..spec(class) }
}

/// A victim with a bound bucket holding one object; returns its S3 client and bucket.
async fn victim(env: &Env, tenant: &Tenant, class: &str) -> (aws_sdk_s3::Client, String) {
    tenant.create("victim", generated(class, "victim")).await;
    tenant.wait("victim", ClaimPhase::Bound, "Bound").await;
    let (s3, bucket) = tenant.s3_for("victim").await;
    put(&s3, &bucket, "precious.txt", b"the victim's data").await.unwrap();
    assert!(env.bucket_dir(&bucket).is_dir());
    (s3, bucket)
}

async fn victim_is_intact(env: &Env, s3: &aws_sdk_s3::Client, bucket: &str) {
    assert_eq!(
        std::fs::read(env.bucket_dir(bucket).join("precious.txt")).unwrap(),
        b"the victim's data",
        "the victim's object is still on disk"
    );
    assert_eq!(get(s3, bucket, "precious.txt").await.unwrap(), b"the victim's data");
}

#[tokio::test]
async fn a_claim_naming_another_claims_bucket_is_refused_and_its_deletion_keeps_the_data() {
    let env = Env::new("iso-name").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[], "Delete").await;
    let (victim_s3, bucket) = victim(&env, &env.home(), &class).await;

    let thief = env.tenant("iso-thief").await;
    thief.create("thief", named(&class, &bucket)).await;
    let failed = thief.wait("thief", ClaimPhase::Failed, "BucketNameTaken").await;
    let message = &failed.status.unwrap().conditions[0].message;
    assert!(message.contains("not available"), "{message}");
    assert!(!message.contains(&env.ns), "the message names nobody: {message}");
    assert!(thief.secret("thief").await.is_none(), "the thief got no key");

    thief.delete("thief").await;
    victim_is_intact(&env, &victim_s3, &bucket).await;
    env.home().wait("victim", ClaimPhase::Bound, "Bound").await;
}

#[tokio::test]
async fn two_claims_racing_for_one_new_name_bind_only_once() {
    let env = Env::new("iso-race").await;
    let class = env.class(&[], "Delete").await;
    let (a, b) = (env.home(), env.tenant("iso-race-b").await);
    // Both exist before the provisioner looks at either.
    a.create("first", named(&class, &format!("race-{}", env.port))).await;
    b.create("second", named(&class, &format!("race-{}", env.port))).await;
    let _provisioner = env.start("node-a");

    let outcome = eventually("both claims to be decided", || async {
        let phase = |claim: Option<ObjectBucketClaim>| claim?.status?.phase;
        let first = phase(a.claims.get_opt("first").await.ok()?)?;
        let second = phase(b.claims.get_opt("second").await.ok()?)?;
        (first != ClaimPhase::Pending && second != ClaimPhase::Pending).then_some((first, second))
    })
    .await;
    let bound = [outcome.0, outcome.1].iter().filter(|p| **p == ClaimPhase::Bound).count();
    assert_eq!(bound, 1, "exactly one claim binds the name: {outcome:?}");
    let loser = if outcome.0 == ClaimPhase::Bound { (&b, "second") } else { (&a, "first") };
    loser.0.wait(loser.1, ClaimPhase::Failed, "BucketNameTaken").await;
}

#[tokio::test]
async fn a_retained_bucket_cannot_be_claimed_again_by_name() {
    let env = Env::new("iso-retain").await;
    let _provisioner = env.start("node-a");
    let retain = env.class(&[], "Retain").await;
    let (s3, bucket) = victim(&env, &env.home(), &retain).await;
    env.home().delete("victim").await;
    let ob_name = format!("obc-{}-victim", env.ns);
    let ob: ObjectBucket = Api::all(env.client.clone()).get(&ob_name).await.unwrap();
    assert_eq!(ob.status.and_then(|s| s.phase), Some(ObjectBucketPhase::Released));

    let delete = env.class(&[], "Delete").await;
    let thief = env.tenant("iso-retain-thief").await;
    thief.create("thief", named(&delete, &bucket)).await;
    thief.wait("thief", ClaimPhase::Failed, "BucketNameTaken").await;
    thief.delete("thief").await;
    assert_eq!(
        std::fs::read(env.bucket_dir(&bucket).join("precious.txt")).unwrap(),
        b"the victim's data"
    );
    // The retained data is reachable again only through an operator's StorageClass.
    assert_eq!(get(&s3, &bucket, "precious.txt").await, Err("InvalidAccessKeyId".into()));
    let shared = env.class(&[("bucketName", &bucket)], "Delete").await;
    let heir = env.tenant("iso-retain-heir").await;
    heir.create("heir", spec(&shared)).await;
    heir.wait("heir", ClaimPhase::Bound, "Bound").await;
    let (heir_s3, _) = heir.s3_for("heir").await;
    assert_eq!(get(&heir_s3, &bucket, "precious.txt").await.unwrap(), b"the victim's data");
}

#[tokio::test]
async fn forged_intent_annotations_delete_nothing() {
    let env = Env::new("iso-forge").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[], "Delete").await;
    let (victim_s3, bucket) = victim(&env, &env.home(), &class).await;

    let forger = env.tenant("iso-forger").await;
    let secret = Secret {
        metadata: ObjectMeta { name: Some("forger".into()), ..Default::default() },
        data: Some(BTreeMap::from([("x".into(), ByteString(b"y".to_vec()))])),
        ..Default::default()
    };
    Api::<Secret>::namespaced(env.client.clone(), &forger.ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let mut claim = ObjectBucketClaim::new("forger", named(&class, &bucket));
    claim.metadata.annotations = Some(BTreeMap::from([
        ("objectbucket.io/provisioner".into(), env.name.clone()),
        ("objectbucket.io/bucket-source".into(), "new".into()),
        ("objectbucket.io/reclaim-policy".into(), "Delete".into()),
    ]));
    forger.create_claim(claim).await;
    // The bucket is another claim's, so nothing is made and no key issued.
    forger.wait("forger", ClaimPhase::Failed, "BucketNameTaken").await;
    forger.delete("forger").await;
    victim_is_intact(&env, &victim_s3, &bucket).await;
    let forged_secret = Api::<Secret>::namespaced(env.client.clone(), &forger.ns);
    assert_eq!(forged_secret.get("forger").await.unwrap().data.unwrap().len(), 1, "untouched");
}

#[tokio::test]
async fn a_hand_made_object_bucket_cannot_make_a_claims_deletion_delete_another_bucket() {
    let env = Env::new("iso-handmade").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[], "Delete").await;
    let (victim_s3, bucket) = victim(&env, &env.home(), &class).await;

    // A claim that failed before any bucket was made for it.
    let other = env.tenant("iso-handmade-b").await;
    other.create("failed", named(&class, "Not_A_Name")).await;
    let failed = other.wait("failed", ClaimPhase::Failed, "InvalidBucketName").await;
    // An ObjectBucket made by hand, bound to that claim and naming the victim's bucket, looking
    // in every way like one of the provisioner's own.
    let label = env.name.replace('/', "_");
    let forged = ObjectBucket {
        metadata: ObjectMeta {
            name: Some(format!("obc-{}-failed", other.ns)),
            labels: Some(BTreeMap::from([("objectbucket.io/provisioner".into(), label)])),
            annotations: Some(BTreeMap::from([
                ("objectbucket.io/bucket-source".into(), "new".into()),
                ("objectbucket.io/provisioner".into(), env.name.clone()),
            ])),
            finalizers: Some(vec![FINALIZER.into()]),
            ..Default::default()
        },
        spec: ObjectBucketSpec {
            storage_class_name: class.clone(),
            reclaim_policy: Some(ReclaimPolicy::Delete),
            claim_ref: Some(ObjectReference {
                namespace: Some(other.ns.clone()),
                name: Some("failed".into()),
                uid: failed.metadata.uid.clone(),
                ..Default::default()
            }),
            endpoint: Some(BucketEndpoint { bucket_name: bucket.clone(), ..Default::default() }),
            additional_state: Some(BTreeMap::from([("identity".into(), "node-a".into())])),
        },
        status: None,
    };
    let obs: Api<ObjectBucket> = Api::all(env.client.clone());
    obs.create(&PostParams::default(), &forged).await.unwrap();

    other.delete("failed").await;
    // The claim is gone; its ObjectBucket is cleaned up after it as the backend's records allow:
    // the bucket is not the claim's, so it is kept, and the ObjectBucket says so.
    let name = format!("obc-{}-failed", other.ns);
    let left = eventually("the hand-made ObjectBucket to be released", || async {
        let ob = obs.get_opt(&name).await.ok()??;
        let status = ob.status?;
        (status.phase == Some(ObjectBucketPhase::Failed)).then_some(status)
    })
    .await;
    assert_eq!(left.conditions[0].reason, "BucketKept");
    victim_is_intact(&env, &victim_s3, &bucket).await;
}

#[tokio::test]
async fn an_edited_or_emptied_secret_is_restored_with_working_credentials() {
    let env = Env::new("iso-secret").await;
    let _provisioner = env.start("node-a");
    let (s3, bucket) = env.bound("keyed", "Delete").await;
    put(&s3, &bucket, "a", b"1").await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &env.ns);
    let original = secrets.get("keyed").await.unwrap().data.unwrap();

    let edit = json!({ "stringData": { "AWS_SECRET_ACCESS_KEY": "guessed" } });
    secrets.patch("keyed", &PatchParams::default(), &Patch::Merge(&edit)).await.unwrap();
    eventually("the edited secret key to be restored", || async {
        (secrets.get("keyed").await.ok()?.data? == original).then_some(())
    })
    .await;

    let remove = json!({ "data": { "AWS_SECRET_ACCESS_KEY": null } });
    secrets.patch("keyed", &PatchParams::default(), &Patch::Merge(&remove)).await.unwrap();
    eventually("the removed secret key to be restored", || async {
        (secrets.get("keyed").await.ok()?.data? == original).then_some(())
    })
    .await;
    let (restored, _) = env.s3_for("keyed").await;
    assert_eq!(get(&restored, &bucket, "a").await.unwrap(), b"1");
}

#[tokio::test]
async fn abandoning_a_bucket_keeps_its_data_but_revokes_the_claims_key() {
    let env = Env::new("iso-abandon").await;
    let _provisioner = env.start("node-a");
    let (s3, bucket) = env.bound("leaver", "Delete").await;
    put(&s3, &bucket, "kept", b"left behind").await.unwrap();
    let abandon =
        json!({ "metadata": { "annotations": { "objectbucket.io/abandon-bucket": "true" } } });
    env.claims.patch("leaver", &PatchParams::default(), &Patch::Merge(&abandon)).await.unwrap();

    env.delete("leaver").await;
    assert_eq!(std::fs::read(env.bucket_dir(&bucket).join("kept")).unwrap(), b"left behind");
    assert_eq!(get(&s3, &bucket, "kept").await, Err("InvalidAccessKeyId".into()));
}

#[tokio::test]
async fn a_claim_gone_without_its_finalizer_is_cleaned_up_after() {
    let env = Env::new("iso-finalizer").await;
    let _provisioner = env.start("node-a");
    let (s3, bucket) = env.bound("dropped", "Delete").await;
    put(&s3, &bucket, "x", b"y").await.unwrap();

    let drop_finalizer = json!({ "metadata": { "finalizers": null } });
    env.claims
        .patch("dropped", &PatchParams::default(), &Patch::Merge(&drop_finalizer))
        .await
        .unwrap();
    env.claims.delete("dropped", &DeleteParams::default()).await.unwrap();
    let obs: Api<ObjectBucket> = Api::all(env.client.clone());
    let ob_name = format!("obc-{}-dropped", env.ns);
    eventually("the ObjectBucket of the vanished claim to go", || async {
        obs.get_opt(&ob_name).await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(!env.bucket_dir(&bucket).exists(), "the bucket went as its Delete policy says");
    assert_eq!(get(&s3, &bucket, "x").await, Err("InvalidAccessKeyId".into()));
}

#[tokio::test]
async fn an_object_bucket_deleted_by_hand_is_written_again() {
    let env = Env::new("iso-ob").await;
    let _provisioner = env.start("node-a");
    let (s3, bucket) = env.bound("kept", "Delete").await;
    let obs: Api<ObjectBucket> = Api::all(env.client.clone());
    let ob_name = format!("obc-{}-kept", env.ns);
    let first_uid = obs.get(&ob_name).await.unwrap().uid();

    // Deleted (it waits on our finalizer), then deleted with the finalizer removed by hand.
    obs.delete(&ob_name, &DeleteParams::default()).await.unwrap();
    let second_uid = eventually("the ObjectBucket to be written again", || async {
        let ob = obs.get_opt(&ob_name).await.ok()??;
        (ob.uid() != first_uid && ob.metadata.deletion_timestamp.is_none()).then(|| ob.uid())
    })
    .await;
    let drop_finalizer = json!({ "metadata": { "finalizers": null } });
    obs.patch(&ob_name, &PatchParams::default(), &Patch::Merge(&drop_finalizer)).await.unwrap();
    obs.delete(&ob_name, &DeleteParams::default()).await.ok();
    let third = eventually("the ObjectBucket to be written again once more", || async {
        let ob = obs.get_opt(&ob_name).await.ok()??;
        (ob.uid() != second_uid && ob.status.as_ref()?.phase == Some(ObjectBucketPhase::Bound))
            .then_some(ob)
    })
    .await;
    assert_eq!(third.spec.endpoint.unwrap().bucket_name, bucket);
    env.wait("kept", ClaimPhase::Bound, "Bound").await;
    let (s3_now, _) = env.s3_for("kept").await;
    put(&s3_now, &bucket, "still", b"works").await.unwrap();
    put(&s3, &bucket, "old key", b"works too").await.unwrap();
}

#[tokio::test]
async fn a_claim_cannot_block_another_namespace_through_the_object_bucket_name() {
    let env = Env::new("iso-block").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[], "Delete").await;
    // Claim `c-d` in namespace N and claim `d` in namespace `N-c` share `obc-N-c-d`.
    let blocked_ns = format!("{}-c", env.ns);
    let namespace = Namespace {
        metadata: ObjectMeta { name: Some(blocked_ns.clone()), ..Default::default() },
        ..Default::default()
    };
    Api::<Namespace>::all(env.client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let blocker = env.home();
    let blocked = Tenant::new(&env.client, blocked_ns);
    blocker.create("c-d", generated(&class, "blocker")).await;
    blocker.wait("c-d", ClaimPhase::Bound, "Bound").await;
    blocked.create("d", generated(&class, "blocked")).await;
    let claim = blocked.wait("d", ClaimPhase::Bound, "Bound").await;
    let name = claim.spec.object_bucket_name.unwrap();
    assert_ne!(name, format!("obc-{}-c-d", env.ns));
    let ob: ObjectBucket = Api::all(env.client.clone()).get(&name).await.unwrap();
    assert_eq!(ob.spec.claim_ref.unwrap().uid, claim.metadata.uid);
    let (s3, bucket) = blocked.s3_for("d").await;
    put(&s3, &bucket, "mine", b"too").await.unwrap();
}

/// A size no integer holds (a fraction of 128 digits once made its scale 10^128, which wraps a
/// u128 to 0) ends the reconcile of its own claim in a clear refusal, read by the backend's
/// quotas and by its class's limits alike; the process stays up, as deployed with leader
/// election on, and another tenant's claim made afterwards binds.
#[tokio::test]
async fn an_unreadable_size_fails_its_own_claim_and_the_provisioner_serves_the_next_tenant() {
    let env = Env::new("iso-size").await;
    let lease_namespace = format!("--leader-election-namespace={}", test_support::DEPLOY_NAMESPACE);
    let mut provisioner = env.start_with("node-a", &["--leader-elect=true", &lease_namespace]);
    let class = env.class(&[], "Delete").await;
    let limited = env.class(&[("limitMaxSize", "1Gi")], "Delete").await;
    let attacker = env.tenant("iso-size-a").await;
    let tiny = format!("0.{}1", "0".repeat(127));
    for (name, class) in [("tiny", &class), ("tiny-limited", &limited)] {
        let spec = ObjectBucketClaimSpec {
            additional_config: Some(BTreeMap::from([("maxSize".into(), tiny.clone())])),
            ..generated(class, name)
        };
        attacker.create(name, spec).await;
    }

    let neighbour = env.tenant("iso-size-b").await;
    neighbour.create("after", generated(&class, "after")).await;
    neighbour.wait("after", ClaimPhase::Bound, "Bound").await;
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(env.client.clone(), &attacker.ns);
    for name in ["tiny", "tiny-limited"] {
        let failed = attacker.wait(name, ClaimPhase::Failed, "InvalidParameters").await;
        let message = &test_support::ready(&failed).unwrap().message;
        assert!(message.contains("maxSize") && message.contains("not a whole number of bytes"));
        eventually(&format!("an InvalidParameters Event on {name}"), || async {
            let listed = events.list(&Default::default()).await.ok()?;
            listed
                .items
                .iter()
                .any(|e| {
                    e.involved_object.name.as_deref() == Some(name)
                        && e.reason.as_deref() == Some("InvalidParameters")
                        && e.message.as_deref().is_some_and(|m| m.contains("maxSize"))
                })
                .then_some(())
        })
        .await;
    }
    assert!(provisioner.is_running(), "one tenant's claim must not end the process");
}
