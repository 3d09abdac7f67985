//! The S3 provisioner end to end: a controller in this process on the real control plane, a
//! real moto server with IAM enforced, and the claim's keys used as a consumer would use them.

mod common;

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use aws_sdk_s3::types::{BucketVersioningStatus, VersioningConfiguration};
use bucket_api::{ClaimPhase, ObjectBucket, ObjectBucketClaimSpec};
use bucket_provisioner::{BackendError, BucketOptions, ProvisionedBucket, Provisioner, Removed};
use common::cluster::{Setup, setup, spec};
use common::{denied_elsewhere, read_write, suffix};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use s3_provisioner::iam;
use serde_json::json;
use test_support::{
    ControlPlane, Deployed, Harness, Supervised, deployed_identity, eventually, ready,
};
use tokio::sync::Notify;

fn user_of(claim: &bucket_api::ObjectBucketClaim) -> String {
    iam::user_name(&bucket_provisioner::user_id_for_claim(&claim.uid().unwrap()))
}

#[tokio::test]
async fn greenfield_claim_gets_its_own_working_and_confined_keys_then_everything_goes() {
    let s = setup("s3-green").await;
    let controller = Harness::start(s.backend(), Deployed::S3);
    // The whole lifecycle works with no more rights than the book's S3 chapter asks the owner for.
    let owner = s.moto.least_privileged_owner("least-privileged-owner").await;
    s.owner_keys("owner", &owner).await;
    let other = format!("other-{}", suffix());
    s.moto.existing_bucket(&other, &["keep.txt"]).await;
    let class =
        s.class(&controller.provisioner, "owner", &[("region", "eu-west-1")], Some("Delete")).await;
    let claim_spec = ObjectBucketClaimSpec {
        storage_class_name: class,
        generate_bucket_name: Some("photos".into()),
        ..Default::default()
    };
    s.claim("photos", claim_spec).await;

    let claim = s.wait_for("photos", ClaimPhase::Bound, "Bound").await;
    let bucket = claim.spec.bucket_name.clone().unwrap();
    let user = user_of(&claim);
    let keys = s.claim_keys("photos").await;
    assert_ne!(keys.access_key_id, owner.access_key_id, "never the owner's keys");
    assert_eq!(s.moto.access_keys(&user).await, [keys.access_key_id.as_str()]);
    let config = s.config_maps.get("photos").await.unwrap().data.unwrap();
    assert_eq!(config["BUCKET_HOST"], "127.0.0.1");
    assert_eq!(config["BUCKET_PORT"], s.moto.port().to_string());
    assert_eq!(config["BUCKET_REGION"], "eu-west-1");
    assert_eq!(config["BUCKET_NAME"], bucket);
    let ob = s.buckets.get(claim.spec.object_bucket_name.as_deref().unwrap()).await.unwrap();
    let state = ob.spec.additional_state.unwrap();
    assert_eq!(state["userName"], user);
    assert_eq!(state["policyName"], iam::policy_name(&bucket));
    assert_eq!(
        (state["secretName"].as_str(), state["secretNamespace"].as_str()),
        ("owner", &*s.ns)
    );
    assert_eq!(state["endpoint"], s.moto.endpoint);

    read_write(&s.moto.s3_in(&keys, "eu-west-1"), &bucket).await;
    denied_elsewhere(&s.moto.s3(&keys), &s.moto.iam(&keys), &other).await;

    s.delete_and_wait("photos").await;
    assert!(!s.moto.bucket_exists(&bucket).await, "the bucket is deleted under Delete");
    assert!(!s.moto.user_exists(&user).await, "the claim's user is deleted");
    assert!(s.moto.object_keys(&other).await == ["keep.txt"], "other buckets are untouched");
    s.wait_event("photos", "Deleted").await;
    for (reason, note) in s.events("photos").await {
        for secret in [&keys.secret_access_key, &owner.secret_access_key] {
            assert!(!note.contains(secret.as_str()), "Event {reason} shows a secret: {note}");
        }
    }
}

#[tokio::test]
async fn brownfield_grant_and_revoke_leave_the_bucket_and_its_data() {
    let s = setup("s3-brown").await;
    let controller = Harness::start(s.backend(), Deployed::S3);
    s.owner_keys("owner", &s.moto.admin).await;
    let shared = format!("shared-{}", suffix());
    s.moto.existing_bucket(&shared, &["keep.txt"]).await;
    // Delete policy on purpose: a bucket the claim did not create is never deleted.
    let class =
        s.class(&controller.provisioner, "owner", &[("bucketName", &shared)], Some("Delete")).await;
    s.claim("reader", ObjectBucketClaimSpec { storage_class_name: class, ..Default::default() })
        .await;

    let claim = s.wait_for("reader", ClaimPhase::Bound, "Bound").await;
    let keys = s.claim_keys("reader").await;
    let s3 = s.moto.s3(&keys);
    let kept = s3.get_object().bucket(&shared).key("keep.txt").send().await.unwrap();
    assert_eq!(kept.body.collect().await.unwrap().into_bytes().as_ref(), b"keep.txt");
    s3.put_object().bucket(&shared).key("new.txt").body(b"n".to_vec().into()).send().await.unwrap();

    s.delete_and_wait("reader").await;
    s.wait_event("reader", "Revoked").await;
    assert_eq!(s.moto.object_keys(&shared).await, ["keep.txt", "new.txt"]);
    assert!(!s.moto.user_exists(&user_of(&claim)).await);
    let refused = s3.list_objects_v2().bucket(&shared).send().await;
    assert_eq!(common::error_code(refused), "InvalidAccessKeyId", "revoked keys stop working");
}

#[tokio::test]
async fn delete_empties_a_versioned_bucket_of_many_objects_versions_and_markers() {
    let s = setup("s3-versions").await;
    let controller = Harness::start(s.backend(), Deployed::S3);
    s.owner_keys("owner", &s.moto.admin).await;
    let class = s.class(&controller.provisioner, "owner", &[], Some("Delete")).await;
    let bucket = format!("versions-{}", suffix());
    s.claim("archive", spec(&class, &bucket)).await;
    s.wait_for("archive", ClaimPhase::Bound, "Bound").await;

    let admin = s.moto.s3(&s.moto.admin);
    let enabled =
        VersioningConfiguration::builder().status(BucketVersioningStatus::Enabled).build();
    admin
        .put_bucket_versioning()
        .bucket(&bucket)
        .versioning_configuration(enabled)
        .send()
        .await
        .unwrap();
    // More entries than one listing page (1000) holds, written with the claim's own keys. (moto
    // mis-verifies signed listings whose markers or prefixes hold "/", hence "versions-".)
    let s3 = s.moto.s3(&s.claim_keys("archive").await);
    let puts = (0..1010)
        .map(|i| (format!("objects/{i:04}"), 1))
        .chain((0..10).map(|i| (format!("versions-{i}"), 3)));
    futures::stream::iter(puts)
        .for_each_concurrent(16, |(key, versions)| {
            let (s3, bucket) = (s3.clone(), bucket.clone());
            async move {
                for v in 0..versions {
                    let body = format!("{key} v{v}").into_bytes();
                    s3.put_object()
                        .bucket(&bucket)
                        .key(&key)
                        .body(body.into())
                        .send()
                        .await
                        .unwrap();
                }
            }
        })
        .await;
    for i in 0..5 {
        s3.delete_object().bucket(&bucket).key(format!("versions-{i}")).send().await.unwrap();
    }
    let page = admin.list_object_versions().bucket(&bucket).send().await.unwrap();
    assert_eq!(page.is_truncated(), Some(true), "the bucket holds more than one page");
    let tail = admin.list_object_versions().bucket(&bucket).prefix("versions-").send().await;
    let tail = tail.unwrap();
    let markers: Vec<_> =
        tail.delete_markers().iter().map(|m| m.key().unwrap_or_default()).collect();
    assert_eq!((tail.versions().len(), tail.delete_markers().len()), (30, 5), "{markers:?}");

    s.delete_and_wait("archive").await;
    assert!(!s.moto.bucket_exists(&bucket).await, "every version went, and then the bucket");
}

#[tokio::test]
async fn iam_failure_leaves_the_claim_unbound_and_the_owner_keys_nowhere_else() {
    let s = setup("s3-noiam").await;
    let controller = Harness::start(s.backend(), Deployed::S3);
    let owner = s.moto.s3_only_owner(&format!("s3-only-{}", suffix())).await;
    s.owner_keys("owner", &owner).await;
    let class = s.class(&controller.provisioner, "owner", &[], Some("Delete")).await;
    let bucket = format!("noiam-{}", suffix());
    s.claim("c", spec(&class, &bucket)).await;

    let claim = s.wait_for("c", ClaimPhase::Failed, "AccessDenied").await;
    let message = &ready(&claim).unwrap().message;
    assert!(message.contains("iam:CreateUser"), "{message}");
    assert!(message.contains(&format!("Secret {}/owner", s.ns)), "{message}");
    s.wait_event("c", "AccessDenied").await;
    assert!(s.secrets.get_opt("c").await.unwrap().is_none(), "no Secret for an unbound claim");
    let owner_secret = [format!("{}/owner", s.ns)].into();
    assert_eq!(s.secrets_holding(&owner.secret_access_key).await, owner_secret);
    assert_eq!(s.secrets_holding(&owner.access_key_id).await, owner_secret);
    let ob_name = claim.spec.object_bucket_name.clone().expect("recorded before the backend call");
    assert!(s.buckets.get_opt(&ob_name).await.unwrap().is_none(), "no ObjectBucket, nothing bound");
    assert!(s.moto.provisioned_users().await.is_empty());
    for (reason, note) in s.events("c").await {
        assert!(!note.contains(&owner.secret_access_key), "Event {reason} shows a secret");
    }
}

/// Does the backend's work, then hangs before answering once: a crash right after the
/// backend acted.
struct HangAfterProvision<P> {
    inner: P,
    armed: AtomicBool,
    acted: Arc<Notify>,
}

impl<P: Provisioner> Provisioner for HangAfterProvision<P> {
    fn validate(&self, options: &BucketOptions) -> Result<(), BackendError> {
        self.inner.validate(options)
    }

    fn cleanup_state(&self, options: &BucketOptions) -> BTreeMap<String, String> {
        self.inner.cleanup_state(options)
    }

    async fn provision(&self, options: &BucketOptions) -> Result<ProvisionedBucket, BackendError> {
        let result = self.inner.provision(options).await;
        if result.is_ok() && self.armed.swap(false, Ordering::SeqCst) {
            self.acted.notify_one();
            std::future::pending::<()>().await;
        }
        result
    }

    async fn grant(&self, options: &BucketOptions) -> Result<ProvisionedBucket, BackendError> {
        self.inner.grant(options).await
    }

    async fn delete(&self, bucket: &ObjectBucket) -> Result<Removed, BackendError> {
        self.inner.delete(bucket).await
    }

    async fn revoke(&self, bucket: &ObjectBucket) -> Result<(), BackendError> {
        self.inner.revoke(bucket).await
    }
}

/// A controller whose provisioning of claim `c` succeeded and then hung, as if the process died
/// right after the backend acted, with the class, bucket and IAM user it involves.
struct Hung {
    controller: Harness,
    class: String,
    bucket: String,
    user: String,
}

async fn provision_then_hang(s: &Setup, prefix: &str) -> Hung {
    let acted = Arc::new(Notify::new());
    let hanging = HangAfterProvision {
        inner: s.backend(),
        armed: AtomicBool::new(true),
        acted: acted.clone(),
    };
    let controller = Harness::start(hanging, Deployed::S3);
    s.owner_keys("owner", &s.moto.admin).await;
    let class = s.class(&controller.provisioner, "owner", &[], Some("Delete")).await;
    let bucket = format!("{prefix}-{}", suffix());
    let claim = s.claim("c", spec(&class, &bucket)).await;
    let user = user_of(&claim);
    tokio::time::timeout(test_support::WAIT, acted.notified()).await.expect("provisioning");
    Hung { controller, class, bucket, user }
}

#[tokio::test]
async fn crash_after_provisioning_and_retry_make_no_second_user() {
    let s = setup("s3-crash").await;
    let Hung { controller, bucket, user, .. } = provision_then_hang(&s, "crash").await;
    let provisioner = controller.provisioner.clone();
    let lost_key = s.moto.access_keys(&user).await;
    assert_eq!(lost_key.len(), 1, "the first attempt made a user with a key");
    controller.crash();
    assert!(s.secrets.get_opt("c").await.unwrap().is_none(), "the crash came before any write");

    // A new process: nothing remembered but what the cluster and the service hold.
    let _restarted = Harness::start_as(s.backend(), &provisioner, Deployed::S3);
    s.wait_for("c", ClaimPhase::Bound, "Bound").await;
    let keys = s.claim_keys("c").await;
    assert_eq!(s.moto.provisioned_users().await, [user.as_str()], "one user, the claim's");
    assert_eq!(s.moto.access_keys(&user).await, [keys.access_key_id.as_str()], "one key");
    assert_ne!(lost_key, [keys.access_key_id.as_str()], "the undelivered key was replaced");
    read_write(&s.moto.s3(&keys), &bucket).await;
}

#[tokio::test]
async fn claim_deleted_after_a_crash_without_its_class_goes_and_says_what_to_remove() {
    let s = setup("s3-orphan").await;
    let Hung { controller, class, bucket, user } = provision_then_hang(&s, "orphan").await;
    let provisioner = controller.provisioner.clone();
    controller.crash();
    assert!(s.moto.bucket_exists(&bucket).await && s.moto.user_exists(&user).await);

    // No ObjectBucket was written and the class is gone. What the claim recorded is its tenant's
    // to write, so it is not believed: the claim goes, nothing is deleted without a record, and
    // the operator is told what to remove by hand.
    Api::<StorageClass>::all(s.client.clone()).delete(&class, &Default::default()).await.unwrap();
    s.claims.delete("c", &Default::default()).await.unwrap();
    let _restarted = Harness::start_as(s.backend(), &provisioner, Deployed::S3);
    eventually("the claim to be gone", || async {
        s.claims.get_opt("c").await.ok()?.is_none().then_some(())
    })
    .await;
    s.wait_event("c", "BucketSettingsUnknown").await;
    let events = s.events("c").await;
    let told = events.iter().find(|(reason, _)| reason == "BucketSettingsUnknown").unwrap();
    assert!(told.1.contains(&user) && told.1.contains("by hand"), "{events:?}");
    assert!(s.moto.bucket_exists(&bucket).await, "nothing deleted without a record");
    assert!(s.moto.user_exists(&user).await);
}

#[tokio::test]
async fn missing_owner_secret_and_bad_parameters_say_what_is_wrong() {
    let s = setup("s3-bad").await;
    let controller = Harness::start(s.backend(), Deployed::S3);
    let p = &controller.provisioner;
    s.owner_keys("owner", &s.moto.admin).await;
    s.owner_secret("half-owner", Some(&s.moto.admin.access_key_id), None).await;
    let cases = [
        (
            "absent",
            s.class(p, "missing-owner", &[], None).await,
            "OwnerSecretNotFound",
            "/missing-owner",
        ),
        (
            "partial",
            s.class(p, "half-owner", &[], None).await,
            "OwnerSecretInvalid",
            "AWS_SECRET_ACCESS_KEY",
        ),
        (
            "colour",
            s.class(p, "owner", &[("colour", "blue")], None).await,
            "InvalidParameters",
            "\"colour\"",
        ),
        (
            "path",
            s.class(p, "owner", &[("forcePathStyle", "maybe")], None).await,
            "InvalidParameters",
            "forcePathStyle",
        ),
        (
            "endpoint",
            s.class(p, "owner", &[("endpoint", "s3.example.com")], None).await,
            "InvalidParameters",
            "endpoint",
        ),
    ];
    for (name, class, _, _) in &cases {
        s.claim(name, spec(class, &format!("{name}-{}", suffix()))).await;
    }
    let mut config = spec(&s.class(p, "owner", &[], None).await, &format!("config-{}", suffix()));
    config.additional_config = Some([("maxSize".to_string(), "1G".to_string())].into());
    s.claim("config", config).await;

    for (name, _, reason, mentioned) in &cases {
        let claim = s.wait_for(name, ClaimPhase::Failed, reason).await;
        let message = &ready(&claim).unwrap().message;
        assert!(message.contains(mentioned), "{name}: {message}");
        s.wait_event(name, reason).await;
    }
    let claim = s.wait_for("config", ClaimPhase::Failed, "InvalidParameters").await;
    let message = &ready(&claim).unwrap().message;
    assert!(message.contains("maxSize cannot be honoured: AWS S3 has no"), "{message}");
    let buckets = s.moto.s3(&s.moto.admin).list_buckets().send().await.unwrap();
    assert!(buckets.buckets().is_empty(), "nothing was created for a claim that cannot work");
    assert!(s.moto.provisioned_users().await.is_empty());

    // Creating the Secret and touching the StorageClass retries the claim, which then binds.
    s.owner_keys("missing-owner", &s.moto.admin).await;
    let touch = json!({ "metadata": { "labels": { "retried": "yes" } } });
    Api::<StorageClass>::all(s.client.clone())
        .patch(&cases[0].1, &PatchParams::default(), &Patch::Merge(&touch))
        .await
        .unwrap();
    s.wait_for("absent", ClaimPhase::Bound, "Bound").await;
    s.delete_and_wait("absent").await;
}

#[tokio::test]
async fn the_binary_serves_claims_and_logs_no_secret() {
    let s = setup("s3-binary").await;
    s.owner_keys("owner", &s.moto.admin).await;
    let provisioner = format!("s3.test.objectbucket.io/binary-{}", suffix());
    let identity = deployed_identity(ControlPlane::shared(), Deployed::S3).await.unwrap();
    let kubeconfig = identity.kubeconfig.display().to_string();
    let dir = tempfile::Builder::new().prefix("s3-binary-").tempdir().unwrap().keep();
    let argv = [
        env!("CARGO_BIN_EXE_s3-bucket-provisioner"),
        "--provisioner-name",
        &provisioner,
        "--kubeconfig",
        &kubeconfig,
        "--leader-elect=false",
        "--metrics-address=127.0.0.1:0",
    ];
    let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
    let process = Supervised::start(&dir, &[("provisioner", argv)], &[("RUST_LOG", "info")])
        .expect("starting s3-bucket-provisioner");
    let class = s.class(&provisioner, "owner", &[], Some("Delete")).await;
    let bucket = format!("binary-{}", suffix());
    s.claim("c", spec(&class, &bucket)).await;
    let bound = AssertUnwindSafe(s.wait_for("c", ClaimPhase::Bound, "Bound")).catch_unwind().await;
    assert!(bound.is_ok(), "the binary's output:\n{}", process.log_tail("provisioner", 40));
    let keys = s.claim_keys("c").await;
    read_write(&s.moto.s3(&keys), &bucket).await;
    s.delete_and_wait("c").await;
    assert!(!s.moto.bucket_exists(&bucket).await);

    let log = process.log_tail("provisioner", 1000);
    assert!(log.contains(&bucket), "the binary logs what it does:\n{log}");
    for secret in [&keys.secret_access_key, &s.moto.admin.secret_access_key] {
        assert!(!log.contains(secret.as_str()), "a secret reached the log:\n{log}");
    }
}

/// The controller crashed at arbitrary moments through a burst of claims and through their
/// deletion: every claim ends with one IAM user holding exactly the key its Secret carries, its
/// bucket is its alone, and deletion leaves no bucket and no user behind.
#[tokio::test]
async fn a_burst_of_claims_survives_repeated_crashes() {
    const CLAIMS: usize = 12;
    let s = setup("s3-burst").await;
    s.owner_keys("owner", &s.moto.admin).await;
    let mut controller = Harness::start(s.backend(), Deployed::S3);
    let provisioner = controller.provisioner.clone();
    let class = s.class(&provisioner, "owner", &[], Some("Delete")).await;
    let buckets: Vec<String> = (0..CLAIMS).map(|i| format!("burst-{i}-{}", suffix())).collect();
    for (i, bucket) in buckets.iter().enumerate() {
        s.claim(&format!("c{i}"), spec(&class, bucket)).await;
    }
    for pause in [100, 250, 150, 300, 200] {
        tokio::time::sleep(Duration::from_millis(pause)).await;
        controller.crash();
        controller = Harness::start_as(s.backend(), &provisioner, Deployed::S3);
    }

    let mut users = Vec::new();
    for (i, bucket) in buckets.iter().enumerate() {
        let name = format!("c{i}");
        let claim = s.wait_for(&name, ClaimPhase::Bound, "Bound").await;
        let keys = s.claim_keys(&name).await;
        let user = user_of(&claim);
        let held = s.moto.access_keys(&user).await;
        assert_eq!(held, [keys.access_key_id.as_str()], "{name}: one key, its Secret's");
        let s3 = s.moto.s3(&keys);
        read_write(&s3, bucket).await;
        let other = &buckets[(i + 1) % CLAIMS];
        let put = s3.put_object().bucket(other).key("x").body(b"x".to_vec().into()).send().await;
        assert_eq!(common::error_code(put), "AccessDenied", "{name}'s key reached {other}");
        users.push(user);
    }
    users.sort();
    let mut provisioned = s.moto.provisioned_users().await;
    provisioned.sort();
    assert_eq!(provisioned, users, "one user per claim, none left by a crash");

    for i in 0..CLAIMS {
        s.claims.delete(&format!("c{i}"), &Default::default()).await.unwrap();
    }
    for pause in [50, 150, 100, 250] {
        tokio::time::sleep(Duration::from_millis(pause)).await;
        controller.crash();
        controller = Harness::start_as(s.backend(), &provisioner, Deployed::S3);
    }
    for i in 0..CLAIMS {
        let name = format!("c{i}");
        eventually(&format!("claim {name} to be gone"), || async {
            s.claims.get_opt(&name).await.ok()?.is_none().then_some(())
        })
        .await;
    }
    for bucket in &buckets {
        assert!(!s.moto.bucket_exists(bucket).await, "{bucket} outlived its claim");
    }
    assert_eq!(s.moto.provisioned_users().await, Vec::<String>::new(), "users outlived claims");
    drop(controller);
}

/// A TCP relay standing for the network between the provisioner and the service: cut, it drops
/// every open connection and refuses new ones; restored, it relays again.
struct Relay {
    endpoint: String,
    up: tokio::sync::watch::Sender<bool>,
}

impl Relay {
    async fn start(upstream: u16) -> Relay {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let (up, state) = tokio::sync::watch::channel(true);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if !*state.borrow() {
                    continue; // dropped: the peer sees its connection closed at once
                }
                let mut cut = state.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                    else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut.wait_for(|up| !*up) => {}
                    }
                });
            }
        });
        Relay { endpoint, up }
    }

    fn cut(&self) {
        self.up.send_replace(false);
    }

    fn restore(&self) {
        self.up.send_replace(true);
    }
}

/// The service unreachable for a while: a claim made meanwhile and a claim deleted meanwhile say
/// why they wait and are retried, never failed for good; once the service is back both finish,
/// and nothing is lost or left behind.
#[tokio::test]
async fn a_service_outage_delays_claims_and_deletions_but_loses_nothing() {
    let s = setup("s3-outage").await;
    s.owner_keys("owner", &s.moto.admin).await;
    let relay = Relay::start(s.moto.port()).await;
    let controller = Harness::start(s.backend(), Deployed::S3);
    let class = s
        .class(&controller.provisioner, "owner", &[("endpoint", &relay.endpoint)], Some("Delete"))
        .await;
    let before = format!("before-{}", suffix());
    s.claim("before", spec(&class, &before)).await;
    s.wait_for("before", ClaimPhase::Bound, "Bound").await;

    relay.cut();
    let during = format!("during-{}", suffix());
    s.claim("during", spec(&class, &during)).await;
    s.claims.delete("before", &Default::default()).await.unwrap();
    let waiting = s.wait_for("during", ClaimPhase::Pending, "ProvisionFailed").await;
    let message = &ready(&waiting).unwrap().message;
    assert!(message.contains(&during), "the condition names what failed: {message}");
    s.wait_event("before", "DeleteFailed").await;
    // Several retries later, still waiting rather than failed, and still not deleted.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let still = s.claims.get("during").await.unwrap();
    assert_eq!(still.status.and_then(|st| st.phase), Some(ClaimPhase::Pending));
    assert!(s.claims.get_opt("before").await.unwrap().is_some(), "not gone while unreachable");
    assert!(s.moto.bucket_exists(&before).await, "nothing deleted while unreachable");

    relay.restore();
    s.wait_for("during", ClaimPhase::Bound, "Bound").await;
    read_write(&s.moto.s3(&s.claim_keys("during").await), &during).await;
    eventually("claim before to be gone", || async {
        s.claims.get_opt("before").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(!s.moto.bucket_exists(&before).await, "deleted once the service was back");
    assert_eq!(s.moto.provisioned_users().await.len(), 1, "only the live claim's user remains");
}

/// Merges `config` into claim `name`'s `additionalConfig` (`null` removes a key).
async fn change_config(s: &Setup, name: &str, config: serde_json::Value) {
    let patch = json!({ "spec": { "additionalConfig": config } });
    s.claims.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

#[tokio::test]
async fn a_claims_cors_rules_follow_the_claim_where_its_class_allows_them() {
    let s = setup("s3-cors").await;
    let controller = Harness::start(s.backend(), Deployed::S3);
    // No more rights than the book's S3 chapter asks the owner for, with what `cors` adds.
    let mut actions = s3_provisioner::owner::OWNER_ACTIONS.to_vec();
    actions.push("s3:PutBucketCORS");
    let owner = s.moto.user_allowed("cors-owner", &actions).await;
    s.owner_keys("owner", &owner).await;
    let p = &controller.provisioner;
    let allowing = s.class(p, "owner", &[("allowCors", "true")], Some("Delete")).await;
    let plain = s.class(p, "owner", &[], Some("Delete")).await;
    let rules = |origin: &str| {
        format!(
            r#"{{"CORSRules": [{{"AllowedOrigins": ["{origin}"], "AllowedMethods": ["PUT"]}}]}}"#
        )
    };
    let asking = |class: &str, key: &str, value: String| ObjectBucketClaimSpec {
        additional_config: Some(BTreeMap::from([(key.to_string(), value)])),
        ..spec(class, &format!("{key}-{}", suffix()).to_ascii_lowercase())
    };
    s.claim("web", asking(&allowing, "cors", rules("https://app.example.com"))).await;
    s.claim("unallowed", asking(&plain, "cors", rules("*"))).await;
    s.claim("versioned", asking(&allowing, "versioning", "Enabled".into())).await;

    let claim = s.wait_for("web", ClaimPhase::Bound, "Bound").await;
    let bucket = claim.spec.bucket_name.clone().unwrap();
    let admin = s.moto.s3(&s.moto.admin);
    let origins = || async {
        match admin.get_bucket_cors().bucket(&bucket).send().await {
            Ok(found) => Some(found.cors_rules()[0].allowed_origins().to_vec()),
            Err(_) => None,
        }
    };
    assert_eq!(origins().await.unwrap(), ["https://app.example.com"]);

    // Changed on the bound claim, then dropped: the bucket follows.
    change_config(&s, "web", json!({ "cors": rules("https://new.example.com") })).await;
    eventually("the changed rules on the bucket", || async {
        (origins().await? == ["https://new.example.com"]).then_some(())
    })
    .await;
    change_config(&s, "web", json!({ "cors": null })).await;
    eventually("the rules removed from the bucket", || async {
        let gone = admin.get_bucket_cors().bucket(&bucket).send().await;
        (gone.is_err() && common::error_code(gone) == "NoSuchCORSConfiguration").then_some(())
    })
    .await;

    for (name, says) in
        [("unallowed", "allowCors: \"true\""), ("versioned", "allowVersioning: \"true\"")]
    {
        let claim = s.wait_for(name, ClaimPhase::Failed, "InvalidParameters").await;
        let message = &ready(&claim).unwrap().message;
        assert!(message.contains(says), "{name}: {message}");
        s.wait_event(name, "InvalidParameters").await;
    }
    let buckets = admin.list_buckets().send().await.unwrap();
    assert_eq!(buckets.buckets().len(), 1, "only the claim that could be served has a bucket");
    for name in ["web", "unallowed", "versioned"] {
        s.delete_and_wait(name).await;
    }
    assert!(!s.moto.bucket_exists(&bucket).await);
}
