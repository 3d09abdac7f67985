//! The controller end to end on a real control plane, driving the in-memory backend.

use std::collections::BTreeMap;
use std::time::Duration;

use bucket_api::{ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketPhase, ReclaimPolicy};
mod common;

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use test_support::{client_with_crds, eventually, test_namespace};

struct Setup {
    client: Client,
    ns: String,
    claims: Api<ObjectBucketClaim>,
    buckets: Api<ObjectBucket>,
    secrets: Api<Secret>,
    config_maps: Api<ConfigMap>,
    backend: MemoryBackend,
}

async fn setup(prefix: &str) -> Setup {
    let client = client_with_crds().await;
    let ns = test_namespace(&client, prefix).await;
    Setup {
        claims: Api::namespaced(client.clone(), &ns),
        buckets: Api::all(client.clone()),
        secrets: Api::namespaced(client.clone(), &ns),
        config_maps: Api::namespaced(client.clone(), &ns),
        backend: MemoryBackend::default(),
        client,
        ns,
    }
}

impl Setup {
    /// Starts a controller, makes a StorageClass for it and the claim `name` on `bucket`, and
    /// waits until the claim is Bound.
    async fn bound_claim(
        &self,
        name: &str,
        bucket: &str,
        reclaim: Option<&str>,
    ) -> (Harness, String) {
        let controller = Harness::start(self.backend.clone(), Deployed::HostPath);
        let class = storage_class(&self.client, &controller.provisioner, &[], reclaim).await;
        create_claim(&self.claims, name, named_spec(&class, bucket)).await;
        wait_for(&self.claims, name, ClaimPhase::Bound, "Bound").await;
        (controller, class)
    }
}

/// Starts a controller whose first provision acts and then hangs, creates claim `c` with `spec`
/// (given the class), waits until the bucket exists and crashes the controller. Returns the
/// provisioner name and the class, for a restart.
async fn crash_after_provisioning(
    s: &Setup,
    spec: impl FnOnce(&str) -> bucket_api::ObjectBucketClaimSpec,
) -> (String, String) {
    s.backend.inject(Op::Provision, Fault::HangAfter, 1);
    let controller = Harness::start(s.backend.clone(), Deployed::HostPath);
    let provisioner = controller.provisioner.clone();
    let class = storage_class(&s.client, &provisioner, &[], None).await;
    create_claim(&s.claims, "c", spec(&class)).await;
    eventually("the bucket to exist", || async { (s.backend.buckets().len() == 1).then_some(()) })
        .await;
    controller.crash();
    s.backend.release_hangs();
    (provisioner, class)
}

async fn delete_claim(claims: &Api<ObjectBucketClaim>, name: &str) {
    claims.delete(name, &DeleteParams::default()).await.expect("deleting the claim");
}

#[tokio::test]
async fn greenfield_claim_is_provisioned_bound_and_deleted() {
    let s = setup("ctl-green").await;
    let controller = Harness::start(s.backend.clone(), Deployed::HostPath);
    let class = storage_class(&s.client, &controller.provisioner, &[("tier", "gold")], None).await;
    let spec = bucket_api::ObjectBucketClaimSpec {
        generate_bucket_name: Some("photos".into()),
        ..claim_spec(&class)
    };
    create_claim(&s.claims, "photos", spec).await;

    let claim = wait_for(&s.claims, "photos", ClaimPhase::Bound, "Bound").await;
    let bucket = claim.spec.bucket_name.clone().expect("the chosen name is recorded on the claim");
    assert!(bucket.starts_with("photos-") && bucket.len() == "photos-".len() + 12, "{bucket}");
    let ob_name = object_bucket_name(&s.ns, "photos");
    assert_eq!(claim.spec.object_bucket_name.as_deref(), Some(ob_name.as_str()));
    assert_eq!(ready(&claim).unwrap().status, "True");
    assert!(has_finalizer(&claim));
    assert_eq!(s.backend.buckets(), [bucket.clone()].into());

    let secret = s.secrets.get("photos").await.unwrap();
    let data = secret.data.clone().unwrap();
    assert_eq!(data.keys().collect::<Vec<_>>(), ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]);
    let owner = &secret.owner_references()[0];
    assert_eq!((owner.uid.as_str(), owner.controller), (claim.uid().unwrap().as_str(), Some(true)));
    assert_eq!(
        secret.labels().get("objectbucket.io/provisioner").map(String::as_str),
        Some(controller.provisioner.replace('/', "_").as_str())
    );
    let config = s.config_maps.get("photos").await.unwrap().data.unwrap();
    assert_eq!(config["BUCKET_NAME"], bucket);
    assert_eq!(config["BUCKET_HOST"], "memory.test");
    assert_eq!(config["BUCKET_PORT"], "9000");
    assert_eq!(config["BUCKET_REGION"], "us-test-1");
    assert_eq!(config["BUCKET_SUBREGION"], "");
    assert_eq!(config["AWS_ENDPOINT_URL"], "http://memory.test:9000");
    assert_eq!(config["AWS_REGION"], "us-test-1");

    let ob = s.buckets.get(&ob_name).await.unwrap();
    assert_eq!(ob.status.as_ref().and_then(|st| st.phase), Some(ObjectBucketPhase::Bound));
    assert_eq!(ob.spec.reclaim_policy, Some(ReclaimPolicy::Delete));
    assert_eq!(ob.spec.claim_ref.as_ref().unwrap().uid, claim.uid());
    assert_eq!(ob.spec.endpoint.as_ref().unwrap().bucket_name, bucket);
    assert_eq!(ob.spec.additional_state.as_ref().unwrap()["backend"], "memory");
    assert!(has_finalizer(&ob));
    assert!(ready(&claim).unwrap().message.contains("provisioned bucket"));

    delete_claim(&s.claims, "photos").await;
    wait_gone(&s.claims, "photos").await;
    assert!(s.backend.buckets().is_empty(), "the bucket is deleted under the Delete policy");
    assert_eq!(s.buckets.get_opt(&ob_name).await.unwrap().map(|o| o.name_any()), None);
    wait_event(&s.client, &s.ns, "photos", "Deleted").await;
    eventually("the garbage collector to remove the Secret and ConfigMap", || async {
        let secret = s.secrets.get_opt("photos").await.ok()?;
        let config = s.config_maps.get_opt("photos").await.ok()?;
        (secret.is_none() && config.is_none()).then_some(())
    })
    .await;
    assert_eq!(s.backend.calls(Op::Provision), 1);
    assert_eq!(s.backend.calls(Op::Delete), 1);
    assert_eq!(s.backend.calls(Op::Revoke), 0);
    let recorded = BTreeMap::from([("backend".to_string(), "memory".to_string())]);
    assert_eq!(s.backend.cleanup_states(), [recorded], "delete gets the ObjectBucket's state");
}

#[tokio::test]
async fn a_generated_name_found_taken_is_replaced_and_recorded_before_it_is_tried() {
    let s = setup("ctl-regen").await;
    // The backend finds the first generated name taken, as a collision in a burst would.
    s.backend.inject(Op::Provision, Fault::Permanent(bucket_provisioner::BUCKET_NAME_TAKEN), 1);
    let controller = Harness::start(s.backend.clone(), Deployed::HostPath);
    let class = storage_class(&s.client, &controller.provisioner, &[], None).await;
    let spec = bucket_api::ObjectBucketClaimSpec {
        generate_bucket_name: Some("burst".into()),
        ..claim_spec(&class)
    };
    create_claim(&s.claims, "c", spec).await;
    let claim = wait_for(&s.claims, "c", ClaimPhase::Bound, "Bound").await;

    let attempts = s.backend.provisioned_names();
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    let (taken, replacement) = (&attempts[0].0, &attempts[1].0);
    assert_ne!(taken, replacement, "a taken name is never shared");
    assert!(replacement.starts_with("burst-"), "{replacement}");
    for (asked, recorded) in &attempts {
        assert_eq!(recorded.as_ref(), Some(asked), "each name was recorded before it was tried");
    }
    assert_eq!(claim.spec.bucket_name.as_ref(), Some(replacement));
    assert_eq!(s.backend.buckets(), [replacement.clone()].into());
}

#[tokio::test]
async fn brownfield_claim_is_granted_and_revoked_leaving_the_bucket() {
    let s = setup("ctl-brown").await;
    s.backend.add_existing_bucket("shared-data");
    let controller = Harness::start(s.backend.clone(), Deployed::HostPath);
    let class = storage_class(
        &s.client,
        &controller.provisioner,
        &[("bucketName", "shared-data")],
        Some("Delete"),
    )
    .await;
    create_claim(&s.claims, "reader", claim_spec(&class)).await;

    let claim = wait_for(&s.claims, "reader", ClaimPhase::Bound, "Bound").await;
    assert_eq!(claim.spec.bucket_name.as_deref(), Some("shared-data"));
    let user = format!("obc-{}", claim.uid().unwrap());
    assert_eq!(s.backend.users_of("shared-data"), [user].into());
    assert_eq!((s.backend.calls(Op::Grant), s.backend.calls(Op::Provision)), (1, 0));
    assert!(ready(&claim).unwrap().message.contains("granted access to"));

    delete_claim(&s.claims, "reader").await;
    wait_gone(&s.claims, "reader").await;
    assert_eq!(s.backend.calls(Op::Delete), 0, "an existing bucket is never deleted");
    assert_eq!(s.backend.calls(Op::Revoke), 1);
    assert_eq!(s.backend.buckets(), ["shared-data".to_string()].into());
    assert!(s.backend.users_of("shared-data").is_empty());
    let ob_name = object_bucket_name(&s.ns, "reader");
    assert!(s.buckets.get_opt(&ob_name).await.unwrap().is_none());
}

#[tokio::test]
async fn retain_keeps_the_bucket_and_leaves_a_released_object_bucket() {
    let s = setup("ctl-retain").await;
    let _controller = s.bound_claim("keeper", "keep-me", Some("Retain")).await;

    delete_claim(&s.claims, "keeper").await;
    wait_gone(&s.claims, "keeper").await;
    assert_eq!(s.backend.buckets(), ["keep-me".to_string()].into());
    assert_eq!((s.backend.calls(Op::Delete), s.backend.calls(Op::Revoke)), (0, 1));
    let ob = s.buckets.get(&object_bucket_name(&s.ns, "keeper")).await.unwrap();
    assert_eq!(ob.status.as_ref().and_then(|st| st.phase), Some(ObjectBucketPhase::Released));
    assert_eq!(ob.spec.reclaim_policy, Some(ReclaimPolicy::Retain));
    assert!(!has_finalizer(&ob), "a released ObjectBucket can be deleted by a person");
}

#[tokio::test]
async fn generated_names_differ_between_claims() {
    let s = setup("ctl-gen").await;
    let controller = Harness::start(s.backend.clone(), Deployed::HostPath);
    let class = storage_class(&s.client, &controller.provisioner, &[], None).await;
    for name in ["one", "two"] {
        let spec = bucket_api::ObjectBucketClaimSpec {
            generate_bucket_name: Some("logs".into()),
            ..claim_spec(&class)
        };
        create_claim(&s.claims, name, spec).await;
    }
    let one = wait_for(&s.claims, "one", ClaimPhase::Bound, "Bound").await.spec.bucket_name;
    let two = wait_for(&s.claims, "two", ClaimPhase::Bound, "Bound").await.spec.bucket_name;
    assert_ne!(one, two);
    assert_eq!(s.backend.buckets().len(), 2);
}

#[tokio::test]
async fn crash_before_the_backend_answers_creates_no_second_bucket() {
    let s = setup("ctl-crash1").await;
    s.backend.inject(Op::Provision, Fault::HangBefore, 1);
    let controller = Harness::start(s.backend.clone(), Deployed::HostPath);
    let provisioner = controller.provisioner.clone();
    let class = storage_class(&s.client, &provisioner, &[], None).await;
    let spec = bucket_api::ObjectBucketClaimSpec {
        generate_bucket_name: Some("crash".into()),
        ..claim_spec(&class)
    };
    create_claim(&s.claims, "c", spec).await;
    eventually("the backend to be called", || async {
        (s.backend.calls(Op::Provision) == 1).then_some(())
    })
    .await;
    let persisted = s.claims.get("c").await.unwrap();
    let name = persisted.spec.bucket_name.clone().expect("name persisted before the call");
    assert!(has_finalizer(&persisted), "finalizer persisted before the call");
    controller.crash();
    s.backend.release_hangs();

    let _restarted = Harness::start_as(s.backend.clone(), &provisioner, Deployed::HostPath);
    let claim = wait_for(&s.claims, "c", ClaimPhase::Bound, "Bound").await;
    assert_eq!(claim.spec.bucket_name.as_deref(), Some(name.as_str()), "the same name is reused");
    assert_eq!(s.backend.buckets(), [name].into());
}

#[tokio::test]
async fn crash_after_the_backend_acted_is_healed_on_restart() {
    let s = setup("ctl-crash2").await;
    let (provisioner, _) =
        crash_after_provisioning(&s, |class| bucket_api::ObjectBucketClaimSpec {
            generate_bucket_name: Some("late".into()),
            ..claim_spec(class)
        })
        .await;
    assert!(s.secrets.get_opt("c").await.unwrap().is_none(), "the crash came before any write");

    let restarted = Harness::start_as(s.backend.clone(), &provisioner, Deployed::HostPath);
    let claim = wait_for(&s.claims, "c", ClaimPhase::Bound, "Bound").await;
    assert_eq!(s.backend.buckets(), [claim.spec.bucket_name.clone().unwrap()].into());
    assert!(s.secrets.get_opt("c").await.unwrap().is_some());
    drop(restarted);
}

#[tokio::test]
async fn claim_deleted_while_the_controller_was_down_leaves_no_orphan() {
    let s = setup("ctl-orphan").await;
    let (provisioner, class) =
        crash_after_provisioning(&s, |class| named_spec(class, "orphan-risk")).await;
    // The class goes too: cleanup must work from what the claim recorded.
    Api::<StorageClass>::all(s.client.clone())
        .delete(&class, &DeleteParams::default())
        .await
        .unwrap();
    delete_claim(&s.claims, "c").await;

    let _restarted = Harness::start_as(s.backend.clone(), &provisioner, Deployed::HostPath);
    wait_gone(&s.claims, "c").await;
    assert!(s.backend.buckets().is_empty(), "the bucket created before the crash was deleted");
    assert_eq!(s.backend.calls(Op::Delete), 1);
    // With the class gone nothing says where the bucket lives, and nothing is taken from the
    // claim, whose tenant could write anything there: the backend's own records decide.
    assert_eq!(s.backend.cleanup_states(), [BTreeMap::new()], "no settings from the claim");
}

#[tokio::test]
async fn claim_deleted_while_the_controller_was_down_is_cleaned_up_with_its_classs_settings() {
    let s = setup("ctl-orphan-class").await;
    let (provisioner, _class) =
        crash_after_provisioning(&s, |class| named_spec(class, "orphan-class")).await;
    delete_claim(&s.claims, "c").await;

    let _restarted = Harness::start_as(s.backend.clone(), &provisioner, Deployed::HostPath);
    wait_gone(&s.claims, "c").await;
    assert!(s.backend.buckets().is_empty(), "the bucket created before the crash was deleted");
    let recomputed = BTreeMap::from([("recordedFor".to_string(), "orphan-class".to_string())]);
    assert_eq!(s.backend.cleanup_states(), [recomputed], "computed again from the class");
}

#[tokio::test]
async fn restart_does_not_call_the_backend_for_bound_claims() {
    let s = setup("ctl-restart").await;
    let (controller, class) = s.bound_claim("c", "steady", None).await;
    let provisioner = controller.provisioner.clone();
    controller.stop().await;
    let calls_before = s.backend.all_calls();

    let _restarted = Harness::start_as(s.backend.clone(), &provisioner, Deployed::HostPath);
    // A no-op change to the bound claim, then a new claim: once the new one is Bound the
    // restarted controller has long been through the first one, twice.
    let patch = json!({ "metadata": { "labels": { "touched": "yes" } } });
    s.claims.patch("c", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    create_claim(&s.claims, "later", named_spec(&class, "later-bucket")).await;
    wait_for(&s.claims, "later", ClaimPhase::Bound, "Bound").await;
    let steady: Vec<_> =
        s.backend.all_calls().into_iter().filter(|(_, bucket)| bucket == "steady").collect();
    assert_eq!(steady, calls_before, "no backend call for the bound, unchanged claim");
    assert_eq!(s.claims.get("c").await.unwrap().status.unwrap().phase, Some(ClaimPhase::Bound));
}

#[tokio::test]
async fn deleted_secret_is_restored_with_fresh_credentials() {
    let s = setup("ctl-secret").await;
    let _controller = s.bound_claim("c", "restore-me", None).await;
    s.secrets.delete("c", &DeleteParams::default()).await.unwrap();
    eventually("the Secret to be restored", || async { s.secrets.get_opt("c").await.ok()? }).await;
    assert_eq!(s.backend.buckets().len(), 1);
    assert_eq!(s.backend.calls(Op::Provision), 2, "only the backend can mint credentials");
}

#[tokio::test]
async fn foreign_secret_is_never_overwritten() {
    let s = setup("ctl-foreign").await;
    let controller = Harness::start(s.backend.clone(), Deployed::HostPath);
    let class = storage_class(&s.client, &controller.provisioner, &[], None).await;
    let foreign = Secret {
        metadata: kube::api::ObjectMeta { name: Some("taken".into()), ..Default::default() },
        string_data: Some(BTreeMap::from([("password".into(), "hunter2".into())])),
        ..Default::default()
    };
    s.secrets.create(&PostParams::default(), &foreign).await.unwrap();
    let spec = bucket_api::ObjectBucketClaimSpec {
        bucket_name: Some("taken-bucket".into()),
        ..claim_spec(&class)
    };
    create_claim(&s.claims, "taken", spec).await;

    let claim = wait_for(&s.claims, "taken", ClaimPhase::Failed, "ForeignSecret").await;
    assert!(ready(&claim).unwrap().message.contains("left untouched"));
    wait_event(&s.client, &s.ns, "taken", "ForeignSecret").await;
    let secret = s.secrets.get("taken").await.unwrap();
    assert_eq!(secret.data.unwrap().keys().collect::<Vec<_>>(), ["password"]);
    // The controller caches only its own Secrets, so it learns of a foreign one when writing:
    // the bucket is made once, then taken back with everything written for the claim, and while
    // the Secret stays in the way the backend is not asked again, however often the claim is
    // re-checked.
    assert_eq!(s.backend.calls(Op::Provision), 1);
    assert_eq!(s.backend.calls(Op::Delete), 1, "what was made for the refused claim is deleted");
    assert_eq!(s.backend.buckets(), Default::default(), "the refused claim holds no bucket");
    let ob = s.buckets.get_opt(&object_bucket_name(&s.ns, "taken")).await.unwrap();
    assert!(ob.is_none(), "no ObjectBucket records a bucket for the refused claim: {ob:?}");
    assert!(s.config_maps.get_opt("taken").await.unwrap().is_none(), "nor a ConfigMap");
    let rechecks = controller.reconciles() + 2;
    eventually("the claim to be re-checked", || async {
        (controller.reconciles() >= rechecks).then_some(())
    })
    .await;
    assert_eq!(s.backend.calls(Op::Provision), 1, "no credentials minted again while blocked");

    // Once the foreign Secret is gone the claim binds (the controller re-checks such claims).
    s.secrets.delete("taken", &DeleteParams::default()).await.unwrap();
    wait_for(&s.claims, "taken", ClaimPhase::Bound, "Bound").await;
}

#[tokio::test]
async fn missing_storage_class_waits_and_binds_once_it_exists() {
    let s = setup("ctl-nosc").await;
    let controller = Harness::start(s.backend.clone(), Deployed::HostPath);
    let class = format!("later-{}", test_support::unique_suffix());
    let spec = bucket_api::ObjectBucketClaimSpec {
        bucket_name: Some("eventually".into()),
        ..claim_spec(&class)
    };
    create_claim(&s.claims, "c", spec).await;
    let claim = wait_for(&s.claims, "c", ClaimPhase::Pending, "StorageClassNotFound").await;
    assert!(ready(&claim).unwrap().message.contains(&class));
    wait_event(&s.client, &s.ns, "c", "StorageClassNotFound").await;

    let class_object = StorageClass {
        metadata: kube::api::ObjectMeta { name: Some(class.clone()), ..Default::default() },
        provisioner: controller.provisioner.clone(),
        ..Default::default()
    };
    Api::<StorageClass>::all(s.client.clone())
        .create(&PostParams::default(), &class_object)
        .await
        .unwrap();
    wait_for(&s.claims, "c", ClaimPhase::Bound, "Bound").await;
}

#[tokio::test]
async fn missing_storage_class_does_not_block_deletion() {
    let s = setup("ctl-scgone").await;
    let (_controller, class) = s.bound_claim("c", "no-class", None).await;
    Api::<StorageClass>::all(s.client.clone())
        .delete(&class, &DeleteParams::default())
        .await
        .unwrap();

    delete_claim(&s.claims, "c").await;
    wait_gone(&s.claims, "c").await;
    assert!(s.backend.buckets().is_empty());
}

#[tokio::test]
async fn permanent_backend_error_fails_the_claim_without_retrying() {
    let s = setup("ctl-perm").await;
    s.backend.inject(Op::Provision, Fault::Permanent("QuotaExceeded"), 1);
    let controller = Harness::start(s.backend.clone(), Deployed::HostPath);
    let class = storage_class(&s.client, &controller.provisioner, &[], None).await;
    let spec = bucket_api::ObjectBucketClaimSpec {
        bucket_name: Some("too-much".into()),
        ..claim_spec(&class)
    };
    create_claim(&s.claims, "c", spec).await;
    let claim = wait_for(&s.claims, "c", ClaimPhase::Failed, "QuotaExceeded").await;
    assert!(ready(&claim).unwrap().message.contains("injected permanent"));
    wait_event(&s.client, &s.ns, "c", "QuotaExceeded").await;
    // With 100 ms backoff a retry loop would have called many times by now.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(s.backend.calls(Op::Provision), 1);

    // A change to the claim is the way out, and it retries.
    let patch = json!({ "spec": { "additionalConfig": { "maxObjects": "10" } } });
    s.claims.patch("c", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    wait_for(&s.claims, "c", ClaimPhase::Bound, "Bound").await;
}

#[tokio::test]
async fn transient_backend_errors_are_retried_until_bound() {
    let s = setup("ctl-trans").await;
    s.backend.inject(Op::Provision, Fault::Transient, 3);
    let controller = Harness::start(s.backend.clone(), Deployed::HostPath);
    let class = storage_class(&s.client, &controller.provisioner, &[], None).await;
    let spec = bucket_api::ObjectBucketClaimSpec {
        bucket_name: Some("flaky".into()),
        ..claim_spec(&class)
    };
    create_claim(&s.claims, "c", spec).await;
    wait_for(&s.claims, "c", ClaimPhase::Bound, "Bound").await;
    assert_eq!(s.backend.calls(Op::Provision), 4);
    assert!(event_reasons(&s.client, &s.ns, "c").await.contains("ProvisionFailed"));
    let metrics = controller.metrics.encode();
    assert!(metrics.contains("reason=\"ProvisionFailed\""), "{metrics}");
}

#[tokio::test]
async fn failing_deletion_says_what_blocks_it_and_can_be_abandoned() {
    let s = setup("ctl-stuck").await;
    let _controller = s.bound_claim("c", "sticky", None).await;
    s.backend.inject(Op::Delete, Fault::Transient, 1000);
    delete_claim(&s.claims, "c").await;

    let claim = wait_for(&s.claims, "c", ClaimPhase::Bound, "DeleteFailed").await;
    let message = &ready(&claim).unwrap().message;
    assert!(message.contains("abandon-bucket=true"), "{message}");
    wait_event(&s.client, &s.ns, "c", "DeleteFailed").await;

    let patch =
        json!({ "metadata": { "annotations": { "objectbucket.io/abandon-bucket": "true" } } });
    s.claims.patch("c", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    wait_gone(&s.claims, "c").await;
    assert_eq!(s.backend.buckets(), ["sticky".to_string()].into(), "abandoned, not deleted");
    let ob = s.buckets.get(&object_bucket_name(&s.ns, "c")).await.unwrap();
    assert_eq!(ob.status.as_ref().unwrap().phase, Some(ObjectBucketPhase::Failed));
    assert!(!has_finalizer(&ob));
}

#[tokio::test]
async fn additional_config_changes_reach_update() {
    let s = setup("ctl-update").await;
    let controller = Harness::start(s.backend.clone(), Deployed::HostPath);
    let class = storage_class(&s.client, &controller.provisioner, &[], None).await;
    let spec = bucket_api::ObjectBucketClaimSpec {
        bucket_name: Some("tunable".into()),
        additional_config: Some(BTreeMap::from([("maxObjects".into(), "10".into())])),
        ..claim_spec(&class)
    };
    create_claim(&s.claims, "c", spec).await;
    wait_for(&s.claims, "c", ClaimPhase::Bound, "Bound").await;
    assert_eq!(s.backend.calls(Op::Update), 0);

    let patch = json!({ "spec": { "additionalConfig": { "maxObjects": null, "maxSize": "2G" } } });
    s.claims.patch("c", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    eventually("update to be called", || async {
        (s.backend.calls(Op::Update) == 1).then_some(())
    })
    .await;
    let expected = BTreeMap::from([("maxSize".to_string(), "2G".to_string())]);
    assert_eq!(s.backend.updates(), std::slice::from_ref(&expected));
    let ob_name = object_bucket_name(&s.ns, "c");
    eventually("the ObjectBucket to record the new config", || async {
        let ob = s.buckets.get(&ob_name).await.ok()?;
        (ob.spec.endpoint?.additional_config? == expected).then_some(())
    })
    .await;
    wait_event(&s.client, &s.ns, "c", "Updated").await;
    assert_eq!(s.backend.calls(Op::Provision), 1, "an update does not re-provision");
}

#[tokio::test]
async fn usage_is_recorded_on_the_object_bucket_when_it_changes() {
    let s = setup("ctl-usage").await;
    let (controller, _) = s.bound_claim("c", "measured", None).await;
    let ob_name = object_bucket_name(&s.ns, "c");
    let usage = bucket_api::BucketUsage { objects: 3, bytes: 4096, ..Default::default() };
    s.backend.set_usage("measured", usage.clone());
    let recorded = eventually("the usage on the ObjectBucket", || async {
        let ob = s.buckets.get(&ob_name).await.ok()?;
        (ob.status.as_ref()?.usage.as_ref() == Some(&usage)).then_some(ob)
    })
    .await;
    let status = recorded.status.as_ref().unwrap();
    assert_eq!(status.phase, Some(ObjectBucketPhase::Bound), "phase and conditions stay");
    assert_eq!(status.conditions.len(), 1);
    let metrics = controller.metrics.encode();
    assert!(metrics.contains("bucket_provisioner_bucket_objects{bucket=\"measured\"} 3\n"));
    assert!(metrics.contains("bucket_provisioner_bucket_bytes{bucket=\"measured\"} 4096\n"));

    // Unchanged usage is not written again, however many reports pass; the claim the write woke
    // up rewrote nothing either (its status would lose nothing, but would change).
    let claim_version = s.claims.get("c").await.unwrap().resource_version();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ob = s.buckets.get(&ob_name).await.unwrap();
    assert_eq!(ob.resource_version(), recorded.resource_version());
    assert_eq!(s.claims.get("c").await.unwrap().resource_version(), claim_version);

    let grown = bucket_api::BucketUsage { objects: 4, bytes: 5000, ..Default::default() };
    s.backend.set_usage("measured", grown.clone());
    eventually("the new usage on the ObjectBucket", || async {
        let ob = s.buckets.get(&ob_name).await.ok()?;
        (ob.status?.usage? == grown).then_some(())
    })
    .await;
}

/// A backend whose `usage` panics on one bucket leaves the others reported, and the controller
/// serving claims.
#[tokio::test]
async fn a_usage_that_panics_on_one_bucket_leaves_the_others_reported() {
    let s = setup("ctl-usage-panic").await;
    s.backend.panic_on_usage("broken");
    let (controller, class) = s.bound_claim("a-broken", "broken", None).await;
    create_claim(&s.claims, "b-measured", named_spec(&class, "measured")).await;
    wait_for(&s.claims, "b-measured", ClaimPhase::Bound, "Bound").await;
    let usage = bucket_api::BucketUsage { objects: 1, bytes: 10, ..Default::default() };
    s.backend.set_usage("measured", usage.clone());
    let ob_name = object_bucket_name(&s.ns, "b-measured");
    eventually("the usage of the other bucket on its ObjectBucket", || async {
        let ob = s.buckets.get(&ob_name).await.ok()?;
        (ob.status?.usage? == usage).then_some(())
    })
    .await;
    // The same pass may read the other bucket first.
    let errors = "bucket_provisioner_reconcile_errors_total{reason=\"InternalError\"}";
    eventually("the panic counted", || async {
        controller.metrics.encode().contains(errors).then_some(())
    })
    .await;
    create_claim(&s.claims, "c-after", named_spec(&class, "after")).await;
    wait_for(&s.claims, "c-after", ClaimPhase::Bound, "Bound").await;
}

#[tokio::test]
async fn claims_of_other_provisioners_are_left_alone() {
    let s = setup("ctl-other").await;
    let controller = Harness::start(s.backend.clone(), Deployed::HostPath);
    let foreign = storage_class(&s.client, "someone-else.example.com/bucket", &[], None).await;
    create_claim(&s.claims, "theirs", named_spec(&foreign, "not-mine")).await;
    // A claim of ours made afterwards: once it is Bound, the controller has seen the other.
    let ours = storage_class(&s.client, &controller.provisioner, &[], None).await;
    create_claim(&s.claims, "ours", named_spec(&ours, "mine")).await;
    wait_for(&s.claims, "ours", ClaimPhase::Bound, "Bound").await;

    let claim = s.claims.get("theirs").await.unwrap();
    assert!(claim.status.is_none());
    assert!(claim.finalizers().is_empty());
    assert!(claim.annotations().is_empty());
    assert_eq!(s.backend.buckets(), ["mine".to_string()].into());
}

#[tokio::test]
async fn a_bound_claim_stripped_of_its_finalizer_gets_it_back_and_is_still_cleaned_up() {
    let s = setup("refinalized").await;
    let (_controller, _) = s.bound_claim("c", "refinalized", Some("Delete")).await;
    let strip = json!({ "metadata": { "finalizers": null } });
    s.claims.patch("c", &PatchParams::default(), &Patch::Merge(&strip)).await.unwrap();
    eventually("the claim to get its finalizer back", || async {
        has_finalizer(&s.claims.get("c").await.ok()?).then_some(())
    })
    .await;
    delete_claim(&s.claims, "c").await;
    wait_gone(&s.claims, "c").await;
    assert!(s.backend.buckets().is_empty(), "the claim's deletion still deleted its bucket");
}

#[tokio::test]
async fn an_object_bucket_made_by_hand_under_the_conventional_name_leaves_the_claim_another() {
    let s = setup("handmade").await;
    let controller = Harness::start(s.backend.clone(), Deployed::HostPath);
    let class = storage_class(&s.client, &controller.provisioner, &[], Some("Delete")).await;
    // Made before the claim, by someone else, under the name the claim's would have.
    let conventional = object_bucket_name(&s.ns, "c");
    let hand_made = ObjectBucket::new(&conventional, Default::default());
    s.buckets.create(&PostParams::default(), &hand_made).await.unwrap();

    create_claim(&s.claims, "c", named_spec(&class, "beside-hand-made")).await;
    let bound = wait_for(&s.claims, "c", ClaimPhase::Bound, "Bound").await;
    let recorded = bound.spec.object_bucket_name.expect("the ObjectBucket's name is recorded");
    assert_ne!(recorded, conventional);
    assert!(recorded.starts_with(&format!("{conventional}-")), "{recorded}");
    let ours = s.buckets.get(&recorded).await.unwrap();
    assert_eq!(ours.spec.endpoint.unwrap().bucket_name, "beside-hand-made");
    let untouched = s.buckets.get(&conventional).await.unwrap();
    assert!(untouched.spec.claim_ref.is_none(), "the hand-made ObjectBucket was left alone");

    delete_claim(&s.claims, "c").await;
    wait_gone(&s.claims, "c").await;
    assert!(s.buckets.get_opt(&conventional).await.unwrap().is_some(), "not ours to delete");
}
