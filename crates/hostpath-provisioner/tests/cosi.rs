//! The hostPath driver under the real upstream COSI controller and sidecar, both versions:
//! class → claim → Bucket → access class → access → Secret → a consumer that knows nothing but
//! that Secret writes, reads and lists; read-only keys cannot write; every access has its own
//! key; deleting an access stops its key; the deletion policy decides a bucket's fate; and a
//! tenant that binds another namespace's Bucket (or, under v1alpha1, a static Bucket its operator
//! did not share with it) gets no key to it; an apiserver outage leaves the driver serving, with
//! nothing leaked.

#[path = "cosi/world.rs"]
mod world;

use std::time::Duration;

use aws_sdk_s3::Client as S3;
use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::primitives::ByteStream;
use kube::api::DeleteParams;
use test_support::cosi::{CosiVersion, create};
use world::{World, s3_client, wait_for};

async fn put(s3: &S3, bucket: &str, key: &str, body: &[u8]) -> Result<(), String> {
    s3.put_object()
        .bucket(bucket)
        .key(key)
        .body(ByteStream::from(body.to_vec()))
        .send()
        .await
        .map(|_| ())
        .map_err(|e| e.into_service_error().code().unwrap_or("unknown").to_owned())
}

async fn get(s3: &S3, bucket: &str, key: &str) -> Result<Vec<u8>, String> {
    let output = s3
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .map_err(|e| e.into_service_error().code().unwrap_or("unknown").to_owned())?;
    Ok(output.body.collect().await.unwrap().into_bytes().to_vec())
}

async fn list(s3: &S3, bucket: &str) -> Result<Vec<String>, String> {
    let output = s3
        .list_objects_v2()
        .bucket(bucket)
        .send()
        .await
        .map_err(|e| e.into_service_error().code().unwrap_or("unknown").to_owned())?;
    Ok(output.contents().iter().filter_map(|o| o.key().map(Into::into)).collect())
}

/// The life of a claim and its accesses, as far as each upstream version carries it.
async fn claim_access_and_consumer(version: CosiVersion) {
    let mut world = World::start(version).await;
    let tenant = world.tenant("cosi-tenant").await;
    let bucket_object = world.claim(&tenant, "data", &world.delete_class).await;

    // A consumer with nothing but the Secret writes, reads and lists.
    let writer = world.access(&tenant, "writer", "data", "ReadWrite").await;
    let s3 = s3_client(&writer);
    put(&s3, &writer.bucket, "hello.txt", b"hello").await.unwrap();
    assert_eq!(get(&s3, &writer.bucket, "hello.txt").await.unwrap(), b"hello");
    assert_eq!(list(&s3, &writer.bucket).await.unwrap(), ["hello.txt"]);
    // v1alpha1 consumers find the bucket by the Bucket object's name.
    if version == CosiVersion::V1Alpha1 {
        assert_eq!(writer.bucket, bucket_object);
    }
    assert!(world.bucket_dir(&writer.bucket).is_dir(), "the bucket is on the driver's disk");

    // A second access gets a key of its own, which works beside the first.
    let second_mode = if version == CosiVersion::V1Alpha2 { "ReadOnly" } else { "ReadWrite" };
    let second = world.access(&tenant, "second", "data", second_mode).await;
    assert_ne!(second.access_key_id, writer.access_key_id, "every access has its own key");
    assert_eq!(second.bucket, writer.bucket);
    let s3_second = s3_client(&second);
    assert_eq!(get(&s3_second, &second.bucket, "hello.txt").await.unwrap(), b"hello");
    if version == CosiVersion::V1Alpha2 {
        // A ReadOnly access reads and lists but cannot write or delete.
        assert_eq!(list(&s3_second, &second.bucket).await.unwrap(), ["hello.txt"]);
        assert_eq!(put(&s3_second, &second.bucket, "x", b"x").await.unwrap_err(), "AccessDenied");
        let deleted =
            s3_second.delete_object().bucket(&second.bucket).key("hello.txt").send().await;
        assert_eq!(deleted.unwrap_err().code(), Some("AccessDenied"));
        assert_eq!(get(&s3, &writer.bucket, "hello.txt").await.unwrap(), b"hello");

        // main's sidecar passes an access's deletion to the driver only when it starts again
        // (upstream defect); with the documented workaround, a restart, the key stops working.
        let accesses = version.api(&tenant.client, "BucketAccess", Some(&tenant.namespace));
        accesses.delete("second", &DeleteParams::default()).await.unwrap();
        world.restart_sidecar();
        world
            .until("the deleted access's key to stop working", async || {
                get(&s3_second, &second.bucket, "hello.txt").await.is_err()
            })
            .await;
        assert_eq!(get(&s3, &writer.bucket, "hello.txt").await.unwrap(), b"hello");
    }

    if version == CosiVersion::V1Alpha1 {
        // Deleting an access revokes its key; the other key keeps working.
        let accesses = version.api(&tenant.client, "BucketAccess", Some(&tenant.namespace));
        accesses.delete("second", &DeleteParams::default()).await.unwrap();
        world
            .until("the deleted access's key to stop working", async || {
                get(&s3_second, &second.bucket, "hello.txt").await.is_err()
            })
            .await;
        assert_eq!(get(&s3, &writer.bucket, "hello.txt").await.unwrap(), b"hello");

        // Under Delete, deleting the claim deletes the bucket (its accesses go with it).
        let claims = version.api(&tenant.client, "BucketClaim", Some(&tenant.namespace));
        claims.delete("data", &DeleteParams::default()).await.unwrap();
        let dir = world.bucket_dir(&writer.bucket);
        world.until("the bucket to be deleted with its claim", async || !dir.exists()).await;

        // Under Retain, it stays, data and all.
        let kept = world.claim(&tenant, "kept", &world.retain_class).await;
        let keeper = world.access(&tenant, "keeper", "kept", "ReadWrite").await;
        put(&s3_client(&keeper), &keeper.bucket, "keep.txt", b"kept").await.unwrap();
        claims.delete("kept", &DeleteParams::default()).await.unwrap();
        let buckets = version.api(&world.admin, "Bucket", None);
        world
            .until("the Retain claim to be gone", async || {
                claims.get_opt("kept").await.unwrap().is_none()
            })
            .await;
        assert!(buckets.get_opt(&kept).await.unwrap().is_some(), "a Retain Bucket is kept");
        assert!(world.bucket_dir(&keeper.bucket).is_dir(), "a Retain bucket is kept");
    }
    // The sidecar and the driver did all of it with deploy/cosi/hostpath's RBAC.
    world.assert_never_forbidden();
}

#[tokio::test]
async fn v1alpha1_claim_access_and_consumer() {
    claim_access_and_consumer(CosiVersion::V1Alpha1).await;
}

#[tokio::test]
async fn v1alpha2_claim_access_and_consumer() {
    claim_access_and_consumer(CosiVersion::V1Alpha2).await;
}

/// Tenant B binds tenant A's Bucket with `existingBucketName` (which v0.2.2 lets any namespace
/// do, rewriting the Bucket's claim reference to B's claim) and asks for an access: the driver
/// refuses the grant (v0.2.2), or the claim is never bound (main); B gets no Secret, and A's own
/// access keeps working.
async fn another_namespace_cannot_reach_a_bucket(version: CosiVersion) {
    let world = World::start(version).await;
    let victim = world.tenant("cosi-victim").await;
    let bucket_object = world.claim(&victim, "data", &world.delete_class).await;
    let own = world.access(&victim, "own", "data", "ReadWrite").await;
    put(&s3_client(&own), &own.bucket, "secret.txt", b"A's data").await.unwrap();

    let attacker = world.tenant("cosi-attacker").await;
    let claims = version.api(&attacker.client, "BucketClaim", Some(&attacker.namespace));
    let stolen = version.claim_of_existing(&attacker.namespace, "stolen", &bucket_object);
    create(&claims, &stolen).await.unwrap();
    world.request_access(&attacker, "thief", "stolen", "ReadWrite").await;

    let accesses = version.api(&attacker.client, "BucketAccess", Some(&attacker.namespace));
    match version {
        CosiVersion::V1Alpha1 => {
            // v0.2.2 binds the claim and its sidecar asks the driver, which refuses (and logs
            // why); an access granted is the attack succeeding.
            let outcome = wait_for(&accesses, "thief", |access| {
                if version.access_ready(access) {
                    return Some(Err("the attacker's access was granted"));
                }
                let refused = world.driver_refused("DriverGrantBucketAccess", &attacker.namespace);
                refused.then_some(Ok(()))
            })
            .await;
            match outcome {
                Ok(Ok(())) => {}
                Ok(Err(what)) => panic!("{what}\n{}", world.logs()),
                Err(last) => panic!("the driver never refused the grant: {last}\n{}", world.logs()),
            }
        }
        CosiVersion::V1Alpha2 => {
            // main's controller never binds the claim, so the driver is never asked.
            tokio::time::sleep(Duration::from_secs(10)).await;
            let claim = claims.get("stolen").await.unwrap();
            assert_eq!(version.claim_bucket(&claim), None, "{}", claim.data["status"]);
        }
    }
    let thief = accesses.get("thief").await.unwrap();
    assert!(!version.access_ready(&thief), "{}", thief.data["status"]);
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(attacker.client.clone(), &attacker.namespace);
    assert!(
        secrets
            .get_opt("thief-creds")
            .await
            .unwrap()
            .is_none_or(|s| { version.read_access_secret(&s).is_err() })
    );
    // The victim's key still works and their data is untouched.
    assert_eq!(get(&s3_client(&own), &own.bucket, "secret.txt").await.unwrap(), b"A's data");
}

/// v0.2.2 deletes a Bucket when any claim bound to it goes, and lets any namespace's claim bind
/// it (`existingBucketName`): tenant B binding A's Bucket and deleting its claim must not delete
/// A's bucket. The driver refuses the deletion while A's claim lives; once A deletes its own
/// claim, the bucket goes.
#[tokio::test]
async fn v1alpha1_another_namespace_cannot_delete_a_bucket_by_binding_it() {
    let version = CosiVersion::V1Alpha1;
    let world = World::start(version).await;
    let victim = world.tenant("cosi-kept").await;
    let bucket_object = world.claim(&victim, "data", &world.delete_class).await;
    let own = world.access(&victim, "own", "data", "ReadWrite").await;
    put(&s3_client(&own), &own.bucket, "kept.txt", b"A's data").await.unwrap();

    let attacker = world.tenant("cosi-deleter").await;
    let claims = version.api(&attacker.client, "BucketClaim", Some(&attacker.namespace));
    let stolen = version.claim_of_existing(&attacker.namespace, "stolen", &bucket_object);
    create(&claims, &stolen).await.unwrap();
    world.wait_claim_ready(&attacker, "stolen").await;
    claims.delete("stolen", &DeleteParams::default()).await.unwrap();
    // The controller deletes the Bucket and the sidecar asks the driver, each at its own pace
    // (and with its own backoff) on a loaded machine: what must hold is that the driver was asked
    // and refused, however long that takes.
    world
        .until("the driver to refuse the deletion", async || {
            world.driver_refused("DriverDeleteBucket", &victim.namespace)
        })
        .await;
    assert_eq!(get(&s3_client(&own), &own.bucket, "kept.txt").await.unwrap(), b"A's data");
    assert!(world.bucket_dir(&own.bucket).join("kept.txt").exists());

    // A's own deletion goes ahead.
    let accesses = version.api(&victim.client, "BucketAccess", Some(&victim.namespace));
    accesses.delete("own", &DeleteParams::default()).await.unwrap();
    let own_claims = version.api(&victim.client, "BucketClaim", Some(&victim.namespace));
    own_claims.delete("data", &DeleteParams::default()).await.unwrap();
    world
        .until("the bucket to go with its own claim", async || {
            !world.bucket_dir(&own.bucket).exists()
        })
        .await;
}

#[tokio::test]
async fn v1alpha1_another_namespace_cannot_reach_a_bucket() {
    another_namespace_cannot_reach_a_bucket(CosiVersion::V1Alpha1).await;
}

#[tokio::test]
async fn v1alpha2_another_namespace_cannot_reach_a_bucket() {
    another_namespace_cannot_reach_a_bucket(CosiVersion::V1Alpha2).await;
}

/// v1alpha1: an operator's static Bucket (`existingBucketID`) reaches only the namespaces its
/// `cosi.objectbucket.io/allowed-namespaces` annotation lists. v0.2.2 binds a claim of any
/// namespace that names the Bucket (and rewrites its `spec.bucketClaim` each time); the driver
/// grants the listed namespace's access and refuses every other's.
#[tokio::test]
async fn v1alpha1_a_static_bucket_reaches_only_the_namespaces_its_operator_lists() {
    let version = CosiVersion::V1Alpha1;
    let world = World::start(version).await;
    let owner = world.tenant("cosi-shelf").await;
    let stranger = world.tenant("cosi-stranger").await;
    let id = format!("shelf-{}", test_support::unique_suffix());
    std::fs::create_dir_all(world.bucket_dir(&id)).unwrap();
    std::fs::write(world.bucket_dir(&id).join("shelf.txt"), b"the operator's").unwrap();
    let bucket = format!("static-{id}");
    let spec = serde_json::json!({ "spec": {
        "driverName": world.driver_name, "bucketClassName": world.delete_class,
        "deletionPolicy": "Retain", "protocols": ["S3"], "existingBucketID": id,
        "bucketClaim": { "name": "shelf", "namespace": owner.namespace },
    }});
    let mut object = version.object("Bucket", &bucket, None, spec);
    let allowed = [(cosi_driver::tenancy::ALLOWED_NAMESPACES.to_owned(), owner.namespace.clone())];
    object.metadata.annotations = Some(allowed.into());
    create(&version.api(&world.admin, "Bucket", None), &object).await.unwrap();
    for tenant in [&owner, &stranger] {
        let claims = version.api(&tenant.client, "BucketClaim", Some(&tenant.namespace));
        let claim = version.claim_of_existing(&tenant.namespace, "shelf", &bucket);
        create(&claims, &claim).await.unwrap();
        world.wait_claim_ready(tenant, "shelf").await;
    }

    // v0.2.2's BucketInfo names the Bucket object; the store's bucket is its existingBucketID.
    let own = world.access(&owner, "reader", "shelf", "ReadWrite").await;
    assert_eq!(get(&s3_client(&own), &id, "shelf.txt").await.unwrap(), b"the operator's");

    world.request_access(&stranger, "thief", "shelf", "ReadWrite").await;
    let accesses = version.api(&stranger.client, "BucketAccess", Some(&stranger.namespace));
    let outcome = wait_for(&accesses, "thief", |access| {
        if version.access_ready(access) {
            return Some(Err("the stranger's access was granted"));
        }
        let refused = world.driver_refused("DriverGrantBucketAccess", &stranger.namespace);
        refused.then_some(Ok(()))
    })
    .await;
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(what)) => panic!("{what}\n{}", world.logs()),
        Err(last) => panic!("the driver never refused the grant: {last}\n{}", world.logs()),
    }
    // The owner's access still works, and the operator's data is untouched.
    assert_eq!(get(&s3_client(&own), &id, "shelf.txt").await.unwrap(), b"the operator's");
}

/// v0.2.2's controller can overwrite the sidecar's `bucketReady: true` on a claim with a stale
/// `false` (its status write after making the Bucket). Here that very write is replayed on a
/// ready claim: the driver marks the claim ready again, and the sidecar, which refuses accesses
/// to an unready claim, then grants one.
#[tokio::test]
async fn v1alpha1_a_claim_left_unready_by_the_controller_is_repaired() {
    let version = CosiVersion::V1Alpha1;
    let world = World::start(version).await;
    let tenant = world.tenant("cosi-stale").await;
    let bucket = world.claim(&tenant, "data", &world.delete_class).await;
    let claims = version.api(&world.admin, "BucketClaim", Some(&tenant.namespace));
    let stale = serde_json::json!({ "status": { "bucketName": bucket, "bucketReady": false } });
    let params = kube::api::PatchParams::default();
    claims.patch_status("data", &params, &kube::api::Patch::Merge(&stale)).await.unwrap();
    assert!(!version.claim_ready(&claims.get("data").await.unwrap()));

    let access = world.access(&tenant, "after", "data", "ReadWrite").await;
    put(&s3_client(&access), &access.bucket, "k", b"v").await.unwrap();
    let log = world.driver_log();
    assert!(log.contains("marked ready again"), "the driver repaired it:\n{log}");
}

#[tokio::test]
async fn v1alpha1_driver_serves_on_after_an_apiserver_restart_and_leaks_nothing() {
    let mut world = World::start(CosiVersion::V1Alpha1).await;
    let tenant = world.tenant("cosi-outage").await;
    world.claim(&tenant, "before", &world.delete_class).await;
    let first = world.access(&tenant, "first", "before", "ReadWrite").await;
    put(&s3_client(&first), &first.bucket, "a.txt", b"a").await.unwrap();

    // The driver keeps running through the outage; its watched caches must catch up.
    world.restart_apiserver().await;
    world.claim(&tenant, "after", &world.delete_class).await;
    let second = world.access(&tenant, "second", "after", "ReadWrite").await;
    put(&s3_client(&second), &second.bucket, "b.txt", b"b").await.unwrap();
    assert_eq!(get(&s3_client(&first), &first.bucket, "a.txt").await.unwrap(), b"a");
    assert_ne!(first.bucket, second.bucket);

    // One bucket per claim, one key per access: the sidecar's repeated calls made nothing new.
    let buckets = std::fs::read_dir(world.root.path().join("buckets")).unwrap().count();
    assert_eq!(buckets, 2, "{}", world.logs());
    let store = hostpath_provisioner::BucketStore::open(world.root.path().to_owned(), "reader");
    let store = store.unwrap();
    let accesses = world.version.api(&tenant.client, "BucketAccess", Some(&tenant.namespace));
    for name in ["first", "second"] {
        let uid = accesses.get(name).await.unwrap().metadata.uid.unwrap();
        let owner = bucket_provisioner::bucket::standalone::cosi_account_id(&format!("ba-{uid}"));
        assert_eq!(store.keys_for_user(&owner).len(), 1, "access {name}: {}", world.logs());
    }
    world.assert_never_forbidden();
}

/// A session of `role_arn` at `endpoint` for `token`, as a pod's SDK gets one; or STS's code.
async fn assume(endpoint: &str, role_arn: &str, token: &str) -> Result<S3, String> {
    let http = aws_smithy_http_client::Builder::new().build_http();
    let config = aws_sdk_sts::Config::builder()
        .behavior_version_latest()
        .region(aws_sdk_sts::config::Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .http_client(http.clone())
        .build();
    let answer = aws_sdk_sts::Client::from_conf(config)
        .assume_role_with_web_identity()
        .role_arn(role_arn)
        .role_session_name("pod")
        .web_identity_token(token)
        .send()
        .await
        .map_err(|e| e.code().unwrap_or("<no code>").to_owned())?;
    let c = answer.credentials.unwrap();
    let credentials = aws_sdk_s3::config::Credentials::new(
        c.access_key_id,
        c.secret_access_key,
        Some(c.session_token),
        None,
        "session",
    );
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .http_client(http)
        .region(aws_sdk_s3::config::Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(credentials)
        .force_path_style(true)
        .build();
    Ok(S3::from_conf(config))
}

/// A token of ServiceAccount `name` of `namespace` for the driver's audience, as the kubelet
/// mints a projected one.
async fn token(admin: &kube::Client, namespace: &str, name: &str) -> String {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(admin.clone(), namespace);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(vec!["objectbucket.io".into()]),
            expiration_seconds: Some(600),
            bound_object_ref: None,
        }),
        ..Default::default()
    };
    let params = kube::api::PostParams::default();
    let issued = accounts.create_token_request(name, &params, &request).await.unwrap();
    issued.status.and_then(|s| s.token).expect("a token")
}

/// v1alpha1's `authenticationType: IAM`, under the upstream v0.2.2 controller and sidecar: the
/// access's ServiceAccount (named on the BucketAccess, in the access's own namespace) trades
/// its token for sessions on the bucket; the access holds no key, its `status.accountID` names
/// the role, another ServiceAccount's token is refused, and deleting the access ends the
/// session. v1alpha2, which names no ServiceAccount, is refused by name.
#[tokio::test]
async fn v1alpha1_an_iam_access_lets_its_service_account_in_with_no_key() {
    use k8s_openapi::api::core::v1::Secret;
    let version = CosiVersion::V1Alpha1;
    let world = World::start(version).await;
    let tenant = world.tenant("cosi-iam").await;
    let bucket = world.claim(&tenant, "data", &world.delete_class).await;
    for name in ["app", "other"] {
        world.service_account(&tenant.namespace, name).await;
    }
    let class_name = world.iam_access_class().await;
    let accesses = version.api(&tenant.client, "BucketAccess", Some(&tenant.namespace));
    let names = (class_name.as_str(), "data", "iam-creds");
    let role_arn = world.iam_access(&tenant, "pod-identity", names, "app").await;
    assert!(
        role_arn.starts_with("arn:aws:iam::") && role_arn.contains(":role/cosi-"),
        "{role_arn}"
    );

    // The Secret says where, and holds no key.
    let secrets: kube::Api<Secret> = kube::Api::namespaced(world.admin.clone(), &tenant.namespace);
    let secret = test_support::eventually("the IAM access's Secret", || async {
        secrets.get_opt("iam-creds").await.ok().flatten()
    })
    .await;
    let info = String::from_utf8(secret.data.unwrap()["BucketInfo"].0.clone()).unwrap();
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(info["spec"]["authenticationType"], "IAM");
    let s3_info = &info["spec"]["secretS3"];
    assert_eq!(s3_info["accessKeyID"].as_str().unwrap_or_default(), "", "no key: {info}");
    assert_eq!(s3_info["accessSecretKey"].as_str().unwrap_or_default(), "", "no key: {info}");
    let endpoint = s3_info["endpoint"].as_str().unwrap().to_owned();

    // The access's ServiceAccount gets a session on the bucket; another one does not.
    let app = token(&world.admin, &tenant.namespace, "app").await;
    let s3 = assume(&endpoint, &role_arn, &app).await.unwrap();
    put(&s3, &bucket, "from-a-pod", b"keyless").await.unwrap();
    assert_eq!(get(&s3, &bucket, "from-a-pod").await.unwrap(), b"keyless");
    let other = token(&world.admin, &tenant.namespace, "other").await;
    assert_eq!(assume(&endpoint, &role_arn, &other).await.err().as_deref(), Some("AccessDenied"));

    // Deleting the access ends the session.
    accesses.delete("pod-identity", &DeleteParams::default()).await.unwrap();
    world
        .until("the deleted IAM access's session to stop working", async || {
            get(&s3, &bucket, "from-a-pod").await.is_err()
        })
        .await;
    world.assert_never_forbidden();
}
