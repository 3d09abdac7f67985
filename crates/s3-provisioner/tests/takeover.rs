//! Taking over from the Go aws-s3-provisioner in place: the old provisioner runs for real (built
//! by `tests/aws-s3-provisioner/build.sh`) against moto with IAM enforced, through a
//! TLS-terminating proxy, and binds claims; it is stopped and this provisioner, under the same
//! name and as `deploy/s3/` deploys it, adopts them without a failed request of their apps; then
//! deleting the claims leaves nothing of either provisioner. Tenants cannot make it adopt what is
//! not theirs.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bucket_api::contract::{FINALIZER, LABEL_PROVISIONER, annotations, legacy};
use bucket_api::{ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec};
use bucket_provisioner::Credentials;
use common::cluster::{Setup, setup};
use common::moto::{ALLOW_ALL, Moto};
use common::old_provisioner::{self, OldProvisioner};
use common::suffix;
use k8s_openapi::api::core::v1::{ObjectReference, Secret};
use kube::api::{
    Api, ApiResource, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams,
};
use kube::{Resource, ResourceExt};
use s3_provisioner::iam;
use serde_json::json;
use test_support::{Deployed, Harness, TlsProxy, create_namespace, eventually};

const REGION: &str = "us-west-1";

async fn phase(claims: &Api<ObjectBucketClaim>, name: &str) -> Option<ClaimPhase> {
    claims.get(name).await.ok()?.status?.phase
}

async fn wait_phase(
    s: &Setup,
    name: &str,
    wanted: ClaimPhase,
    (old, proxy): (&OldProvisioner, &TlsProxy),
) {
    let what = format!("claim {name} {wanted:?}");
    let found = tokio::time::timeout(Duration::from_secs(120), async {
        while phase(&s.claims, name).await != Some(wanted) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    assert!(
        found.is_ok(),
        "{what} in time; old provisioner:\n{}\nproxy:\n{}",
        old.log_tail(),
        proxy.log_tail()
    );
}

/// Every ObjectBucket bound to the claim with `uid`.
async fn buckets_of(s: &Setup, uid: &str) -> Vec<ObjectBucket> {
    let all = s.buckets.list(&ListParams::default()).await.unwrap();
    all.into_iter()
        .filter(|b| b.spec.claim_ref.as_ref().and_then(|c| c.uid.as_deref()) == Some(uid))
        .collect()
}

/// Puts `keys` in the owner Secret the StorageClasses name.
async fn owner_keys(s: &Setup, keys: &Credentials) {
    let data = json!({ "stringData": {
        "AWS_ACCESS_KEY_ID": keys.access_key_id, "AWS_SECRET_ACCESS_KEY": keys.secret_access_key
    }});
    s.secrets.patch("owner", &PatchParams::default(), &Patch::Merge(&data)).await.unwrap();
}

/// Policies of the account (customer-managed) by name.
async fn local_policies(moto: &Moto) -> Vec<String> {
    let listed = moto
        .iam(&moto.admin)
        .list_policies()
        .scope(aws_sdk_iam::types::PolicyScopeType::Local)
        .send()
        .await
        .unwrap();
    listed.policies().iter().filter_map(|p| p.policy_name().map(String::from)).collect()
}

/// Reads `key` of `bucket` with `keys` every 50 ms until stopped: (requests, failures).
fn reader(
    moto: &Moto,
    keys: &Credentials,
    bucket: &str,
    key: &str,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(usize, Vec<String>)> {
    let s3 = moto.s3_in(keys, REGION);
    let (bucket, key) = (bucket.to_string(), key.to_string());
    let requests = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        let mut failures = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            requests.fetch_add(1, Ordering::SeqCst);
            if let Err(e) = s3.get_object().bucket(&bucket).key(&key).send().await {
                failures.push(format!("{e:?}"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        (requests.load(Ordering::SeqCst), failures)
    })
}

#[tokio::test]
async fn claims_of_the_go_provisioner_are_adopted_in_place_and_deleting_them_leaves_nothing() {
    let s = setup("s3-takeover").await;
    // The old provisioner needs IAM policies of its own making: an owner allowed everything.
    let broad = s.moto.user_with_policy(&format!("old-owner-{}", suffix()), ALLOW_ALL).await;
    s.owner_keys("owner", &broad).await;
    // The overlap is the rotation's, which moves a claim to a user of its own (the old
    // provisioner ignores the parameter).
    let params = [("region", REGION), ("createBucketUser", "yes"), ("rotationOverlap", "2s")];
    let class = s.class(old_provisioner::NAME, "owner", &params, Some("Delete")).await;
    let static_bucket = format!("static-{}", suffix());
    s.moto.existing_bucket_in(REGION, &static_bucket, &["shared.txt"]).await;
    let grant_params = [("region", REGION), ("bucketName", static_bucket.as_str())];
    let grant_class = s.class(old_provisioner::NAME, "owner", &grant_params, Some("Delete")).await;

    let proxy = TlsProxy::start(s.moto.port()).expect("starting the TLS proxy");
    let mut old = OldProvisioner::start(&proxy);
    let empty_bucket = format!("empty-{}", suffix());
    let specs = [
        (
            "empty",
            ObjectBucketClaimSpec {
                storage_class_name: class.clone(),
                bucket_name: Some(empty_bucket.clone()),
                ..Default::default()
            },
        ),
        (
            "full",
            ObjectBucketClaimSpec {
                storage_class_name: class.clone(),
                generate_bucket_name: Some("full".into()),
                ..Default::default()
            },
        ),
        (
            "grant",
            ObjectBucketClaimSpec { storage_class_name: grant_class.clone(), ..Default::default() },
        ),
    ];
    for (name, spec) in &specs {
        s.claim(name, spec.clone()).await;
    }
    let raw_claims: Api<DynamicObject> = Api::namespaced_with(
        s.client.clone(),
        &s.ns,
        &ApiResource::erase::<ObjectBucketClaim>(&()),
    );
    let mut before = BTreeMap::new();
    for (name, _) in &specs {
        wait_phase(&s, name, ClaimPhase::Bound, (&old, &proxy)).await;
        let claim = s.claims.get(name).await.unwrap();
        // Bound as the old library binds: the binding in the field it writes without a JSON name.
        let spec = raw_claims.get(name).await.unwrap().data["spec"].clone();
        let ob_name = legacy::object_bucket_name(&s.ns, name);
        assert_eq!(spec[legacy::OBJECT_BUCKET_NAME_FIELD], json!(ob_name), "{spec}");
        eventually(&format!("the Secret of claim {name}"), || async {
            s.secrets.get_opt(name).await.ok().flatten().map(|_| ())
        })
        .await;
        before.insert(name.to_string(), (claim, s.claim_keys(name).await));
    }
    let full_bucket = before["full"].0.spec.bucket_name.clone().unwrap();
    // The apps' keys work: one writes data, one reads the shared bucket.
    let full_keys = before["full"].1.clone();
    let put = s.moto.s3_in(&full_keys, REGION).put_object().bucket(&full_bucket).key("data.txt");
    put.body(b"data".to_vec().into()).send().await.expect("the old key writes its bucket");
    let grant_s3 = s.moto.s3_in(&before["grant"].1, REGION);
    grant_s3.get_object().bucket(&static_bucket).key("shared.txt").send().await.unwrap();
    let mut users = Vec::new();
    for name in before.keys() {
        let ob = s.buckets.get(&legacy::object_bucket_name(&s.ns, name)).await.unwrap();
        let state = ob.spec.additional_state.clone().unwrap_or_default();
        users.push(state.get("UserName").cloned().expect("the old provisioner's user"));
        assert_eq!(ob.labels()[legacy::LABEL_PROVISIONER], "aws-s3.io-bucket");
    }
    let policies = local_policies(&s.moto).await;
    assert!(users.iter().all(|u| policies.contains(u)), "{users:?} have policies: {policies:?}");

    // An app reads across the switch.
    let stop = Arc::new(AtomicBool::new(false));
    let reading = reader(&s.moto, &full_keys, &full_bucket, "data.txt", stop.clone());
    tokio::time::sleep(Duration::from_millis(500)).await;
    old.stop();
    // The owner is scoped down to what this provisioner documents (adoption and cleanup
    // included) before it starts.
    let scoped = s.moto.takeover_owner(&format!("owner-{}", suffix())).await;
    owner_keys(&s, &scoped).await;
    let controller = Harness::start_as(s.backend(), old_provisioner::NAME, Deployed::S3);

    for (name, (claim, keys)) in &before {
        s.wait_event(name, "Adopted").await;
        s.wait_for(name, ClaimPhase::Bound, "Bound").await;
        assert_eq!(&s.claim_keys(name).await, keys, "claim {name} keeps its key");
        let bound = buckets_of(&s, &claim.uid().unwrap()).await;
        assert_eq!(bound.len(), 1, "one ObjectBucket for claim {name}: {bound:?}");
        let ob = &bound[0];
        assert_eq!(ob.name_any(), legacy::object_bucket_name(&s.ns, name));
        assert!(ob.labels().contains_key(LABEL_PROVISIONER), "{ob:?}");
        assert!(!ob.labels().contains_key(legacy::LABEL_PROVISIONER), "{ob:?}");
        let spec = raw_claims.get(name).await.unwrap().data["spec"].clone();
        let kept = &spec[legacy::OBJECT_BUCKET_NAME_FIELD];
        assert_eq!(kept, &json!(ob.name_any()), "the old binding field is kept: {spec}");
        let secret = s.secrets.get(name).await.unwrap();
        let config_map = s.config_maps.get(name).await.unwrap();
        assert!(secret.finalizers().is_empty() && config_map.finalizers().is_empty());
        let config = config_map.data.unwrap();
        assert_eq!(config["BUCKET_NAME"], claim.spec.bucket_name.clone().unwrap());
        assert_eq!(config["BUCKET_HOST"], format!("s3-{REGION}.amazonaws.com"));
    }
    let sources: Vec<String> = ["empty", "full", "grant"]
        .iter()
        .map(|n| s.claims.get(n))
        .collect::<futures::future::JoinAll<_>>()
        .await
        .into_iter()
        .map(|c| c.unwrap().annotations()[annotations::BUCKET_SOURCE].clone())
        .collect();
    assert_eq!(sources, ["new", "new", "existing"], "the old records prove the new buckets");
    assert!(s.moto.provisioned_users().await.is_empty(), "no user of ours beside the old ones");
    stop.store(true, Ordering::SeqCst);
    let (requests, failures) = reading.await.unwrap();
    assert!(requests > 10 && failures.is_empty(), "{requests} reads, failed: {failures:?}");

    // A rollback: the claim CRD kept the old binding field, so the old provisioner, started
    // again, finds every claim provisioned. A claim made meanwhile, which it binds, shows it has
    // gone through them all; it is the only one it provisions.
    controller.stop().await;
    let provisioned = "successfully created user and policy";
    let before_rollback = old.logged(provisioned);
    owner_keys(&s, &broad).await;
    old.start_again();
    let after_bucket = format!("after-{}", suffix());
    s.claim(
        "after",
        ObjectBucketClaimSpec {
            storage_class_name: class.clone(),
            bucket_name: Some(after_bucket.clone()),
            ..Default::default()
        },
    )
    .await;
    wait_phase(&s, "after", ClaimPhase::Bound, (&old, &proxy)).await;
    assert_eq!(old.logged(provisioned), before_rollback + 1, "{}", old.log_tail());
    for (name, (claim, _)) in &before {
        assert_eq!(phase(&s.claims, name).await, Some(ClaimPhase::Bound), "{name} after rollback");
        assert_eq!(buckets_of(&s, &claim.uid().unwrap()).await.len(), 1, "{name}");
    }
    let after_ob = s.buckets.get(&legacy::object_bucket_name(&s.ns, "after")).await.unwrap();
    let after_state = after_ob.spec.additional_state.unwrap_or_default();
    users.push(after_state.get("UserName").cloned().expect("the old provisioner's user"));
    old.stop();
    owner_keys(&s, &scoped).await;
    let controller = Harness::start_as(s.backend(), old_provisioner::NAME, Deployed::S3);

    s.wait_event("after", "Adopted").await;
    s.wait_for("after", ClaimPhase::Bound, "Bound").await;
    let names = ["empty", "full", "grant", "after"];

    // Least privilege without an outage: a rotation gives the app a key of the claim's own scoped
    // user, the old key works through the overlap, then the old user and its policy go.
    let full_uid = before["full"].0.uid().unwrap();
    let own_user = iam::user_name(&bucket_provisioner::user_id_for_claim(&full_uid));
    let old_full_user = s.buckets.get(&legacy::object_bucket_name(&s.ns, "full")).await.unwrap();
    let old_full_user = old_full_user.spec.additional_state.unwrap()["userName"].clone();
    let ask = json!({ "metadata": { "annotations": { annotations::ROTATE_CREDENTIALS: "m1" } } });
    s.claims.patch("full", &PatchParams::default(), &Patch::Merge(&ask)).await.unwrap();
    let new_keys = eventually("the claim's key replaced by one of its own user", || async {
        let keys = s.claim_keys("full").await;
        (keys != full_keys).then_some(keys)
    })
    .await;
    assert_eq!(s.moto.access_keys(&own_user).await, [new_keys.access_key_id.as_str()]);
    let new_s3 = s.moto.s3_in(&new_keys, REGION);
    new_s3.get_object().bucket(&full_bucket).key("data.txt").send().await.expect("new key reads");
    let elsewhere = new_s3.get_object().bucket(&static_bucket).key("shared.txt").send().await;
    assert!(elsewhere.is_err(), "the new key is scoped to the claim's bucket");
    eventually("the old user and policy retired after the overlap", || async {
        let gone = !s.moto.user_exists(&old_full_user).await
            && !local_policies(&s.moto).await.contains(&old_full_user);
        gone.then_some(())
    })
    .await;
    s.wait_for("full", ClaimPhase::Bound, "Bound").await;
    new_s3.get_object().bucket(&full_bucket).key("data.txt").send().await.expect("still reads");

    for name in names {
        s.delete_and_wait(name).await;
    }
    for user in &users {
        assert!(!s.moto.user_exists(user).await, "old user {user} is deleted");
        assert!(s.moto.access_keys(user).await.is_empty());
    }
    let policies = local_policies(&s.moto).await;
    assert!(users.iter().all(|u| !policies.contains(u)), "old policies are deleted: {policies:?}");
    assert!(s.moto.provisioned_users().await.is_empty(), "the claim's own user is deleted too");
    assert!(!s.moto.bucket_exists(&empty_bucket).await, "the empty bucket goes under Delete");
    assert!(!s.moto.bucket_exists(&full_bucket).await, "the full bucket goes under Delete");
    assert!(!s.moto.bucket_exists(&after_bucket).await, "so does the one bound on rollback");
    assert_eq!(s.moto.object_keys(&static_bucket).await, ["shared.txt"], "the granted one stays");
    for name in names {
        let ob = legacy::object_bucket_name(&s.ns, name);
        eventually(&format!("{name}'s Secret, ConfigMap and ObjectBucket gone"), || async {
            let gone = s.secrets.get_opt(name).await.unwrap().is_none()
                && s.config_maps.get_opt(name).await.unwrap().is_none()
                && s.buckets.get_opt(&ob).await.unwrap().is_none();
            gone.then_some(())
        })
        .await;
    }
    controller.stop().await;
    drop(proxy);
}

/// Old-style names, labels, finalizers and `additionalState` written by a tenant on its own
/// claim, Secret and ConfigMap adopt nothing, and neither does a claim whose `obc-` name is that
/// of another namespace's claim's ObjectBucket: both are provisioned as new claims, and the
/// other claim's ObjectBucket is left as it was.
#[tokio::test]
async fn tenants_writing_old_style_records_adopt_nothing() {
    let s = setup("s3-hostile").await;
    let controller = Harness::start(s.backend(), Deployed::S3);
    let owner = s.moto.least_privileged_owner(&format!("owner-{}", suffix())).await;
    s.owner_keys("owner", &owner).await;
    let class = s.class(&controller.provisioner, "owner", &[], Some("Delete")).await;
    let old_label = legacy::label_value(&controller.provisioner);

    // Namespace `<ns>-x`'s claim `c` and namespace `<ns>`'s claim `x-c` share the name
    // `obc-<ns>-x-c`; an ObjectBucket of that name (as the old provisioner would have written it,
    // cluster-scoped, so not the tenant's) is bound to a claim UID of the first namespace.
    let other_ns = format!("{}-x", s.ns);
    create_namespace(&s.client, &other_ns).await;
    let victim_ob = legacy::object_bucket_name(&s.ns, "x-c");
    let victim = ObjectBucket {
        metadata: ObjectMeta {
            name: Some(victim_ob.clone()),
            labels: Some(BTreeMap::from([(legacy::LABEL_PROVISIONER.into(), old_label.clone())])),
            ..Default::default()
        },
        spec: bucket_api::ObjectBucketSpec {
            storage_class_name: class.clone(),
            claim_ref: Some(ObjectReference {
                namespace: Some(s.ns.clone()),
                name: Some("x-c".into()),
                uid: Some("00000000-0000-4000-8000-000000000001".into()),
                ..Default::default()
            }),
            additional_state: Some(BTreeMap::from([("UserName".into(), "victim-abcde".into())])),
            ..Default::default()
        },
        status: None,
    };
    s.buckets.create(&PostParams::default(), &victim).await.unwrap();
    let squatter = ObjectBucketClaimSpec {
        storage_class_name: class.clone(),
        bucket_name: Some(format!("squat-{}", suffix())),
        ..Default::default()
    };
    let others: Api<ObjectBucketClaim> = Api::namespaced(s.client.clone(), &other_ns);
    let mut claim = ObjectBucketClaim::new("c", squatter);
    claim.labels_mut().insert(legacy::LABEL_PROVISIONER.into(), old_label.clone());
    claim.finalizers_mut().push(FINALIZER.into());
    others.create(&PostParams::default(), &claim).await.unwrap();

    // A claim dressed as an old one, with a Secret and ConfigMap of old style holding keys the
    // tenant knows.
    let forged = ObjectBucketClaimSpec {
        storage_class_name: class.clone(),
        bucket_name: Some(format!("forged-{}", suffix())),
        ..Default::default()
    };
    let mut claim = ObjectBucketClaim::new("forged", forged);
    claim.labels_mut().insert(legacy::LABEL_PROVISIONER.into(), old_label.clone());
    claim.finalizers_mut().push(FINALIZER.into());
    claim.annotations_mut().insert("additionalState".into(), "{\"UserName\":\"admin\"}".into());
    let claim = s.claims.create(&PostParams::default(), &claim).await.unwrap();
    let owned = claim.controller_owner_ref(&()).unwrap();
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("forged".into()),
            labels: Some(BTreeMap::from([(legacy::LABEL_PROVISIONER.into(), old_label.clone())])),
            finalizers: Some(vec![FINALIZER.into()]),
            owner_references: Some(vec![owned]),
            ..Default::default()
        },
        string_data: Some(BTreeMap::from([
            ("AWS_ACCESS_KEY_ID".into(), "AKIAFORGED".into()),
            ("AWS_SECRET_ACCESS_KEY".into(), "forged".into()),
        ])),
        ..Default::default()
    };
    s.secrets.create(&PostParams::default(), &secret).await.unwrap();

    let bound = s.wait_for("forged", ClaimPhase::Bound, "Bound").await;
    let keys = s.claim_keys("forged").await;
    assert_ne!(
        keys.access_key_id, "AKIAFORGED",
        "the forged key is replaced by one of the claim's"
    );
    assert_eq!(s.moto.access_keys(&format!("obc-{}", bound.uid().unwrap())).await.len(), 1);
    let squatted = eventually("the squatting claim Bound", || async {
        let claim = others.get("c").await.ok()?;
        (claim.status.as_ref()?.phase == Some(ClaimPhase::Bound)).then_some(claim)
    })
    .await;
    assert_ne!(squatted.spec.object_bucket_name.as_deref(), Some(victim_ob.as_str()));
    for (namespace, name) in [(s.ns.as_str(), "forged"), (other_ns.as_str(), "c")] {
        let events: Api<k8s_openapi::api::events::v1::Event> =
            Api::namespaced(s.client.clone(), namespace);
        let adopted = events.list(&ListParams::default()).await.unwrap().into_iter().any(|e| {
            e.reason.as_deref() == Some("Adopted")
                && e.regarding.and_then(|r| r.name).as_deref() == Some(name)
        });
        assert!(!adopted, "claim {namespace}/{name} adopted nothing");
    }
    let after = s.buckets.get(&victim_ob).await.unwrap();
    assert_eq!(after.labels(), victim.labels(), "the other claim's ObjectBucket is untouched");
    assert!(after.annotations().is_empty() && after.finalizers().is_empty());
    assert_eq!(after.spec.additional_state, victim.spec.additional_state);

    s.delete_and_wait("forged").await;
    others.delete("c", &Default::default()).await.unwrap();
    test_support::wait_claim_gone(&others, "c").await;
    s.buckets.delete(&victim_ob, &Default::default()).await.unwrap();
    controller.stop().await;
}
