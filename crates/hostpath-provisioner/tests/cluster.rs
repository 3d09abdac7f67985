//! `hostpath-bucket-provisioner` as a real process against the real control plane, used through
//! the credentials it writes, with the AWS SDK as the client.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use aws_sdk_s3::Client as S3;
use aws_sdk_s3::config::{Credentials, Region};
use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use bucket_api::{
    ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec, ObjectBucketPhase,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use test_support::{ControlPlane, client_with_crds, eventually, test_namespace, unique_suffix};
use tokio::process::{Child, Command};

/// One `hostpath-bucket-provisioner` process; killed when dropped.
struct Provisioner {
    child: Child,
}

impl Provisioner {
    fn start(root: &Path, name: &str, identity: &str, s3_port: u16) -> Provisioner {
        let kubeconfig = ControlPlane::shared().kubeconfig_path().to_owned();
        Self::start_with(root, name, identity, s3_port, &kubeconfig, &["--leader-elect=false"])
    }

    fn start_with(
        root: &Path,
        name: &str,
        identity: &str,
        s3_port: u16,
        kubeconfig: &Path,
        extra: &[&str],
    ) -> Provisioner {
        let child = Command::new(env!("CARGO_BIN_EXE_hostpath-bucket-provisioner"))
            .arg(format!("--root={}", root.display()))
            .arg(format!("--provisioner-name={name}"))
            .arg(format!("--identity={identity}"))
            .arg(format!("--s3-listen=127.0.0.1:{s3_port}"))
            .arg("--endpoint-host=127.0.0.1")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--metrics-address=127.0.0.1:0")
            .args(extra)
            .env("RUST_LOG", "warn,kube_client::client::tls=error")
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("starting hostpath-bucket-provisioner");
        Provisioner { child }
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// Peak resident memory so far, from the kernel's own accounting.
    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    async fn kill(mut self) {
        self.child.kill().await.unwrap();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

struct Env {
    client: Client,
    ns: String,
    claims: Api<ObjectBucketClaim>,
    root: tempfile::TempDir,
    name: String,
    port: u16,
}

impl Env {
    async fn new(prefix: &str) -> Env {
        let client = client_with_crds().await;
        let ns = test_namespace(&client, prefix).await;
        Env {
            claims: Api::namespaced(client.clone(), &ns),
            client,
            ns,
            root: tempfile::tempdir().unwrap(),
            name: format!("hostpath.test/{}", unique_suffix()),
            port: free_port(),
        }
    }

    fn start(&self, identity: &str) -> Provisioner {
        Provisioner::start(self.root.path(), &self.name, identity, self.port)
    }

    fn bucket_dir(&self, bucket: &str) -> PathBuf {
        self.root.path().join("buckets").join(bucket)
    }

    async fn class(&self, parameters: &[(&str, &str)], reclaim: &str) -> String {
        let name = format!("hostpath-{}", unique_suffix());
        let class = StorageClass {
            metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
            provisioner: self.name.clone(),
            reclaim_policy: Some(reclaim.into()),
            parameters: Some(
                parameters.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ),
            ..Default::default()
        };
        Api::<StorageClass>::all(self.client.clone())
            .create(&PostParams::default(), &class)
            .await
            .unwrap();
        name
    }

    async fn claim(&self, name: &str, class: &str, bucket: Option<&str>) {
        let spec = ObjectBucketClaimSpec {
            storage_class_name: class.into(),
            bucket_name: bucket.map(Into::into),
            generate_bucket_name: Some(name.into()),
            ..Default::default()
        };
        self.claims
            .create(&PostParams::default(), &ObjectBucketClaim::new(name, spec))
            .await
            .unwrap();
    }

    async fn wait(&self, name: &str, phase: ClaimPhase, reason: &str) -> ObjectBucketClaim {
        eventually(&format!("claim {name} {phase:?}/{reason}"), || async {
            let claim = self.claims.get_opt(name).await.ok()??;
            let status = claim.status.as_ref()?;
            let ready = status.conditions.iter().find(|c| c.type_ == "Ready")?;
            (status.phase == Some(phase) && ready.reason == reason).then_some(claim)
        })
        .await
    }

    async fn delete(&self, name: &str) {
        self.claims.delete(name, &DeleteParams::default()).await.unwrap();
        eventually(&format!("claim {name} to be gone"), || async {
            self.claims.get_opt(name).await.ok()?.is_none().then_some(())
        })
        .await;
    }

    /// A new class with `reclaim`, claim `name` of a new bucket on it, Bound; returns an S3
    /// client made from the claim's credentials and the bucket's name.
    async fn bound(&self, name: &str, reclaim: &str) -> (S3, String) {
        let class = self.class(&[], reclaim).await;
        self.claim(name, &class, None).await;
        self.wait(name, ClaimPhase::Bound, "Bound").await;
        self.s3_for(name).await
    }

    /// What a pod gets through `envFrom` on the claim's Secret and ConfigMap.
    async fn env_of(&self, name: &str) -> BTreeMap<String, String> {
        let secret =
            Api::<Secret>::namespaced(self.client.clone(), &self.ns).get(name).await.unwrap();
        let config =
            Api::<ConfigMap>::namespaced(self.client.clone(), &self.ns).get(name).await.unwrap();
        let mut env = config.data.unwrap_or_default();
        for (key, value) in secret.data.unwrap_or_default() {
            env.insert(key, String::from_utf8(value.0).unwrap());
        }
        env
    }

    /// An S3 client configured from nothing but the claim's environment.
    async fn s3_for(&self, name: &str) -> (S3, String) {
        let env = self.env_of(name).await;
        (s3_client(&env), env["BUCKET_NAME"].clone())
    }
}

fn s3_client(env: &BTreeMap<String, String>) -> S3 {
    let credentials = Credentials::new(
        &env["AWS_ACCESS_KEY_ID"],
        &env["AWS_SECRET_ACCESS_KEY"],
        None,
        None,
        "claim",
    );
    let http = aws_smithy_http_client::Builder::new().build_http();
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .http_client(http)
        .region(Region::new(env["AWS_REGION"].clone()))
        .endpoint_url(&env["AWS_ENDPOINT_URL"])
        .credentials_provider(credentials)
        .force_path_style(true)
        .build();
    S3::from_conf(config)
}

async fn put(s3: &S3, bucket: &str, key: &str, body: &[u8]) -> Result<(), String> {
    s3.put_object()
        .bucket(bucket)
        .key(key)
        .body(ByteStream::from(body.to_vec()))
        .send()
        .await
        .map(|_| ())
        .map_err(|e| e.into_service_error().code().unwrap_or("unknown").to_string())
}

async fn get(s3: &S3, bucket: &str, key: &str) -> Result<Vec<u8>, String> {
    let output = s3
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .map_err(|e| e.into_service_error().code().unwrap_or("unknown").to_string())?;
    Ok(output.body.collect().await.unwrap().into_bytes().to_vec())
}

#[tokio::test]
async fn claim_lifecycle_with_real_objects() {
    let env = Env::new("hp-life").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[], "Delete").await;
    env.claim("photos", &class, None).await;
    env.wait("photos", ClaimPhase::Bound, "Bound").await;

    let (s3, bucket) = env.s3_for("photos").await;
    assert!(env.bucket_dir(&bucket).is_dir(), "the bucket is a directory under the root");
    put(&s3, &bucket, "albums/2026/cat.jpg", b"meow").await.unwrap();
    put(&s3, &bucket, "albums/2026/dog.jpg", b"woof").await.unwrap();
    assert_eq!(get(&s3, &bucket, "albums/2026/cat.jpg").await.unwrap(), b"meow");
    let listed = s3.list_objects_v2().bucket(&bucket).prefix("albums/").send().await.unwrap();
    let keys: Vec<_> = listed.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(keys, ["albums/2026/cat.jpg", "albums/2026/dog.jpg"]);
    let buckets = s3.list_buckets().send().await.unwrap();
    let names: Vec<_> = buckets.buckets().iter().filter_map(|b| b.name()).collect();
    assert_eq!(names, [bucket.as_str()]);

    env.delete("photos").await;
    assert!(!env.bucket_dir(&bucket).exists(), "the Delete policy removes the directory");
}

#[tokio::test]
async fn keys_are_isolated_between_claims() {
    let env = Env::new("hp-iso").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[], "Delete").await;
    env.claim("alice", &class, None).await;
    env.claim("bob", &class, None).await;
    env.wait("alice", ClaimPhase::Bound, "Bound").await;
    env.wait("bob", ClaimPhase::Bound, "Bound").await;
    let (alice, alice_bucket) = env.s3_for("alice").await;
    let (bob, bob_bucket) = env.s3_for("bob").await;
    put(&alice, &alice_bucket, "diary", b"private").await.unwrap();

    assert_eq!(get(&bob, &alice_bucket, "diary").await, Err("AccessDenied".into()));
    assert_eq!(put(&bob, &alice_bucket, "graffiti", b"x").await, Err("AccessDenied".into()));
    assert_eq!(put(&alice, &bob_bucket, "graffiti", b"x").await, Err("AccessDenied".into()));
    let listed = bob.list_objects_v2().bucket(&alice_bucket).send().await;
    assert_eq!(listed.unwrap_err().into_service_error().code(), Some("AccessDenied"));
}

#[tokio::test]
async fn static_bucket_grant_and_revoke_keep_the_data() {
    let env = Env::new("hp-static").await;
    let _provisioner = env.start("node-a");
    // The operator's bucket: a directory made by hand under the root.
    std::fs::create_dir_all(env.bucket_dir("team-share")).unwrap();
    std::fs::write(env.bucket_dir("team-share").join("readme.txt"), b"hello team").unwrap();
    let class = env.class(&[("bucketName", "team-share")], "Delete").await;
    env.claim("member", &class, None).await;
    env.wait("member", ClaimPhase::Bound, "Bound").await;

    let (s3, bucket) = env.s3_for("member").await;
    assert_eq!(bucket, "team-share");
    assert_eq!(get(&s3, &bucket, "readme.txt").await.unwrap(), b"hello team");
    put(&s3, &bucket, "notes.txt", b"from the claim").await.unwrap();

    env.delete("member").await;
    assert_eq!(get(&s3, &bucket, "readme.txt").await, Err("InvalidAccessKeyId".into()));
    assert_eq!(
        std::fs::read(env.bucket_dir("team-share").join("notes.txt")).unwrap(),
        b"from the claim"
    );
}

#[tokio::test]
async fn retain_keeps_the_data() {
    let env = Env::new("hp-retain").await;
    let _provisioner = env.start("node-a");
    let (s3, bucket) = env.bound("archive", "Retain").await;
    put(&s3, &bucket, "2025.tar", b"old data").await.unwrap();

    env.delete("archive").await;
    assert_eq!(std::fs::read(env.bucket_dir(&bucket).join("2025.tar")).unwrap(), b"old data");
    let ob: ObjectBucket =
        Api::all(env.client.clone()).get(&format!("obc-{}-archive", env.ns)).await.unwrap();
    assert_eq!(ob.status.and_then(|s| s.phase), Some(ObjectBucketPhase::Released));
}

#[tokio::test]
async fn another_identity_never_deletes_the_bucket() {
    let env = Env::new("hp-foreign").await;
    let first = env.start("node-a");
    let (s3, bucket) = env.bound("owned", "Delete").await;
    put(&s3, &bucket, "keep", b"mine").await.unwrap();
    first.kill().await;

    // The same root served by a process with another identity.
    let _second = env.start("node-b");
    env.delete("owned").await;
    assert_eq!(std::fs::read(env.bucket_dir(&bucket).join("keep")).unwrap(), b"mine");
    let ob: ObjectBucket =
        Api::all(env.client.clone()).get(&format!("obc-{}-owned", env.ns)).await.unwrap();
    let status = ob.status.unwrap();
    assert_eq!(status.phase, Some(ObjectBucketPhase::Failed));
    let message = &status.conditions[0].message;
    assert!(message.contains("left alone"), "{message}");
}

#[tokio::test]
async fn path_escapes_in_names_are_rejected() {
    let env = Env::new("hp-escape").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[], "Delete").await;
    let escaping_class = env.class(&[("bucketName", "../outside")], "Delete").await;
    env.claim("dots", &class, Some("../../etc")).await;
    env.claim("absolute", &class, Some("/etc/passwd")).await;
    env.claim("via-class", &escaping_class, None).await;
    env.wait("dots", ClaimPhase::Failed, "InvalidBucketName").await;
    env.wait("absolute", ClaimPhase::Failed, "InvalidBucketName").await;
    env.wait("via-class", ClaimPhase::Failed, "InvalidStorageClass").await;
    let parent = env.root.path().parent().unwrap();
    assert!(!parent.join("outside").exists() && !parent.join("etc").exists());
    let buckets =
        std::fs::read_dir(env.root.path().join("buckets")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(buckets, 0, "nothing was created");
}

#[tokio::test]
async fn keys_keep_working_after_a_restart() {
    let env = Env::new("hp-restart").await;
    let first = env.start("node-a");
    let (s3, bucket) = env.bound("durable", "Delete").await;
    put(&s3, &bucket, "before", b"restart").await.unwrap();
    first.kill().await;

    let _second = env.start("node-a");
    let body = eventually("the endpoint to answer again", || async {
        get(&s3, &bucket, "before").await.ok()
    })
    .await;
    assert_eq!(body, b"restart");
    put(&s3, &bucket, "after", b"still mine").await.unwrap();
}

#[tokio::test]
async fn multipart_upload_of_a_large_object_keeps_memory_flat() {
    let env = Env::new("hp-large").await;
    let provisioner = env.start("node-a");
    let (s3, bucket) = env.bound("large", "Delete").await;
    let baseline = provisioner.peak_rss_kib();

    // 24 MiB in three 8 MiB parts, each part distinct so misplaced parts would show.
    let parts: Vec<Vec<u8>> = (0..3u8)
        .map(|i| (0..8 << 20).map(|j: u32| (j as u8) ^ i.wrapping_mul(37)).collect())
        .collect();
    let upload = s3.create_multipart_upload().bucket(&bucket).key("big.bin").send().await.unwrap();
    let id = upload.upload_id().unwrap();
    let mut completed = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let number = i as i32 + 1;
        let out = s3
            .upload_part()
            .bucket(&bucket)
            .key("big.bin")
            .upload_id(id)
            .part_number(number)
            .body(ByteStream::from(part.clone()))
            .send()
            .await
            .unwrap();
        completed
            .push(CompletedPart::builder().part_number(number).e_tag(out.e_tag().unwrap()).build());
    }
    s3.complete_multipart_upload()
        .bucket(&bucket)
        .key("big.bin")
        .upload_id(id)
        .multipart_upload(CompletedMultipartUpload::builder().set_parts(Some(completed)).build())
        .send()
        .await
        .unwrap();
    let body = get(&s3, &bucket, "big.bin").await.unwrap();
    assert_eq!(body.len(), 24 << 20);
    assert!(body == parts.concat(), "the object reads back byte for byte");

    let grown_mib = provisioner.peak_rss_kib().saturating_sub(baseline) / 1024;
    assert!(grown_mib < 16, "the provisioner's peak memory grew by {grown_mib} MiB for 24 MiB");

    // A 64 MiB single PUT: buffering it whole would show up as at least that much memory.
    let single: Vec<u8> = (0..64u32 << 20).map(|j| (j % 251) as u8).collect();
    put(&s3, &bucket, "single.bin", &single).await.unwrap();
    assert!(get(&s3, &bucket, "single.bin").await.unwrap() == single);
    let grown_mib = provisioner.peak_rss_kib().saturating_sub(baseline) / 1024;
    assert!(grown_mib < 32, "the provisioner's peak memory grew by {grown_mib} MiB for 64 MiB");
}

#[tokio::test]
async fn the_deployed_rbac_is_enough_for_a_whole_lifecycle() {
    let env = Env::new("hp-rbac").await;
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/hostpath");
    let rbac = tempfile::tempdir().unwrap();
    for file in ["00-namespace.yaml", "10-rbac.yaml"] {
        std::fs::copy(deploy.join(file), rbac.path().join(file)).unwrap();
    }
    test_support::apply_manifests(&env.client, rbac.path(), test_support::Apply::ForReal)
        .await
        .unwrap();
    // The provisioner acts as its ServiceAccount, with nothing but the deployed permissions.
    let admin = std::fs::read_to_string(ControlPlane::shared().kubeconfig_path()).unwrap();
    let mut config: serde_yaml::Value = serde_yaml::from_str(&admin).unwrap();
    config["users"][0]["user"]["as"] =
        "system:serviceaccount:bucket-provisioner:hostpath-bucket-provisioner".into();
    let kubeconfig = rbac.path().join("kubeconfig");
    std::fs::write(&kubeconfig, serde_yaml::to_string(&config).unwrap()).unwrap();
    let _provisioner = Provisioner::start_with(
        env.root.path(),
        &env.name,
        "node-a",
        env.port,
        &kubeconfig,
        &["--leader-elect=true", "--leader-election-namespace=bucket-provisioner"],
    );

    let (s3, bucket) = env.bound("least", "Delete").await;
    put(&s3, &bucket, "object", b"with least privilege").await.unwrap();
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(env.client.clone(), &env.ns);
    let recorded = events.list(&Default::default()).await.unwrap();
    assert!(recorded.items.iter().any(|e| e.reason.as_deref() == Some("Provisioned")));
    env.delete("least").await;
    assert!(!env.bucket_dir(&bucket).exists());
}

fn s3_with(port: u16, key: &str, secret: &str) -> S3 {
    let env = BTreeMap::from([
        ("AWS_ACCESS_KEY_ID".to_string(), key.to_string()),
        ("AWS_SECRET_ACCESS_KEY".to_string(), secret.to_string()),
        ("AWS_REGION".to_string(), "us-east-1".to_string()),
        ("AWS_ENDPOINT_URL".to_string(), format!("http://127.0.0.1:{port}")),
    ]);
    s3_client(&env)
}

fn code<T, E: ProvideErrorMetadata>(result: Result<T, E>) -> String {
    match result {
        Ok(_) => "ok".into(),
        Err(e) => e.code().unwrap_or("unknown").to_string(),
    }
}

#[tokio::test]
async fn operator_bucket_is_granted_to_a_claim_and_outlives_it() {
    let env = Env::new("hp-admin").await;
    let secret = Secret {
        metadata: ObjectMeta { name: Some("s3-admin".into()), ..Default::default() },
        string_data: Some(BTreeMap::from([
            ("AWS_ACCESS_KEY_ID".into(), "OPERATOR01".into()),
            ("AWS_SECRET_ACCESS_KEY".into(), "operator-secret-0123".into()),
        ])),
        ..Default::default()
    };
    Api::<Secret>::namespaced(env.client.clone(), &env.ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let kubeconfig = ControlPlane::shared().kubeconfig_path().to_owned();
    let admin_secret = format!("--admin-secret={}/s3-admin", env.ns);
    let _provisioner = Provisioner::start_with(
        env.root.path(),
        &env.name,
        "node-a",
        env.port,
        &kubeconfig,
        &["--leader-elect=false", &admin_secret],
    );
    let admin = s3_with(env.port, "OPERATOR01", "operator-secret-0123");
    eventually("the operator to create a bucket", || async {
        admin.create_bucket().bucket("team-share").send().await.ok()
    })
    .await;
    put(&admin, "team-share", "seed.txt", b"from the operator").await.unwrap();

    let class = env.class(&[("bucketName", "team-share")], "Delete").await;
    env.claim("member", &class, None).await;
    env.wait("member", ClaimPhase::Bound, "Bound").await;
    let (claim, bucket) = env.s3_for("member").await;
    assert_eq!(bucket, "team-share");
    assert_eq!(get(&claim, &bucket, "seed.txt").await.unwrap(), b"from the operator");
    put(&claim, &bucket, "from-claim.txt", b"written by the claim").await.unwrap();

    // Claim keys keep exactly their powers; a bound bucket cannot be deleted.
    assert_eq!(code(claim.create_bucket().bucket("claims-cannot").send().await), "AccessDenied");
    assert_eq!(code(claim.delete_bucket().bucket(&bucket).send().await), "AccessDenied");
    assert_eq!(code(admin.delete_bucket().bucket(&bucket).send().await), "InvalidBucketState");

    env.delete("member").await;
    assert_eq!(get(&admin, &bucket, "from-claim.txt").await.unwrap(), b"written by the claim");
    assert_eq!(code(admin.delete_bucket().bucket(&bucket).send().await), "BucketNotEmpty");
    for key in ["seed.txt", "from-claim.txt"] {
        admin.delete_object().bucket(&bucket).key(key).send().await.unwrap();
    }
    admin.delete_bucket().bucket(&bucket).send().await.unwrap();
    assert!(!env.bucket_dir(&bucket).exists());
}
