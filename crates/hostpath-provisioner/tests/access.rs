//! Access modes and StorageClass limits end to end: `hostpath-bucket-provisioner` as a real
//! process against the real control plane, used through the credentials it writes.

mod harness;

use std::collections::BTreeMap;

use bucket_api::{AccessMode, ClaimPhase, ObjectBucket, ObjectBucketClaimSpec};
use harness::*;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;
use test_support::eventually;

fn spec(class: &str, config: &[(&str, &str)]) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec {
        storage_class_name: class.into(),
        additional_config: Some(
            config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_read_only_claim_on_an_operator_bucket_reads_it_and_cannot_change_it() {
    let env = Env::new("hp-ro").await;
    let admin_secret = env.admin_secret("s3-admin", ("OPERATOR01", "operator-secret-0123")).await;
    let _provisioner = env.start_with("node-a", &["--leader-elect=false", &admin_secret]);
    let admin = s3_with(env.port, "OPERATOR01", "operator-secret-0123");
    eventually("the operator to create a bucket", || async {
        admin.create_bucket().bucket("dataset").send().await.ok()
    })
    .await;
    put(&admin, "dataset", "seed.txt", b"from the operator").await.unwrap();

    // The operator's class grants the dataset read-only: a claim asking nothing gets that.
    let class =
        env.class(&[("bucketName", "dataset"), ("limitAccessMode", "ReadOnly")], "Delete").await;
    let tenant = env.home();
    tenant.create("reader", spec(&class, &[])).await;
    let claim = env.wait("reader", ClaimPhase::Bound, "Bound").await;
    assert_eq!(claim.status.unwrap().access_mode, Some(AccessMode::ReadOnly));
    let (reader, bucket) = env.s3_for("reader").await;
    assert_eq!(get(&reader, &bucket, "seed.txt").await.unwrap(), b"from the operator");
    let listed = reader.list_objects_v2().bucket(&bucket).send().await.unwrap();
    assert_eq!(listed.key_count, Some(1));
    assert_eq!(
        put(&reader, &bucket, "seed.txt", b"overwritten").await.unwrap_err(),
        "AccessDenied"
    );
    let deleted = reader.delete_object().bucket(&bucket).key("seed.txt").send().await;
    assert_eq!(code(deleted), "AccessDenied");
    assert_eq!(get(&admin, &bucket, "seed.txt").await.unwrap(), b"from the operator");

    // Asking for more than the class allows fails the claim, naming the limit.
    tenant.create("greedy", spec(&class, &[("accessMode", "ReadWrite")])).await;
    let claim = env.wait("greedy", ClaimPhase::Failed, "ExceedsClassLimit").await;
    let ready = claim.status.unwrap().conditions.into_iter().find(|c| c.type_ == "Ready").unwrap();
    assert!(ready.message.contains("limitAccessMode ReadOnly"), "{}", ready.message);
    assert!(ready.message.contains(&class), "{}", ready.message);
}

#[tokio::test]
async fn a_write_only_claim_writes_and_is_widened_through_update() {
    let env = Env::new("hp-wo").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[], "Delete").await;
    let tenant = env.home();
    let claim = ObjectBucketClaimSpec {
        generate_bucket_name: Some("logs".into()),
        ..spec(&class, &[("accessMode", "WriteOnly")])
    };
    tenant.create("shipper", claim).await;
    env.wait("shipper", ClaimPhase::Bound, "Bound").await;
    let (shipper, bucket) = env.s3_for("shipper").await;
    put(&shipper, &bucket, "log-1", b"line").await.unwrap();
    assert_eq!(get(&shipper, &bucket, "log-1").await.unwrap_err(), "AccessDenied");
    assert_eq!(code(shipper.list_objects_v2().bucket(&bucket).send().await), "AccessDenied");

    let patch = json!({ "spec": { "additionalConfig": { "accessMode": "ReadWrite" } } });
    tenant.claims.patch("shipper", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    eventually("the widened key to read", || async { get(&shipper, &bucket, "log-1").await.ok() })
        .await;
    // The key is widened before the status says so: the status follows.
    eventually("the status to show the widened mode", || async {
        let claim = tenant.claims.get("shipper").await.ok()?;
        (claim.status?.access_mode == Some(AccessMode::ReadWrite)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_claim_held_to_a_narrowed_class_shows_the_mode_its_key_has() {
    let env = Env::new("hp-narrow").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[], "Delete").await;
    let tenant = env.scoped_tenant("hp-narrow-t").await;
    let claim = ObjectBucketClaimSpec {
        generate_bucket_name: Some("wide".into()),
        ..spec(&class, &[("accessMode", "ReadWrite")])
    };
    tenant.create("wide", claim).await;
    tenant.wait("wide", ClaimPhase::Bound, "Bound").await;
    let (s3, bucket) = tenant.s3_for("wide").await;
    put(&s3, &bucket, "before", b"written").await.unwrap();

    // The operator narrows the class (parameters are immutable: replaced under its name).
    let classes: Api<StorageClass> = Api::all(env.client.clone());
    let mut narrowed = classes.get(&class).await.unwrap();
    classes.delete(&class, &Default::default()).await.unwrap();
    eventually("the class to be gone", || async {
        classes.get_opt(&class).await.ok()?.is_none().then_some(())
    })
    .await;
    narrowed.metadata = ObjectMeta { name: Some(class.clone()), ..Default::default() };
    narrowed.parameters = Some(BTreeMap::from([("limitAccessMode".into(), "ReadOnly".into())]));
    classes.create(&PostParams::default(), &narrowed).await.unwrap();

    let claim = tenant.wait("wide", ClaimPhase::Failed, "ExceedsClassLimit").await;
    let ob_name = claim.spec.object_bucket_name.clone().unwrap();
    let ob: ObjectBucket = Api::all(env.client.clone()).get(&ob_name).await.unwrap();
    assert_eq!(bucket_provisioner::access_mode_of(&ob), AccessMode::ReadOnly);
    assert_eq!(put(&s3, &bucket, "after", b"refused").await.unwrap_err(), "AccessDenied");
    assert_eq!(get(&s3, &bucket, "before").await.unwrap(), b"written");
    assert_eq!(
        claim.status.unwrap().access_mode,
        Some(AccessMode::ReadOnly),
        "the status says the mode the key has"
    );
}
