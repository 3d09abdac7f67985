//! The operator's limit on sharing across namespaces, end to end: a StorageClass whose
//! `crossNamespaceSharingNamespaceSelector` lets in only the namespaces whose labels match, with
//! `hostpath-bucket-provisioner` as a real process under the RBAC of `deploy/hostpath/`, the
//! namespace labels written by the operator (a tenant cannot), and readers as namespace-scoped
//! identities using nothing but their claims' Secrets and ConfigMaps.

mod harness;

use std::collections::BTreeMap;

use bucket_api::ClaimPhase;
use harness::share::*;
use harness::*;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use test_support::eventually;

const SELECTOR: &str = "crossNamespaceSharingNamespaceSelector";
const LABEL: &str = "sharing.example.com/reader";

/// Sets (`Some`) or removes (`None`) the namespace's label `LABEL`, as the operator.
async fn label(client: &Client, namespace: &str, value: Option<&str>) {
    let patch = serde_json::json!({ "metadata": { "labels": { LABEL: value } } });
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.patch(namespace, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

/// The operator replaces the class (its parameters cannot change) with `parameters`.
async fn replace_class(client: &Client, class: &str, parameters: &[(&str, &str)]) {
    let classes: Api<StorageClass> = Api::all(client.clone());
    let mut replaced = classes.get(class).await.unwrap();
    classes.delete(class, &DeleteParams::default()).await.unwrap();
    eventually("the class to go", || async {
        classes.get_opt(class).await.unwrap().is_none().then_some(())
    })
    .await;
    replaced.metadata = ObjectMeta { name: Some(class.to_owned()), ..Default::default() };
    let parameters = parameters.iter().map(|(k, v)| (k.to_string(), v.to_string()));
    replaced.parameters = Some(parameters.collect());
    classes.create(&PostParams::default(), &replaced).await.unwrap();
}

fn key_of(env: BTreeMap<String, String>) -> (String, String) {
    (env["AWS_ACCESS_KEY_ID"].clone(), env["AWS_SECRET_ACCESS_KEY"].clone())
}

/// `get` of `key` with `s3` until it is refused as an unknown key.
async fn until_revoked(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) {
    eventually("the reader's key to stop", || async {
        (get(s3, bucket, key).await == Err("InvalidAccessKeyId".into())).then_some(())
    })
    .await;
}

/// A labelled namespace binds, an unlabelled one is refused as a missing claim is; the label
/// removed withdraws the bound reader (key revoked, owner's data kept), put back binds it again
/// with a new key, and a namespace labelled later binds without its claim changing.
#[tokio::test]
async fn only_labelled_namespaces_share_and_the_label_going_withdraws() {
    let env = Env::new("hp-xnl").await;
    let _provisioner = env.start("node-a");
    let selector = format!("{LABEL}=yes");
    let class = env.class(&[ALLOW, (SELECTOR, &selector)], "Delete").await;
    env.claim("app", &class, None).await;
    env.wait("app", ClaimPhase::Bound, "Bound").await;
    let (app, bucket) = env.s3_for("app").await;
    put(&app, &bucket, "data.csv", b"shared data").await.unwrap();
    let admin = namespace_role(&env.client, &env.ns, "admin").await;
    let reader = env.scoped_tenant("hp-xnl-in").await;
    let outsider = env.scoped_tenant("hp-xnl-out").await;
    let to = [(reader.ns.as_str(), None, None), (outsider.ns.as_str(), None, None)];
    create_grant(&admin, &env.ns, &grant("share-app", "app", &to)).await;

    // The label is the operator's: a tenant cannot put it on its own namespace.
    let patch = serde_json::json!({ "metadata": { "labels": { LABEL: "yes" } } });
    let own: Api<Namespace> = Api::all(reader.client.clone());
    let denied = own.patch(&reader.ns, &PatchParams::default(), &Patch::Merge(&patch)).await;
    assert!(matches!(&denied, Err(kube::Error::Api(s)) if s.code == 403), "{denied:?}");
    label(&env.client, &reader.ns, Some("yes")).await;
    label(&env.client, &outsider.ns, Some("no")).await;

    let from = format!("{}/app", env.ns);
    reader.create("reader", sharing(&class, &from)).await;
    outsider.create("outsider", sharing(&class, &from)).await;
    outsider.create("missing", sharing(&class, &format!("{}/no-such", env.ns))).await;
    reader.wait("reader", ClaimPhase::Bound, "Bound").await;
    let (reader_s3, _) = reader.s3_for("reader").await;
    assert_eq!(get(&reader_s3, &bucket, "data.csv").await.unwrap(), b"shared data");
    let first_key = key_of(reader.env_of("reader").await);

    // Refused with the words of a claim that does not exist: nothing learnt, nothing issued.
    let refused = outsider.wait("outsider", ClaimPhase::Failed, "ShareSourceNotFound").await;
    let missing = outsider.wait("missing", ClaimPhase::Failed, "ShareSourceNotFound").await;
    let shape = |claim, from: &str| ready_message(claim).replace(&format!("{from:?}"), "N");
    assert_eq!(shape(&refused, &from), shape(&missing, &format!("{}/no-such", env.ns)));
    assert!(outsider.secret("outsider").await.is_none(), "no key for an unlabelled namespace");

    // The label removed: the bound reader's key stops, the claim says why, the data stays.
    label(&env.client, &reader.ns, None).await;
    let withdrawn = reader.wait("reader", ClaimPhase::Failed, "ShareWithdrawn").await;
    assert!(ready_message(&withdrawn).contains("access was withdrawn"));
    until_revoked(&reader_s3, &bucket, "data.csv").await;
    assert!(reader.secret("reader").await.is_none(), "no dead key left in a Secret");
    assert_eq!(get(&app, &bucket, "data.csv").await.unwrap(), b"shared data");

    // Put back: bound again with a new key; the withdrawn one stays dead.
    label(&env.client, &reader.ns, Some("yes")).await;
    reader.wait("reader", ClaimPhase::Bound, "Bound").await;
    assert_ne!(key_of(reader.env_of("reader").await).1, first_key.1, "a new secret");
    let (again, _) = reader.s3_for("reader").await;
    assert_eq!(get(&again, &bucket, "data.csv").await.unwrap(), b"shared data");
    assert!(get(&reader_s3, &bucket, "data.csv").await.is_err(), "the old key stays dead");

    // The outsider's namespace labelled as the class asks: its claim binds as it is.
    label(&env.client, &outsider.ns, Some("yes")).await;
    outsider.wait("outsider", ClaimPhase::Bound, "Bound").await;
    let (outsider_s3, _) = outsider.s3_for("outsider").await;
    assert_eq!(get(&outsider_s3, &bucket, "data.csv").await.unwrap(), b"shared data");
    reader.delete("reader").await;
    outsider.delete("outsider").await;
}

/// The operator changing the selector withdraws a reader it no longer lets in; a selector that
/// cannot be read is a clear error (status, Event) on the class's claims and on a reader the
/// grant lets in, which is withdrawn and shares nothing, while a reader the grant does not let
/// in learns nothing; corrected, the reader binds again.
#[tokio::test]
async fn a_changed_or_unreadable_selector_withdraws_and_says_why() {
    let env = Env::new("hp-xnl-bad").await;
    let _provisioner = env.start("node-a");
    let good = [ALLOW, (SELECTOR, "team=readers")];
    let class = env.class(&good, "Delete").await;
    env.claim("app", &class, None).await;
    env.wait("app", ClaimPhase::Bound, "Bound").await;
    let (app, bucket) = env.s3_for("app").await;
    put(&app, &bucket, "data.csv", b"kept").await.unwrap();
    let admin = namespace_role(&env.client, &env.ns, "admin").await;
    let reader = env.scoped_tenant("hp-xnl-bad-r").await;
    let stranger = env.scoped_tenant("hp-xnl-bad-s").await;
    create_grant(&admin, &env.ns, &grant("share", "app", &[(&reader.ns, None, None)])).await;
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    for ns in [&reader.ns, &stranger.ns] {
        let patch = serde_json::json!({ "metadata": { "labels": { "team": "readers" } } });
        namespaces.patch(ns, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }
    let from = format!("{}/app", env.ns);
    reader.create("reader", sharing(&class, &from)).await;
    reader.wait("reader", ClaimPhase::Bound, "Bound").await;
    let (reader_s3, _) = reader.s3_for("reader").await;
    assert_eq!(get(&reader_s3, &bucket, "data.csv").await.unwrap(), b"kept");

    // Another selector, which the reader's namespace does not match: withdrawn.
    replace_class(&env.client, &class, &[ALLOW, (SELECTOR, "team=writers")]).await;
    reader.wait("reader", ClaimPhase::Failed, "ShareWithdrawn").await;
    until_revoked(&reader_s3, &bucket, "data.csv").await;

    // Matching again, then a selector that cannot be read while the reader is bound.
    replace_class(&env.client, &class, &good).await;
    reader.wait("reader", ClaimPhase::Bound, "Bound").await;
    let (reader_s3, _) = reader.s3_for("reader").await;
    assert_eq!(get(&reader_s3, &bucket, "data.csv").await.unwrap(), b"kept");
    replace_class(&env.client, &class, &[ALLOW, (SELECTOR, "team!=readers")]).await;
    let failed = reader.wait("reader", ClaimPhase::Failed, "InvalidStorageClass").await;
    let message = ready_message(&failed);
    assert!(message.contains(SELECTOR) && message.contains("term 1"), "{message}");
    assert!(message.contains("nothing of it is shared"), "{message}");
    until_revoked(&reader_s3, &bucket, "data.csv").await;
    assert!(reader.secret("reader").await.is_none(), "no dead key left in a Secret");
    let events: Api<Event> = Api::namespaced(env.client.clone(), &reader.ns);
    eventually("an Event on the reader's claim", || async {
        let listed = events.list(&Default::default()).await.ok()?;
        listed.items.into_iter().find(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("reader")
                && e.reason.as_deref() == Some("InvalidStorageClass")
                && e.note.as_deref().is_some_and(|n| n.contains(SELECTOR))
        })
    })
    .await;
    // The class's own claim says so too, and keeps its key and data.
    let owner = env.wait("app", ClaimPhase::Failed, "InvalidStorageClass").await;
    assert!(ready_message(&owner).contains(SELECTOR), "{}", ready_message(&owner));
    assert_eq!(get(&app, &bucket, "data.csv").await.unwrap(), b"kept");
    // A namespace the grant does not let in learns nothing of the class.
    stranger.create("stranger", sharing(&class, &from)).await;
    stranger.wait("stranger", ClaimPhase::Failed, "ShareSourceNotFound").await;

    // Corrected: the owner is Bound again and the reader binds again with a new key.
    replace_class(&env.client, &class, &good).await;
    env.wait("app", ClaimPhase::Bound, "Bound").await;
    reader.wait("reader", ClaimPhase::Bound, "Bound").await;
    let (again, _) = reader.s3_for("reader").await;
    assert_eq!(get(&again, &bucket, "data.csv").await.unwrap(), b"kept");
    reader.delete("reader").await;
}
