//! Sharing a bucket across namespaces end to end: `hostpath-bucket-provisioner` as a real
//! process with the RBAC of `deploy/hostpath/`, the owner's namespace consenting through a
//! `BucketShareGrant` written by its admin (the `admin` role, as aggregated), the reader a
//! namespace-scoped identity using nothing but its claim's Secret and ConfigMap.

mod harness;

use std::collections::BTreeMap;

use bucket_api::{AccessMode, BucketShareGrant, ClaimPhase};
use harness::share::*;
use harness::*;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use test_support::{ControlPlane, eventually};

async fn list(s3: &aws_sdk_s3::Client, bucket: &str) -> Result<usize, String> {
    let listed = s3.list_objects_v2().bucket(bucket).send().await;
    listed
        .map(|l| l.contents().len())
        .map_err(|e| e.into_service_error().meta().code().unwrap_or("unknown").to_string())
}

#[tokio::test]
async fn a_reader_namespace_binds_through_a_grant_and_loses_its_key_when_consent_goes() {
    let env = Env::new("hp-xns").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[ALLOW], "Delete").await;
    env.claim("app", &class, None).await;
    env.claim("elsewhere", &class, None).await;
    env.wait("app", ClaimPhase::Bound, "Bound").await;
    env.wait("elsewhere", ClaimPhase::Bound, "Bound").await;
    let (app, bucket) = env.s3_for("app").await;
    let (elsewhere, other_bucket) = env.s3_for("elsewhere").await;
    put(&app, &bucket, "data.csv", b"shared data").await.unwrap();
    put(&elsewhere, &other_bucket, "private", b"not shared").await.unwrap();

    let admin = namespace_role(&env.client, &env.ns, "admin").await;
    let editor = namespace_role(&env.client, &env.ns, "edit").await;
    let reader = env.scoped_tenant("hp-xns-reader").await;
    let from = format!("{}/app", env.ns);

    // Without a grant: refused as a missing claim is, nothing issued.
    reader.create("reader", sharing(&class, &from)).await;
    let refused = reader.wait("reader", ClaimPhase::Failed, "ShareSourceNotFound").await;
    assert!(reader.secret("reader").await.is_none());

    // An editor of the owner's namespace cannot consent; its admin can.
    let consent = grant("share-app", "app", &[(&reader.ns, None, None)]);
    let editors: Api<BucketShareGrant> = Api::namespaced(editor.clone(), &env.ns);
    let denied = editors.create(&PostParams::default(), &consent).await.unwrap_err();
    assert!(matches!(&denied, kube::Error::Api(s) if s.code == 403), "{denied:?}");
    create_grant(&admin, &env.ns, &consent).await;

    let bound = reader.wait("reader", ClaimPhase::Bound, "Bound").await;
    assert_eq!(bound.status.unwrap().access_mode, Some(AccessMode::ReadOnly));
    let (reader_s3, reader_bucket) = reader.s3_for("reader").await;
    assert_eq!(reader_bucket, bucket);
    let key_of = |env: BTreeMap<String, String>| {
        (env["AWS_ACCESS_KEY_ID"].clone(), env["AWS_SECRET_ACCESS_KEY"].clone())
    };
    let first_key = key_of(reader.env_of("reader").await);
    assert_ne!(first_key, key_of(env.env_of("app").await), "a key of its own");
    assert_eq!(get(&reader_s3, &bucket, "data.csv").await.unwrap(), b"shared data");
    assert_eq!(list(&reader_s3, &bucket).await, Ok(1));
    assert_eq!(put(&reader_s3, &bucket, "x", b"x").await, Err("AccessDenied".into()));
    assert_eq!(get(&reader_s3, &other_bucket, "private").await, Err("AccessDenied".into()));
    put(&app, &bucket, "owner-still-writes", b"w").await.unwrap();
    let grants: Api<BucketShareGrant> = Api::namespaced(admin.clone(), &env.ns);
    let accepted = grants.get("share-app").await.unwrap().status.unwrap().conditions;
    assert!(accepted.iter().any(|c| c.type_ == "Accepted" && c.status == "True"), "{accepted:?}");

    // Widened, then narrowed while bound: the key follows within seconds.
    let mode = |m: &str| json_patch_mode(&reader.ns, m);
    grants
        .patch("share-app", &PatchParams::default(), &Patch::Merge(mode("ReadWrite")))
        .await
        .unwrap();
    eventually("the reader's key to write", || async {
        put(&reader_s3, &bucket, "from-reader", b"r").await.ok()
    })
    .await;
    grants
        .patch("share-app", &PatchParams::default(), &Patch::Merge(mode("ReadOnly")))
        .await
        .unwrap();
    eventually("the reader's key to be read-only again", || async {
        (put(&reader_s3, &bucket, "y", b"y").await == Err("AccessDenied".into())).then_some(())
    })
    .await;

    // Grant deleted: the key stops, the claim says why, the owner's data stays.
    grants.delete("share-app", &DeleteParams::default()).await.unwrap();
    let withdrawn = reader.wait("reader", ClaimPhase::Failed, "ShareWithdrawn").await;
    assert!(ready_message(&withdrawn).contains("access was withdrawn"));
    eventually("the reader's key to stop", || async {
        (get(&reader_s3, &bucket, "data.csv").await == Err("InvalidAccessKeyId".into()))
            .then_some(())
    })
    .await;
    assert!(reader.secret("reader").await.is_none(), "no dead key left in a Secret");
    assert_eq!(get(&app, &bucket, "from-reader").await.unwrap(), b"r");

    // Restored: bound again, with a new key.
    create_grant(&admin, &env.ns, &consent).await;
    reader.wait("reader", ClaimPhase::Bound, "Bound").await;
    let second_key = key_of(reader.env_of("reader").await);
    assert_ne!(second_key.1, first_key.1, "a new secret");
    let revoked = reader_s3;
    let (reader_s3, _) = reader.s3_for("reader").await;
    assert_eq!(get(&reader_s3, &bucket, "data.csv").await.unwrap(), b"shared data");
    assert!(get(&revoked, &bucket, "data.csv").await.is_err(), "the withdrawn key stays dead");

    // The operator withdraws: StorageClass parameters cannot change, so the class is replaced.
    let classes: Api<StorageClass> = Api::all(env.client.clone());
    let mut replaced = classes.get(&class).await.unwrap();
    classes.delete(&class, &DeleteParams::default()).await.unwrap();
    eventually("the class to go", || async {
        classes.get_opt(&class).await.unwrap().is_none().then_some(())
    })
    .await;
    replaced.metadata = ObjectMeta { name: Some(class.clone()), ..Default::default() };
    replaced.parameters = Some(BTreeMap::new());
    classes.create(&PostParams::default(), &replaced).await.unwrap();
    reader.wait("reader", ClaimPhase::Failed, "ShareWithdrawn").await;
    eventually("the reader's key to stop", || async {
        (get(&reader_s3, &bucket, "data.csv").await == Err("InvalidAccessKeyId".into()))
            .then_some(())
    })
    .await;
    assert_eq!(get(&app, &bucket, "data.csv").await.unwrap(), b"shared data");
    reader.delete("reader").await;
    let _ = refused;
}

/// Whether `put` of `s3` into `bucket` is refused throughout `period` (checked every 200 ms).
async fn never_writes(s3: &aws_sdk_s3::Client, bucket: &str, period: std::time::Duration) -> bool {
    let until = std::time::Instant::now() + period;
    while std::time::Instant::now() < until {
        if put(s3, bucket, "widened", b"w").await != Err("AccessDenied".into()) {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    true
}

/// The reasons of the Events on claim `name` of namespace `ns`.
async fn event_reasons(client: &kube::Client, ns: &str, name: &str) -> Vec<String> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    let listed = events.list(&Default::default()).await.unwrap().items;
    listed
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter_map(|e| e.reason)
        .collect()
}

/// Readers that break their own claims (an `accessMode` that is no mode, which fails every
/// reconcile of them) still have their keys narrowed: when the owner's admin narrows the
/// grant, and when the operator lowers its class's `limitAccessMode`. Each claim goes on
/// saying what is wrong with it; nothing it does widens its key back.
#[tokio::test]
async fn a_reader_that_breaks_its_own_claim_is_narrowed_all_the_same() {
    let env = Env::new("hp-xns-narrow").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[ALLOW], "Delete").await;
    // The second reader's own class, which the operator will narrow.
    let open = env.class(&[], "Delete").await;
    env.claim("app", &class, None).await;
    env.wait("app", ClaimPhase::Bound, "Bound").await;
    let (app, bucket) = env.s3_for("app").await;
    put(&app, &bucket, "data.csv", b"shared data").await.unwrap();
    let admin = namespace_role(&env.client, &env.ns, "admin").await;
    let first = env.scoped_tenant("hp-xns-narrow-a").await;
    let second = env.scoped_tenant("hp-xns-narrow-b").await;
    let to = |first_mode| {
        [(first.ns.as_str(), None, Some(first_mode)), (second.ns.as_str(), None, Some("ReadWrite"))]
    };
    create_grant(&admin, &env.ns, &grant("share-app", "app", &to("ReadWrite"))).await;
    let from = format!("{}/app", env.ns);
    let mut readers = Vec::new();
    for (tenant, class) in [(&first, &class), (&second, &open)] {
        tenant.create("reader", sharing(class, &from)).await;
        let bound = tenant.wait("reader", ClaimPhase::Bound, "Bound").await;
        assert_eq!(bound.status.unwrap().access_mode, Some(AccessMode::ReadWrite));
        let (s3, _) = tenant.s3_for("reader").await;
        put(&s3, &bucket, "from-reader", b"r").await.expect("a read-write key writes");
        // The tenant breaks its own claim: each reconcile of it fails from now on.
        let broken = serde_json::json!({ "spec": { "additionalConfig": {
            "shareFrom": from, "accessMode": "Everything" } } });
        let params = PatchParams::default();
        tenant.claims.patch("reader", &params, &Patch::Merge(&broken)).await.unwrap();
        tenant.wait("reader", ClaimPhase::Failed, "InvalidParameters").await;
        put(&s3, &bucket, "still", b"s").await.expect("nothing narrowed it yet");
        readers.push(s3);
    }

    // The owner's admin narrows the grant of the first: its key can no longer write.
    let grants: Api<BucketShareGrant> = Api::namespaced(admin.clone(), &env.ns);
    let narrowed = serde_json::json!({ "spec": { "to": to("ReadOnly").iter()
        .map(|(ns, _, mode)| serde_json::json!({ "namespace": ns, "accessMode": mode }))
        .collect::<Vec<_>>() } });
    grants.patch("share-app", &PatchParams::default(), &Patch::Merge(&narrowed)).await.unwrap();
    eventually("the first reader's key to be read-only", || async {
        (put(&readers[0], &bucket, "y", b"y").await == Err("AccessDenied".into())).then_some(())
    })
    .await;
    assert_eq!(get(&readers[0], &bucket, "data.csv").await.unwrap(), b"shared data");
    // It still says what is wrong with it, and what its key may do now.
    let failed = eventually("the first reader's status to say ReadOnly", || async {
        let claim = first.claims.get("reader").await.ok()?;
        let status = claim.status.as_ref()?;
        (status.access_mode == Some(AccessMode::ReadOnly)).then_some(claim)
    })
    .await;
    assert_eq!(failed.status.as_ref().unwrap().phase, Some(ClaimPhase::Failed));
    assert!(ready_message(&failed).contains("Everything"), "{}", ready_message(&failed));
    eventually("an AccessNarrowed Event beside the claim's own error", || async {
        let reasons = event_reasons(&env.client, &first.ns, "reader").await;
        (reasons.iter().any(|r| r == "AccessNarrowed")
            && reasons.iter().any(|r| r == "InvalidParameters"))
        .then_some(())
    })
    .await;
    // The grant widened again: the broken claim gets nothing back through it.
    grants
        .patch(
            "share-app",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({
        "spec": { "to": [{ "namespace": first.ns, "accessMode": "ReadWrite" },
                         { "namespace": second.ns, "accessMode": "ReadWrite" }] } })),
        )
        .await
        .unwrap();
    assert!(never_writes(&readers[0], &bucket, std::time::Duration::from_secs(5)).await);
    put(&readers[1], &bucket, "second", b"2").await.expect("the other reader is untouched");

    // The operator lowers the second reader's class to read-only (StorageClass parameters
    // cannot change, so the class is replaced): its key follows.
    let classes: Api<StorageClass> = Api::all(env.client.clone());
    let mut replaced = classes.get(&open).await.unwrap();
    classes.delete(&open, &DeleteParams::default()).await.unwrap();
    eventually("the class to go", || async {
        classes.get_opt(&open).await.unwrap().is_none().then_some(())
    })
    .await;
    replaced.metadata = ObjectMeta { name: Some(open.clone()), ..Default::default() };
    replaced.parameters = Some(BTreeMap::from([("limitAccessMode".into(), "ReadOnly".into())]));
    classes.create(&PostParams::default(), &replaced).await.unwrap();
    eventually("the second reader's key to be read-only", || async {
        (put(&readers[1], &bucket, "z", b"z").await == Err("AccessDenied".into())).then_some(())
    })
    .await;
    assert_eq!(get(&readers[1], &bucket, "data.csv").await.unwrap(), b"shared data");
    second.wait("reader", ClaimPhase::Failed, "InvalidParameters").await;
    put(&app, &bucket, "owner-writes", b"o").await.expect("the owner's key is untouched");
}

fn json_patch_mode(namespace: &str, mode: &str) -> serde_json::Value {
    serde_json::json!({ "spec": { "to": [{ "namespace": namespace, "accessMode": mode }] } })
}

/// Every way of not being let in answers exactly as a claim that names nothing does, and
/// nothing is issued.
#[tokio::test]
async fn every_refusal_across_namespaces_looks_the_same() {
    let env = Env::new("hp-xns-refuse").await;
    let _provisioner = env.start("node-a");
    let allowing = env.class(&[ALLOW], "Delete").await;
    let closed = env.class(&[], "Delete").await;
    env.claim("app", &allowing, None).await;
    env.claim("unshared", &closed, None).await;
    env.wait("app", ClaimPhase::Bound, "Bound").await;
    env.wait("unshared", ClaimPhase::Bound, "Bound").await;
    let admin = namespace_role(&env.client, &env.ns, "admin").await;
    let reader = env.scoped_tenant("hp-xns-r").await;
    let third = env.tenant("hp-xns-third").await;
    let third_admin = namespace_role(&env.client, &third.ns, "admin").await;

    // A grant of another claim, one letting in another namespace, one for the closed class's
    // claim, and one in a third namespace naming the owner's claim.
    create_grant(&admin, &env.ns, &grant("other", "no-such", &[(&reader.ns, None, None)])).await;
    create_grant(&admin, &env.ns, &grant("third", "app", &[(&third.ns, None, None)])).await;
    create_grant(&admin, &env.ns, &grant("closed", "unshared", &[(&reader.ns, None, None)])).await;
    create_grant(&third_admin, &third.ns, &grant("fake", "app", &[(&reader.ns, None, None)])).await;
    let attempts = [
        ("no-such-ns", "no-such-namespace/app".to_string()),
        ("no-grant", format!("{}/app", env.ns)),
        ("wrong-claim", format!("{}/no-such", env.ns)),
        ("closed-class", format!("{}/unshared", env.ns)),
        ("third-ns", format!("{}/app", third.ns)),
    ];
    for (name, from) in &attempts {
        reader.create(name, sharing(&allowing, from)).await;
    }
    let mut shapes = Vec::new();
    for (name, from) in &attempts {
        let claim = reader.wait(name, ClaimPhase::Failed, "ShareSourceNotFound").await;
        shapes.push(ready_message(&claim).replace(&format!("{from:?}"), "N"));
        assert!(reader.secret(name).await.is_none(), "{name} got no key");
    }
    assert!(shapes.windows(2).all(|w| w[0] == w[1]), "{shapes:#?}");
    // The same words as a miss inside a namespace.
    env.home().create("local-miss", sharing(&allowing, "no-such-claim")).await;
    let local = env.wait("local-miss", ClaimPhase::Failed, "ShareSourceNotFound").await;
    assert_eq!(ready_message(&local).replace("\"no-such-claim\"", "N"), shapes[0]);
}

/// The owner's deletion: under Delete the reader turns `BucketLost` first and no key outlives
/// the bucket; under Retain the bucket stays and the reader's key is withdrawn with it.
#[tokio::test]
async fn deleting_the_owner_leaves_no_reader_key_under_either_policy() {
    let env = Env::new("hp-xns-owner").await;
    let _provisioner = env.start("node-a");
    let admin = namespace_role(&env.client, &env.ns, "admin").await;
    let reader = env.scoped_tenant("hp-xns-lost").await;
    for (policy, owner, outcome) in
        [("Delete", "deleted", "BucketLost"), ("Retain", "retained", "ShareWithdrawn")]
    {
        let class = env.class(&[ALLOW], policy).await;
        env.claim(owner, &class, None).await;
        env.wait(owner, ClaimPhase::Bound, "Bound").await;
        let (_, bucket) = env.s3_for(owner).await;
        let consent = grant(owner, owner, &[(&reader.ns, Some(owner), Some("ReadWrite"))]);
        create_grant(&admin, &env.ns, &consent).await;
        reader.create(owner, sharing(&class, &format!("{}/{owner}", env.ns))).await;
        reader.wait(owner, ClaimPhase::Bound, "Bound").await;
        let (reader_s3, _) = reader.s3_for(owner).await;
        put(&reader_s3, &bucket, "w", b"w").await.unwrap();

        env.delete(owner).await;
        reader.wait(owner, ClaimPhase::Failed, outcome).await;
        assert_eq!(env.bucket_dir(&bucket).exists(), policy == "Retain", "{policy}");
        eventually("the reader's key to stop", || async {
            (get(&reader_s3, &bucket, "w").await == Err("InvalidAccessKeyId".into())).then_some(())
        })
        .await;
        reader.delete(owner).await;
    }
    let keys = std::fs::read_dir(env.root.path().join(".provisioner/keys")).unwrap().count();
    assert_eq!(keys, 0, "no key left behind");
}

/// Wildcards, path tricks, unknown modes and kinds, and lists over the cap never reach the
/// controller through an apiserver with the schema (the controller's own check of each, for
/// grants that do, is in `grant_rules`).
#[tokio::test]
async fn a_hostile_grant_is_refused_by_the_schema() {
    let env = Env::new("hp-xns-hostile").await;
    let admin = namespace_role(&env.client, &env.ns, "admin").await;
    let grants: Api<BucketShareGrant> = Api::namespaced(admin.clone(), &env.ns);
    let many: Vec<(&str, Option<&str>, Option<&str>)> = vec![("b", None, None); 65];
    let mut unknown_kind = grant("kind", "app", &[("b", None, None)]);
    unknown_kind.spec.to[0].kind = Some("Pod".into());
    for hostile in [
        grant("wild", "app", &[("*", None, None)]),
        grant("path", "../app", &[("b", None, None)]),
        grant("claim-path", "app", &[("b", Some("a/../../b"), None)]),
        grant("mode", "app", &[("b", None, Some("Admin"))]),
        grant("many", "app", &many),
        unknown_kind,
    ] {
        let name = hostile.metadata.name.clone().unwrap();
        let refused = eventually("the apiserver's answer", || async {
            match grants.create(&PostParams::default(), &hostile).await {
                Err(kube::Error::Api(s)) if s.code == 403 => None,
                other => Some(other),
            }
        })
        .await;
        assert!(
            matches!(&refused, Err(kube::Error::Api(s)) if s.code == 422),
            "{name}: {refused:?}"
        );
    }
}

/// Grants written past the schema (as before it had its checks, here with the checks taken off
/// on a control plane of its own): each says on its status and in an Event why it grants
/// nothing, and a reader it would have let in is refused as if it did not exist.
#[tokio::test]
async fn a_grant_past_the_schema_is_read_as_hostile_input_and_grants_nothing() {
    use k8s_openapi::api::events::v1::Event;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceDefinition, JSONSchemaProps,
    };
    use kube::api::{ApiResource, DynamicObject};

    let plane = ControlPlane::start().expect("starting a control plane of our own");
    let env = Env::on(&plane, "hp-xns-past").await;
    let _provisioner = env.start("node-a");
    // The schema as an older one: `spec` anything at all.
    let mut crd = bucket_api::crd_files()
        .into_iter()
        .find(|f| f.crd.spec.group == bucket_api::SHARING_GROUP)
        .unwrap()
        .crd;
    let schema = crd.spec.versions[0].schema.as_mut().unwrap();
    let root = schema.open_api_v3_schema.as_mut().unwrap();
    root.properties.as_mut().unwrap().insert(
        "spec".into(),
        JSONSchemaProps {
            type_: Some("object".into()),
            x_kubernetes_preserve_unknown_fields: Some(true),
            ..Default::default()
        },
    );
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    let params = PatchParams::apply("bucket-provisioner-tests").force();
    crds.patch(&crd.metadata.name.clone().unwrap(), &params, &Patch::Apply(&crd)).await.unwrap();

    let class = env.class(&[ALLOW], "Delete").await;
    env.claim("app", &class, None).await;
    env.wait("app", ClaimPhase::Bound, "Bound").await;
    let admin = role_on(&plane, &env.client, &env.ns, "admin").await;
    let reader = env.tenant("hp-xns-past-reader").await;
    let rn = reader.ns.as_str();
    let many: Vec<(&str, Option<&str>, Option<&str>)> = vec![(rn, None, None); 65];
    let mut pod = grant("kind", "app", &[(rn, None, None)]);
    pod.spec.to[0].kind = Some("Pod".into());
    let hostile = [
        (grant("wild", "app", &[(rn, None, None), ("*", None, None)]), "wildcards"),
        (grant("path", "../app", &[(rn, None, None)]), "claimName \"../app\" is not a valid"),
        (grant("claim-path", "app", &[(rn, Some("a/../b"), None)]), "to[0].claimName"),
        (grant("mode", "app", &[(rn, None, Some("Admin"))]), "to[0].accessMode \"Admin\""),
        (grant("many", "app", &many), "more than the 64"),
        (pod, "to[0].kind \"Pod\" is not supported"),
    ];
    let grants: Api<BucketShareGrant> = Api::namespaced(admin.clone(), &env.ns);
    for (grant, _) in &hostile {
        eventually("the grant past the schema to be written", || async {
            grants.create(&PostParams::default(), grant).await.ok()
        })
        .await;
    }
    // Fields of the wrong type: each grant refused on its own, the others still read.
    let raw: Api<DynamicObject> =
        Api::namespaced_with(admin.clone(), &env.ns, &ApiResource::erase::<BucketShareGrant>(&()));
    let mistyped = [
        ("not-a-list", serde_json::json!({ "claimName": "app", "to": "everyone" })),
        ("number", serde_json::json!({ "claimName": 7, "to": [{ "namespace": rn }] })),
    ];
    for (name, spec) in &mistyped {
        let object = DynamicObject::new(name, &ApiResource::erase::<BucketShareGrant>(&()))
            .data(serde_json::json!({ "spec": spec }));
        raw.create(&PostParams::default(), &object).await.unwrap();
    }
    let mut hostile: Vec<(BucketShareGrant, &str)> = hostile.into_iter().collect();
    for (name, why) in [
        ("not-a-list", "to[0].namespace \"<not a string>\" is not a valid name"),
        ("number", "claimName \"<not a string>\" is not a valid name"),
    ] {
        hostile.push((grant(name, "", &[]), why));
    }
    reader.create("reader", sharing(&class, &format!("{}/app", env.ns))).await;
    let events: Api<Event> = Api::namespaced(env.client.clone(), &env.ns);
    for (grant, why) in &hostile {
        let name = grant.metadata.name.clone().unwrap();
        let condition = eventually("the grant's Accepted condition", || async {
            let status = grants.get(&name).await.ok()?.status?;
            status.conditions.into_iter().find(|c| c.type_ == "Accepted")
        })
        .await;
        assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("False", "Invalid"));
        assert!(condition.message.contains(why), "{name}: {}", condition.message);
        assert!(condition.message.len() < 400, "a hostile value is quoted short");
        eventually("an Event on the grant", || async {
            let listed = events.list(&Default::default()).await.ok()?;
            listed.items.into_iter().find(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str())
                    && e.reason.as_deref() == Some("InvalidGrant")
            })
        })
        .await;
    }
    reader.wait("reader", ClaimPhase::Failed, "ShareSourceNotFound").await;
    assert!(reader.secret("reader").await.is_none(), "nothing granted");
}

/// SIGKILL (an abort at a crash point) at each step of withdrawing a reader's key: the restarted
/// process finishes the withdrawal, no key is left behind and none is missing, and the reader
/// binds again once the grant is back.
#[tokio::test]
async fn a_crash_at_each_step_of_a_withdrawal_leaves_no_key_behind() {
    use bucket_api::ObjectBucket;
    use bucket_provisioner::kubernetes::crash_point::WITHDRAW_STEPS;
    use std::os::unix::process::ExitStatusExt;
    use std::time::Duration;

    let env = Env::new("hp-xns-crash").await;
    let mut provisioner = env.start("node-a");
    let class = env.class(&[ALLOW], "Delete").await;
    env.claim("app", &class, None).await;
    env.wait("app", ClaimPhase::Bound, "Bound").await;
    let (app, bucket) = env.s3_for("app").await;
    put(&app, &bucket, "data.csv", b"kept").await.unwrap();
    let admin = namespace_role(&env.client, &env.ns, "admin").await;
    let grants: Api<BucketShareGrant> = Api::namespaced(admin.clone(), &env.ns);
    let reader = env.scoped_tenant("hp-xns-crash-r").await;
    let consent = grant("share", "app", &[(&reader.ns, None, None)]);
    create_grant(&admin, &env.ns, &consent).await;
    reader.create("reader", sharing(&class, &format!("{}/app", env.ns))).await;
    let buckets: Api<ObjectBucket> = Api::all(env.client.clone());
    let keys = || std::fs::read_dir(env.root.path().join(".provisioner/keys")).unwrap().count();

    for step in WITHDRAW_STEPS {
        reader.wait("reader", ClaimPhase::Bound, "Bound").await;
        assert_eq!(keys(), 2, "the owner's key and the reader's, before {step}");
        let (reader_s3, _) = reader.s3_for("reader").await;
        assert_eq!(get(&reader_s3, &bucket, "data.csv").await.unwrap(), b"kept");

        provisioner.kill().await;
        let mut crashing = env.start_crashing_at("node-a", step);
        grants.delete("share", &DeleteParams::default()).await.unwrap();
        let status = crashing.exited(Duration::from_secs(60)).await.expect("reached the step");
        assert_eq!(status.signal(), Some(6), "aborted at {step}: {status}");
        provisioner = env.start("node-a");

        reader.wait("reader", ClaimPhase::Failed, "ShareWithdrawn").await;
        let answer = eventually("the endpoint to answer again", || async {
            let answer = get(&reader_s3, &bucket, "data.csv").await;
            (answer != Err("unknown".into())).then_some(answer)
        })
        .await;
        assert_eq!(answer, Err("InvalidAccessKeyId".into()), "after a crash at {step}");
        assert!(reader.secret("reader").await.is_none(), "{step}");
        eventually("the reader's ObjectBucket to go", || async {
            let listed = buckets.list(&Default::default()).await.ok()?;
            let left = listed.items.iter().any(|b| {
                b.spec.claim_ref.as_ref().and_then(|r| r.namespace.as_deref())
                    == Some(reader.ns.as_str())
            });
            (!left).then_some(())
        })
        .await;
        assert_eq!(keys(), 1, "only the owner's key after a crash at {step}");
        assert_eq!(get(&app, &bucket, "data.csv").await.unwrap(), b"kept");
        create_grant(&admin, &env.ns, &consent).await;
    }
    reader.wait("reader", ClaimPhase::Bound, "Bound").await;
    reader.delete("reader").await;
    drop(provisioner);
}

/// The reader's whole namespace deleted: its claim's cleanup revokes its key (the grant still
/// naming the namespace changes nothing), and the owner keeps its bucket and key.
#[tokio::test]
async fn deleting_the_reader_namespace_revokes_its_key_only() {
    use k8s_openapi::api::core::v1::Namespace;

    let env = Env::new("hp-xns-gone").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[ALLOW], "Delete").await;
    env.claim("app", &class, None).await;
    env.wait("app", ClaimPhase::Bound, "Bound").await;
    let (app, bucket) = env.s3_for("app").await;
    put(&app, &bucket, "data.csv", b"kept").await.unwrap();
    let admin = namespace_role(&env.client, &env.ns, "admin").await;
    let reader = env.scoped_tenant("hp-xns-gone-r").await;
    create_grant(&admin, &env.ns, &grant("share", "app", &[(&reader.ns, None, None)])).await;
    reader.create("reader", sharing(&class, &format!("{}/app", env.ns))).await;
    reader.wait("reader", ClaimPhase::Bound, "Bound").await;
    let (reader_s3, _) = reader.s3_for("reader").await;
    assert_eq!(get(&reader_s3, &bucket, "data.csv").await.unwrap(), b"kept");

    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    namespaces.delete(&reader.ns, &DeleteParams::default()).await.unwrap();
    eventually("the reader's namespace to go", || async {
        namespaces.get_opt(&reader.ns).await.unwrap().is_none().then_some(())
    })
    .await;
    assert_eq!(get(&reader_s3, &bucket, "data.csv").await, Err("InvalidAccessKeyId".into()));
    let keys = std::fs::read_dir(env.root.path().join(".provisioner/keys")).unwrap().count();
    assert_eq!(keys, 1, "only the owner's key");
    assert_eq!(get(&app, &bucket, "data.csv").await.unwrap(), b"kept");
    env.wait("app", ClaimPhase::Bound, "Bound").await;
}
