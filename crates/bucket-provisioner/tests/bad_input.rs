//! Every kind of bad input ends in a specific condition and Event on its own claim, never in a
//! silent retry loop, and never disturbs a good claim next to it.

use std::collections::BTreeMap;

use bucket_api::{
    BUCKET_NAME_IMMUTABLE, ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec,
    STORAGE_CLASS_IMMUTABLE,
};
mod common;

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;
use test_support::{
    ControlPlane, claim_tenant, client_with_crds, eventually, test_namespace, unique_suffix,
};

struct Case {
    claim: &'static str,
    spec: ObjectBucketClaimSpec,
    phase: ClaimPhase,
    reason: &'static str,
    /// A phrase the condition message must contain, so the user learns what to fix.
    says: &'static str,
}

fn named(class: &str, bucket: &str) -> ObjectBucketClaimSpec {
    named_spec(class, bucket)
}

fn generated(class: &str, prefix: &str) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec { generate_bucket_name: Some(prefix.into()), ..claim_spec(class) }
}

fn with_config(class: &str, bucket: &str, key: &str, value: &str) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec {
        additional_config: Some(BTreeMap::from([(key.into(), value.into())])),
        ..named(class, bucket)
    }
}

fn case(
    claim: &'static str,
    spec: ObjectBucketClaimSpec,
    reason: &'static str,
    says: &'static str,
) -> Case {
    Case { claim, spec, phase: ClaimPhase::Failed, reason, says }
}

#[tokio::test]
async fn each_bad_input_gets_its_own_clear_condition() {
    let client = client_with_crds().await;
    let ns = test_namespace(&client, "bad").await;
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), &ns);
    let backend = MemoryBackend::default();
    backend.add_existing_bucket("someone-elses");
    let controller = Harness::start(backend.clone(), Deployed::HostPath);
    let p = controller.provisioner.clone();

    let class = storage_class(&client, &p, &[("tier", "gold")], None).await;
    let bad_param = storage_class(&client, &p, &[("colour", "blue")], None).await;
    let bad_class_bucket = storage_class(&client, &p, &[("bucketName", "Not_Valid")], None).await;
    let granting = storage_class(&client, &p, &[("bucketName", "granted-one")], None).await;
    let missing_grant = storage_class(&client, &p, &[("bucketName", "never-made")], None).await;
    let missing_class = format!("missing-{}", unique_suffix());

    let cases = vec![
        case("no-name", claim_spec(&class), "BucketNameMissing", "neither spec.bucketName"),
        case("short", named(&class, "ab"), "InvalidBucketName", "3 to 63"),
        case("long", named(&class, &"a".repeat(64)), "InvalidBucketName", "3 to 63"),
        case("upper", named(&class, "Upper-Case"), "InvalidBucketName", "lowercase"),
        case("underscore", named(&class, "under_score"), "InvalidBucketName", "lowercase"),
        case("leading-dash", named(&class, "-leading"), "InvalidBucketName", "start and end"),
        case("trailing-dash", named(&class, "trailing-"), "InvalidBucketName", "start and end"),
        case("dots", named(&class, "double..dot"), "InvalidBucketName", "adjacent periods"),
        case("ip", named(&class, "192.168.10.1"), "InvalidBucketName", "IP address"),
        case("ip-shaped", named(&class, "999.168.1.1"), "InvalidBucketName", "IP address"),
        case("punycode", named(&class, "xn--bucket"), "InvalidBucketName", "reserved"),
        case("alias", named(&class, "data-s3alias"), "InvalidBucketName", "reserved"),
        case("bad-prefix", generated(&class, "Bad_Prefix"), "InvalidGenerateBucketName", "valid"),
        case(
            "long-prefix",
            generated(&class, &"p".repeat(58)),
            "InvalidGenerateBucketName",
            "random suffix",
        ),
        case("bad-class-name", claim_spec(&bad_class_bucket), "InvalidStorageClass", "bucketName"),
        case("conflict", named(&granting, "other-bucket"), "BucketNameConflict", "differs"),
        case("unknown-param", named(&bad_param, "param-bucket"), "InvalidParameters", "colour"),
        case(
            "bad-quota",
            with_config(&class, "quota-bucket", "maxObjects", "lots"),
            "InvalidParameters",
            "whole number",
        ),
        case(
            "unknown-config",
            with_config(&class, "config-bucket", "colour", "red"),
            "InvalidParameters",
            "unknown additionalConfig",
        ),
        case("foreign-secret", named(&class, "fs-bucket"), "ForeignSecret", "left untouched"),
        case("foreign-config", named(&class, "fc-bucket"), "ForeignConfigMap", "left untouched"),
        case("not-ours", named(&class, "someone-elses"), "BucketNameTaken", "not available"),
        case("grant-missing", claim_spec(&missing_grant), "BucketNotFound", "does not exist"),
        Case {
            claim: "no-class",
            spec: named(&missing_class, "no-class-bucket"),
            phase: ClaimPhase::Pending,
            reason: "StorageClassNotFound",
            says: "not found",
        },
    ];

    // Objects in the way of two of the cases.
    let foreign_meta = |name: &str| ObjectMeta { name: Some(name.into()), ..Default::default() };
    Api::<Secret>::namespaced(client.clone(), &ns)
        .create(
            &PostParams::default(),
            &Secret { metadata: foreign_meta("foreign-secret"), ..Default::default() },
        )
        .await
        .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .create(
            &PostParams::default(),
            &ConfigMap { metadata: foreign_meta("foreign-config"), ..Default::default() },
        )
        .await
        .unwrap();
    // A good claim among the bad ones must bind as usual.
    create_claim(&claims, "good", named(&class, "good-bucket")).await;
    for case in &cases {
        create_claim(&claims, case.claim, case.spec.clone()).await;
    }

    assert!(cases.len() >= 20);
    for case in &cases {
        let claim = wait_for(&claims, case.claim, case.phase, case.reason).await;
        let condition = ready(&claim).unwrap();
        assert_eq!(condition.status, "False");
        assert!(
            condition.message.contains(case.says),
            "{}: message {:?} does not say {:?}",
            case.claim,
            condition.message,
            case.says
        );
        assert_eq!(claim.status.as_ref().unwrap().observed_generation, claim.metadata.generation);
        wait_event(&client, &ns, case.claim, case.reason).await;
    }
    wait_for(&claims, "good", ClaimPhase::Bound, "Bound").await;

    // Nothing was created for any bad claim but those the cluster alone cannot refuse: the two
    // only the backend can detect, and the two whose Secret or ConfigMap is someone else's (the
    // controller caches only its own, and finds a foreign one when writing: a bucket is made,
    // the foreign object is left untouched, and deleting the claim removes the bucket).
    let mut touched: Vec<String> = backend.all_calls().into_iter().map(|(_, b)| b).collect();
    touched.sort();
    touched.dedup();
    assert_eq!(touched, ["fc-bucket", "fs-bucket", "good-bucket", "never-made", "someone-elses"]);
    let foreign = Api::<Secret>::namespaced(client.clone(), &ns).get("foreign-secret").await;
    assert_eq!(foreign.unwrap().data, None, "the foreign Secret was not written");
}

#[tokio::test]
async fn a_claim_too_long_for_the_conventional_object_bucket_name_binds_under_a_unique_one() {
    let client = client_with_crds().await;
    // A long namespace and claim name: `obc-<namespace>-<name>` would pass 253 characters.
    let ns = test_namespace(&client, &"long-namespace-".repeat(4)[..52]).await;
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), &ns);
    let backend = MemoryBackend::default();
    let controller = Harness::start(backend.clone(), Deployed::HostPath);
    let class = storage_class(&client, &controller.provisioner, &[], None).await;
    let name = "c".repeat(200);
    create_claim(&claims, &name, named(&class, "long-claim")).await;
    let claim = wait_for(&claims, &name, ClaimPhase::Bound, "Bound").await;
    let ob_name = claim.spec.object_bucket_name.clone().unwrap();
    assert!(ob_name.len() <= 253 && ob_name.starts_with(&format!("obc-{ns}-ccc")), "{ob_name}");
    let ob = Api::<ObjectBucket>::all(client.clone()).get(&ob_name).await.unwrap();
    assert_eq!(ob.spec.claim_ref.unwrap().uid, claim.metadata.uid);
}

/// The apiserver's refusal of an edit of claim `name`: its message, after checking that it is
/// the CRD's validation (422) and not a lack of rights.
async fn refused(claims: &Api<ObjectBucketClaim>, name: &str, patch: serde_json::Value) -> String {
    let params = PatchParams::default();
    match claims.patch(name, &params, &Patch::Merge(&patch)).await {
        Err(kube::Error::Api(status)) if status.code == 422 => status.message,
        other => panic!("the edit {patch} of claim {name} was not refused as invalid: {other:?}"),
    }
}

/// A claim's `storageClassName` and `bucketName` cannot change once set: the apiserver refuses
/// the edit (the CRD's transition rules) with a message saying so, to a tenant as to an
/// administrator, and the claim stays Bound to what it was. Setting `bucketName` where it was
/// unset is allowed, and so is replacing a generated name until the claim is bound (what the
/// controller does when the backend finds a generated name taken).
#[tokio::test]
async fn a_claims_class_and_bucket_name_cannot_change_once_set() {
    let client = client_with_crds().await;
    let ns = test_namespace(&client, "bad-bound").await;
    let tenant = claim_tenant(ControlPlane::shared(), &ns).await.unwrap();
    let claims: Api<ObjectBucketClaim> = Api::namespaced(tenant, &ns);
    let admin: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), &ns);
    let backend = MemoryBackend::default();
    let controller = Harness::start(backend.clone(), Deployed::HostPath);
    let class = storage_class(&client, &controller.provisioner, &[], None).await;
    let other = storage_class(&client, &controller.provisioner, &[], None).await;
    create_claim(&claims, "c", named(&class, "first-name")).await;
    wait_for(&claims, "c", ClaimPhase::Bound, "Bound").await;

    let edits = [
        (json!({ "spec": { "bucketName": "second-name" } }), BUCKET_NAME_IMMUTABLE),
        (json!({ "spec": { "bucketName": "" } }), BUCKET_NAME_IMMUTABLE),
        (json!({ "spec": { "bucketName": null } }), BUCKET_NAME_IMMUTABLE),
        (json!({ "spec": { "storageClassName": other } }), STORAGE_CLASS_IMMUTABLE),
    ];
    for (patch, says) in &edits {
        for api in [&claims, &admin] {
            let message = refused(api, "c", patch.clone()).await;
            assert!(message.contains(says), "{patch}: {message}");
        }
    }
    // Any other edit passes, and the claim stays bound to what it was.
    let change = json!({ "spec": { "additionalConfig": { "maxObjects": "10" } } });
    claims.patch("c", &PatchParams::default(), &Patch::Merge(&change)).await.unwrap();
    eventually("the new additionalConfig applied", || async {
        backend
            .updates()
            .iter()
            .any(|u| u.get("maxObjects").map(String::as_str) == Some("10"))
            .then_some(())
    })
    .await;
    let bound = wait_for(&claims, "c", ClaimPhase::Bound, "Bound").await;
    assert_eq!(
        (bound.spec.bucket_name.as_deref(), bound.spec.storage_class_name.as_str()),
        (Some("first-name"), class.as_str())
    );
    assert_eq!(backend.buckets().len(), 1, "no bucket was created for the edits");
    controller.stop().await;

    // Unset, a bucket name may be set once (by the tenant, or by the controller from
    // `generateBucketName`), and not changed afterwards.
    create_claim(&claims, "unset", claim_spec("no-such-class")).await;
    let set = json!({ "spec": { "bucketName": "chosen-later" } });
    claims.patch("unset", &PatchParams::default(), &Patch::Merge(&set)).await.unwrap();
    let message = refused(&claims, "unset", json!({ "spec": { "bucketName": "again" } })).await;
    assert!(message.contains(BUCKET_NAME_IMMUTABLE), "{message}");

    // A generated name may be replaced by another of its prefix until the claim is bound:
    // by this controller (it records the access mode in the status of every claim it binds)
    // or by lib-bucket-provisioner (its binding field).
    let generated = ObjectBucketClaimSpec {
        bucket_name: Some("gen-aaaa".into()),
        ..generated("no-such-class", "gen")
    };
    create_claim(&claims, "gen", generated.clone()).await;
    let replace = |name: &str| json!({ "spec": { "bucketName": name } });
    claims
        .patch("gen", &PatchParams::default(), &Patch::Merge(&replace("gen-bbbb")))
        .await
        .unwrap();
    let message = refused(&claims, "gen", replace("other-bbbb")).await;
    assert!(message.contains(BUCKET_NAME_IMMUTABLE), "not of its prefix: {message}");
    let bound_here = json!({ "status": { "accessMode": "ReadWrite" } });
    admin.patch_status("gen", &PatchParams::default(), &Patch::Merge(&bound_here)).await.unwrap();
    let message = refused(&claims, "gen", replace("gen-cccc")).await;
    assert!(message.contains(BUCKET_NAME_IMMUTABLE), "bound here: {message}");
    create_claim(&claims, "old-gen", generated).await;
    let bound_by_the_library =
        json!({ "spec": { "ObjectBucketName": format!("obc-{ns}-old-gen") } });
    admin
        .patch("old-gen", &PatchParams::default(), &Patch::Merge(&bound_by_the_library))
        .await
        .unwrap();
    let message = refused(&claims, "old-gen", replace("gen-cccc")).await;
    assert!(message.contains(BUCKET_NAME_IMMUTABLE), "bound by the library: {message}");
}

/// A backend that panics on one claim fails that claim (Failed, InternalError, an Event naming
/// the panic) and the controller goes on: another claim binds, and the failed one binds once
/// it is changed.
#[tokio::test]
async fn a_panic_on_one_claim_fails_that_claim_and_the_controller_goes_on() {
    let client = client_with_crds().await;
    let ns = test_namespace(&client, "bad-panic").await;
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), &ns);
    let backend = MemoryBackend::default();
    backend.inject(Op::Provision, Fault::Panic, 1);
    let controller = Harness::start(backend.clone(), Deployed::HostPath);
    let class = storage_class(&client, &controller.provisioner, &[], None).await;

    create_claim(&claims, "boom", named(&class, "boom-bucket")).await;
    let failed = wait_for(&claims, "boom", ClaimPhase::Failed, "InternalError").await;
    let message = &ready(&failed).unwrap().message;
    assert!(message.contains("injected Provision panic"), "{message}");
    wait_event(&client, &ns, "boom", "InternalError").await;

    create_claim(&claims, "next", named(&class, "next-bucket")).await;
    wait_for(&claims, "next", ClaimPhase::Bound, "Bound").await;
    let change = json!({ "spec": { "additionalConfig": { "maxObjects": "10" } } });
    claims.patch("boom", &PatchParams::default(), &Patch::Merge(&change)).await.unwrap();
    wait_for(&claims, "boom", ClaimPhase::Bound, "Bound").await;
}
