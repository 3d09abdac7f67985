//! `hostpath-bucket-provisioner` as a real process against a real control plane, and the claim's
//! view of it: its Secret and ConfigMap, and an AWS SDK client made from nothing else.

#![allow(dead_code)] // each test binary uses its own subset

mod scoped;
pub mod share;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use aws_sdk_s3::Client as S3;
use aws_sdk_s3::config::{Credentials, Region};
use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::primitives::ByteStream;
use bucket_api::{ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use test_support::{
    ControlPlane, Deployed, bucket_class, delete_claim_and_wait, deployed_identity, install_crds,
    parameters, test_namespace, unique_suffix, wait_for_claim,
};
use tokio::process::{Child, Command};

/// One `hostpath-bucket-provisioner` process (or, split as `deploy/hostpath` runs it, the
/// controller and the endpoint beside it); killed when dropped.
pub struct Provisioner {
    child: Child,
    /// The endpoint's process and its flags, when split.
    endpoint: Option<(Child, Vec<String>)>,
    /// Port of its /metrics, /healthz and /readyz.
    pub metrics_port: u16,
}

/// Set (to anything) to run every test's provisioner split in two processes, as deployed.
pub const SPLIT: &str = "BUCKET_PROVISIONER_SPLIT";

/// Flags only the endpoint's half takes when split.
const ENDPOINT_FLAGS: [&str; 3] =
    ["--admin-credentials-file", "--lifecycle-interval-seconds", "--lifecycle-budget"];
/// Flags only the controller takes when split; the endpoint refuses them.
const CONTROLLER_FLAGS: [&str; 6] = [
    "--kubeconfig",
    "--admin-secret",
    "--endpoint-host",
    "--endpoint-port",
    "--region",
    "--web-identity-audience",
];

impl Provisioner {
    pub fn start_with(
        root: &Path,
        name: &str,
        identity: &str,
        s3_port: u16,
        kubeconfig: &Path,
        extra: &[&str],
    ) -> Provisioner {
        let (command, metrics_port) =
            Self::command(root, name, identity, s3_port, kubeconfig, extra, false);
        Self::spawn(command, metrics_port)
    }

    /// Starts the binary with `RUST_LOG` set to `filter` and its log written to `log`.
    pub fn start_logging(
        root: &Path,
        name: &str,
        identity: &str,
        s3_port: u16,
        kubeconfig: &Path,
        extra: &[&str],
        (filter, log): (&str, Stdio),
    ) -> Provisioner {
        let (mut command, metrics_port) =
            Self::command(root, name, identity, s3_port, kubeconfig, extra, false);
        command.0.env("RUST_LOG", filter).stdout(log);
        Self::spawn(command, metrics_port)
    }

    /// The binary's command line, and the port it serves metrics on. Its log is shown only
    /// when `PROVISIONER_LOG` (a `RUST_LOG` filter) asks for it.
    fn command(
        root: &Path,
        name: &str,
        identity: &str,
        s3_port: u16,
        kubeconfig: &Path,
        extra: &[&str],
        split: bool,
    ) -> ((Command, Option<Vec<String>>), u16) {
        let metrics_port = test_support::free_port().unwrap();
        let filter = std::env::var("PROVISIONER_LOG").ok();
        let log = filter.is_some().then(Stdio::inherit).unwrap_or_else(Stdio::null);
        let filter = filter.unwrap_or_else(|| "warn,kube_client::client::tls=error".into());
        let mut flags = vec![
            format!("--root={}", root.display()),
            format!("--provisioner-name={name}"),
            format!("--identity={identity}"),
            format!("--s3-listen=127.0.0.1:{s3_port}"),
            format!("--endpoint-port={s3_port}"),
            "--endpoint-host=127.0.0.1".to_owned(),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--metrics-address=127.0.0.1:{metrics_port}"),
        ];
        flags.extend(extra.iter().map(|f| f.to_string()));
        let (flags, endpoint) = Self::split(flags, Self::split_asked(split));
        let mut command = Command::new(env!("CARGO_BIN_EXE_hostpath-bucket-provisioner"));
        command
            .args(flags)
            .env("RUST_LOG", filter)
            // Logs go to stdout; shown only when asked for, unless the test reads them.
            .stdout(log)
            .kill_on_drop(true);
        ((command, endpoint), metrics_port)
    }

    fn spawn(
        (mut command, endpoint): (Command, Option<Vec<String>>),
        metrics_port: u16,
    ) -> Provisioner {
        let endpoint = endpoint.map(|flags| {
            (Self::endpoint_command(&flags).spawn().expect("starting the endpoint"), flags)
        });
        let child = command.spawn().expect("starting hostpath-bucket-provisioner");
        Provisioner { child, endpoint, metrics_port }
    }

    /// Whether the provisioner is to run split in two processes: asked by the test, or by
    /// [`SPLIT`] for every test.
    fn split_asked(forced: bool) -> bool {
        forced || std::env::var_os(SPLIT).is_some()
    }

    /// `flags` split between the controller, which reaches the store through a socket, and
    /// the endpoint, which owns the root; the endpoint's flags are `None` when not `split`.
    fn split(flags: Vec<String>, split: bool) -> (Vec<String>, Option<Vec<String>>) {
        if !split {
            return (flags, None);
        }
        let sockets = tempfile::Builder::new().prefix("split").tempdir().unwrap().keep();
        let store = sockets.join("store.sock");
        let review = format!("--review-socket={}", sockets.join("review.sock").display());
        let named = |flag: &String, names: &[&str]| {
            names.iter().any(|n| flag.split('=').next() == Some(*n))
        };
        let mut endpoint = vec![
            format!("--serve-store={}", store.display()),
            review.clone(),
            format!("--metrics-address=127.0.0.1:{}", test_support::free_port().unwrap()),
        ];
        endpoint.extend(
            flags
                .iter()
                .filter(|f| !named(f, &CONTROLLER_FLAGS) && !named(f, &["--metrics-address"]))
                .cloned(),
        );
        let mut controller: Vec<String> = flags
            .into_iter()
            .filter(|f| !named(f, &ENDPOINT_FLAGS) && !named(f, &["--root", "--s3-listen"]))
            .collect();
        controller.push(format!("--store-socket={}", store.display()));
        controller.push(review);
        (controller, Some(endpoint))
    }

    /// The endpoint alone, as a process with no Kubernetes credential: no kubeconfig, an empty
    /// environment.
    fn endpoint_command(flags: &[String]) -> Command {
        let log = std::env::var("PROVISIONER_LOG").ok();
        let mut endpoint = Command::new(env!("CARGO_BIN_EXE_hostpath-bucket-provisioner"));
        endpoint
            .args(flags)
            .env_clear()
            .env("RUST_LOG", log.clone().unwrap_or_else(|| "warn".into()))
            .stdout(if log.is_some() { Stdio::inherit() } else { Stdio::null() })
            .kill_on_drop(true);
        endpoint
    }

    /// The endpoint's process, when split.
    pub fn endpoint(&mut self) -> Option<&mut Child> {
        self.endpoint.as_mut().map(|(child, _)| child)
    }

    /// Stops the controller's process, leaving the endpoint (when split) running.
    pub async fn stop_controller(&mut self) {
        self.child.kill().await.unwrap();
    }

    /// Kills the endpoint's process (when split) and starts it again, alone.
    pub async fn restart_endpoint(&mut self) {
        let (child, flags) = self.endpoint.as_mut().expect("a split provisioner");
        child.kill().await.unwrap();
        *child = Self::endpoint_command(flags).spawn().expect("starting the endpoint again");
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// Whether the process is still running (it has not exited).
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("asking after the process").is_none()
    }

    /// Peak resident memory so far, from the kernel's own accounting.
    pub fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Waits for the process to exit by itself, at most `within`; `None` if it is still running.
    pub async fn exited(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let status = tokio::time::timeout(within, self.child.wait()).await.ok()?;
        Some(status.expect("waiting for the process"))
    }

    pub async fn kill(mut self) {
        self.child.kill().await.unwrap();
        if let Some((endpoint, _)) = self.endpoint.as_mut() {
            endpoint.kill().await.unwrap();
        }
    }
}

/// One test's world: its namespace, a bucket root, a provisioner name and an S3 port.
pub struct Env {
    pub client: Client,
    pub ns: String,
    pub claims: Api<ObjectBucketClaim>,
    pub root: tempfile::TempDir,
    pub name: String,
    pub port: u16,
    /// The provisioner's kubeconfig: the ServiceAccount of `deploy/hostpath/`.
    pub kubeconfig: PathBuf,
}

impl Env {
    /// An environment on the shared control plane.
    pub async fn new(prefix: &str) -> Env {
        Self::on(ControlPlane::shared(), prefix).await
    }

    /// An environment on `plane`: the CRDs installed, a namespace of its own, and the
    /// provisioner started with the identity and RBAC of `deploy/hostpath/`.
    pub async fn on(plane: &ControlPlane, prefix: &str) -> Env {
        let client = plane.client().await;
        install_crds(&client).await.expect("installing the CRDs");
        let identity = deployed_identity(plane, Deployed::HostPath).await.unwrap();
        let ns = test_namespace(&client, prefix).await;
        Env {
            claims: Api::namespaced(client.clone(), &ns),
            client,
            ns,
            root: tempfile::tempdir().unwrap(),
            name: format!("hostpath.test/{}", unique_suffix()),
            port: test_support::free_port().unwrap(),
            kubeconfig: identity.kubeconfig,
        }
    }

    pub fn start(&self, identity: &str) -> Provisioner {
        self.start_with(identity, &["--leader-elect=false"])
    }

    /// Starts the provisioner with other flags than the usual `--leader-elect=false`.
    pub fn start_with(&self, identity: &str, flags: &[&str]) -> Provisioner {
        Provisioner::start_with(
            self.root.path(),
            &self.name,
            identity,
            self.port,
            &self.kubeconfig,
            flags,
        )
    }

    /// The provisioner's command(s) with `flags`, split in two when `split` says so.
    fn command(
        &self,
        identity: &str,
        flags: &[&str],
        split: bool,
    ) -> ((Command, Option<Vec<String>>), u16) {
        let (root, name, kubeconfig) = (self.root.path(), &self.name, &self.kubeconfig);
        Provisioner::command(root, name, identity, self.port, kubeconfig, flags, split)
    }

    /// Starts the provisioner split in two processes, as `deploy/hostpath` runs it: the endpoint
    /// with no Kubernetes credential, the controller reaching its store through a socket.
    pub fn start_split(&self, identity: &str, flags: &[&str]) -> Provisioner {
        let (command, metrics_port) = self.command(identity, flags, true);
        Provisioner::spawn(command, metrics_port)
    }

    /// Creates Secret `name` with the operator credential `key`/`secret`, as an operator does;
    /// answers the `--admin-secret` flag that names it.
    pub async fn admin_secret(&self, name: &str, (key, secret): (&str, &str)) -> String {
        let object = Secret {
            metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
            string_data: Some(BTreeMap::from([
                ("AWS_ACCESS_KEY_ID".into(), key.into()),
                ("AWS_SECRET_ACCESS_KEY".into(), secret.into()),
            ])),
            ..Default::default()
        };
        let secrets = Api::<Secret>::namespaced(self.client.clone(), &self.ns);
        secrets.create(&PostParams::default(), &object).await.unwrap();
        format!("--admin-secret={}/{name}", self.ns)
    }

    /// Starts the provisioner (as [`Env::start`] does) set to abort at the crash point `step`
    /// (see `bucket_provisioner::kubernetes::crash_point`).
    pub fn start_crashing_at(&self, identity: &str, step: &str) -> Provisioner {
        self.start_crashing_with(identity, step, &["--leader-elect=false"])
    }

    /// [`Env::start_crashing_at`] with other flags than the usual `--leader-elect=false`.
    pub fn start_crashing_with(&self, identity: &str, step: &str, flags: &[&str]) -> Provisioner {
        let (mut command, metrics_port) = self.command(identity, flags, false);
        command.0.env(bucket_provisioner::kubernetes::crash_point::CRASH_AT, step);
        Provisioner::spawn(command, metrics_port)
    }

    /// Another tenant: a namespace of its own on the same cluster, for the same provisioner.
    pub async fn tenant(&self, prefix: &str) -> Tenant {
        Tenant::new(&self.client, test_namespace(&self.client, prefix).await)
    }

    /// This environment's own namespace, seen as a tenant.
    pub fn home(&self) -> Tenant {
        Tenant::new(&self.client, self.ns.clone())
    }

    pub fn bucket_dir(&self, bucket: &str) -> PathBuf {
        self.root.path().join("buckets").join(bucket)
    }

    pub async fn class(&self, pairs: &[(&str, &str)], reclaim: &str) -> String {
        bucket_class(&self.client, "hostpath", &self.name, parameters(pairs), Some(reclaim)).await
    }

    pub async fn claim(&self, name: &str, class: &str, bucket: Option<&str>) {
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

    pub async fn wait(&self, name: &str, phase: ClaimPhase, reason: &str) -> ObjectBucketClaim {
        self.home().wait(name, phase, reason).await
    }

    pub async fn delete(&self, name: &str) {
        self.home().delete(name).await
    }

    /// A new class with `reclaim`, claim `name` of a new bucket on it, Bound; returns an S3
    /// client made from the claim's credentials and the bucket's name.
    pub async fn bound(&self, name: &str, reclaim: &str) -> (S3, String) {
        let class = self.class(&[], reclaim).await;
        self.claim(name, &class, None).await;
        self.wait(name, ClaimPhase::Bound, "Bound").await;
        self.s3_for(name).await
    }

    /// What a pod gets through `envFrom` on the claim's Secret and ConfigMap.
    pub async fn env_of(&self, name: &str) -> BTreeMap<String, String> {
        self.home().env_of(name).await
    }

    /// An S3 client configured from nothing but the claim's environment.
    pub async fn s3_for(&self, name: &str) -> (S3, String) {
        self.home().s3_for(name).await
    }

    /// Merges `config` into the claim's `additionalConfig` and waits until the ObjectBucket
    /// records it, which happens once the backend applied it.
    pub async fn change_config(&self, claim: &str, config: serde_json::Value) {
        let patch = serde_json::json!({ "spec": { "additionalConfig": config } });
        let params = PatchParams::default();
        let patched = self.claims.patch(claim, &params, &Patch::Merge(&patch)).await.unwrap();
        let wanted = patched.spec.additional_config.filter(|c| !c.is_empty());
        let buckets: Api<ObjectBucket> = Api::all(self.client.clone());
        let name = format!("obc-{}-{claim}", self.ns);
        test_support::eventually("the ObjectBucket to record the new additionalConfig", || async {
            let recorded = buckets.get(&name).await.ok()?.spec.endpoint?.additional_config;
            (recorded.filter(|c| !c.is_empty()) == wanted).then_some(())
        })
        .await;
    }
}

pub fn s3_client(env: &BTreeMap<String, String>) -> S3 {
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

pub async fn put(s3: &S3, bucket: &str, key: &str, body: &[u8]) -> Result<(), String> {
    s3.put_object()
        .bucket(bucket)
        .key(key)
        .body(ByteStream::from(body.to_vec()))
        .send()
        .await
        .map(|_| ())
        .map_err(|e| e.into_service_error().code().unwrap_or("unknown").to_string())
}

pub async fn get(s3: &S3, bucket: &str, key: &str) -> Result<Vec<u8>, String> {
    let output = s3
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .map_err(|e| e.into_service_error().code().unwrap_or("unknown").to_string())?;
    Ok(output.body.collect().await.unwrap().into_bytes().to_vec())
}

pub fn s3_with(port: u16, key: &str, secret: &str) -> S3 {
    let env = BTreeMap::from([
        ("AWS_ACCESS_KEY_ID".to_string(), key.to_string()),
        ("AWS_SECRET_ACCESS_KEY".to_string(), secret.to_string()),
        ("AWS_REGION".to_string(), "us-east-1".to_string()),
        ("AWS_ENDPOINT_URL".to_string(), format!("http://127.0.0.1:{port}")),
    ]);
    s3_client(&env)
}

pub fn code<T, E: ProvideErrorMetadata>(result: Result<T, E>) -> String {
    match result {
        Ok(_) => "ok".into(),
        Err(e) => e.code().unwrap_or("unknown").to_string(),
    }
}

/// A namespace's claims and what a tenant can do there.
pub struct Tenant {
    pub client: Client,
    pub ns: String,
    pub claims: Api<ObjectBucketClaim>,
}

impl Tenant {
    pub fn new(client: &Client, ns: String) -> Tenant {
        Tenant { claims: Api::namespaced(client.clone(), &ns), client: client.clone(), ns }
    }

    pub async fn create(&self, name: &str, spec: ObjectBucketClaimSpec) -> ObjectBucketClaim {
        self.create_claim(ObjectBucketClaim::new(name, spec)).await
    }

    pub async fn create_claim(&self, claim: ObjectBucketClaim) -> ObjectBucketClaim {
        self.claims.create(&PostParams::default(), &claim).await.unwrap()
    }

    pub async fn wait(&self, name: &str, phase: ClaimPhase, reason: &str) -> ObjectBucketClaim {
        wait_for_claim(&self.claims, name, phase, reason).await
    }

    pub async fn delete(&self, name: &str) {
        delete_claim_and_wait(&self.claims, name).await;
    }

    pub async fn secret(&self, name: &str) -> Option<Secret> {
        Api::<Secret>::namespaced(self.client.clone(), &self.ns).get_opt(name).await.unwrap()
    }

    /// What a pod gets through `envFrom` on the claim's Secret and ConfigMap.
    pub async fn env_of(&self, name: &str) -> BTreeMap<String, String> {
        let secret = self.secret(name).await.expect("the claim's Secret");
        let config =
            Api::<ConfigMap>::namespaced(self.client.clone(), &self.ns).get(name).await.unwrap();
        let mut env = config.data.unwrap_or_default();
        for (key, value) in secret.data.unwrap_or_default() {
            env.insert(key, String::from_utf8(value.0).unwrap());
        }
        env
    }

    /// An S3 client configured from nothing but the claim's environment, and its bucket.
    pub async fn s3_for(&self, name: &str) -> (S3, String) {
        let env = self.env_of(name).await;
        (s3_client(&env), env["BUCKET_NAME"].clone())
    }
}
