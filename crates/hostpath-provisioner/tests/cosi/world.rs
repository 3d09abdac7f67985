//! One COSI world for the hostPath driver: a control plane with one COSI version's CRDs and the
//! upstream controller, `hostpath-bucket-provisioner` serving COSI on a socket with the identity
//! of `deploy/cosi/hostpath/`, the upstream sidecar beside it, and the classes tenants use.

use std::path::PathBuf;
use std::time::Duration;

use aws_sdk_s3::Client as S3;
use aws_sdk_s3::config::{Credentials, Region};
use kube::api::{Api, DynamicObject};
use kube::{Client, ResourceExt};
use serde_json::json;
use test_support::cosi::{Cosi, CosiVersion, Sidecar, create};
use test_support::{CosiTenant, Deployed, S3Access, deployed_identity, unique_suffix};
use tokio::process::{Child, Command};

/// The driver name the tests register the hostPath driver under.
pub fn driver_name() -> String {
    format!("hostpath.test.cosi.bucket-provisioner.io-{}", unique_suffix())
}

/// A running world; everything stops when it is dropped.
pub struct World {
    pub version: CosiVersion,
    pub cosi: Cosi,
    pub admin: Client,
    /// The root the driver keeps its buckets under.
    pub root: tempfile::TempDir,
    /// A BucketClass that deletes buckets with their claim, and one that keeps them.
    pub delete_class: String,
    pub retain_class: String,
    pub access_class: String,
    sidecar: Sidecar,
    // Killed when dropped.
    _driver: Child,
    driver_log: PathBuf,
    _socket_dir: tempfile::TempDir,
}

impl World {
    pub async fn start(version: CosiVersion) -> World {
        let cosi = Cosi::start(version).await.unwrap();
        let admin = cosi.client().await;
        let identity = deployed_identity(cosi.plane(), Deployed::CosiHostPath).await.unwrap();
        let root = tempfile::tempdir().unwrap();
        let socket_dir = tempfile::tempdir().unwrap();
        let socket: PathBuf = socket_dir.path().join("cosi.sock");
        let driver_name = driver_name();
        let s3_port = test_support::free_port().unwrap();
        let metrics_port = test_support::free_port().unwrap();
        // The driver's log goes to a file the tests read (refusals are logged there).
        let driver_log = socket_dir.path().join("driver.log");
        let log_file = std::fs::File::create(&driver_log).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_hostpath-bucket-provisioner"));
        command
            .arg(format!("--root={}", root.path().display()))
            .arg(format!("--s3-listen=127.0.0.1:{s3_port}"))
            .arg("--endpoint-host=127.0.0.1")
            .arg(format!("--kubeconfig={}", identity.kubeconfig.display()))
            .arg(format!("--metrics-address=127.0.0.1:{metrics_port}"))
            .arg(format!("--cosi-endpoint=unix://{}", socket.display()))
            .arg(format!("--cosi-driver-name={driver_name}"))
            .arg("--cosi-only")
            .arg("--leader-elect=false")
            .env("RUST_LOG", "warn,kube_client::client::tls=error")
            .stdout(log_file)
            .kill_on_drop(true);
        let driver = command.spawn().expect("starting hostpath-bucket-provisioner");
        let sidecar = cosi.sidecar(Deployed::CosiHostPath, &socket).await.unwrap();

        let suffix = unique_suffix();
        let delete_class = format!("hostpath-delete-{suffix}");
        let retain_class = format!("hostpath-retain-{suffix}");
        let access_class = format!("hostpath-keys-{suffix}");
        let classes = version.api(&admin, "BucketClass", None);
        for (name, policy) in [(&delete_class, "Delete"), (&retain_class, "Retain")] {
            create(&classes, &version.bucket_class(name, &driver_name, policy, json!({})))
                .await
                .unwrap();
        }
        let access_classes = version.api(&admin, "BucketAccessClass", None);
        create(&access_classes, &version.access_class(&access_class, &driver_name, json!({})))
            .await
            .unwrap();
        World {
            version,
            cosi,
            admin,
            root,
            delete_class,
            retain_class,
            access_class,
            sidecar,
            _driver: driver,
            driver_log,
            _socket_dir: socket_dir,
        }
    }

    pub async fn tenant(&self, prefix: &str) -> CosiTenant {
        CosiTenant::new(self.cosi.plane(), prefix).await.unwrap()
    }

    /// Kills the sidecar and starts it again, as a pod restart would.
    pub fn restart_sidecar(&mut self) {
        self.sidecar.restart().unwrap();
    }

    /// Everything the sidecar logged.
    pub fn sidecar_log(&self) -> String {
        self.sidecar.full_log()
    }

    /// Everything the driver logged.
    pub fn driver_log(&self) -> String {
        std::fs::read_to_string(&self.driver_log).unwrap_or_default()
    }

    /// What the upstream pieces said, for a failing assertion.
    pub fn logs(&self) -> String {
        format!(
            "--- driver ---\n{}\n--- sidecar ---\n{}\n--- controller ---\n{}",
            self.driver_log(),
            self.sidecar.log(40),
            self.cosi.controller_log(20)
        )
    }

    /// A tenant's claim `name` of class `class`; waits until its bucket is ready and answers
    /// the Bucket object's name.
    pub async fn claim(&self, tenant: &CosiTenant, name: &str, class: &str) -> String {
        let claims = self.version.api(&tenant.client, "BucketClaim", Some(&tenant.namespace));
        create(&claims, &self.version.claim(&tenant.namespace, name, class)).await.unwrap();
        self.wait_claim_ready(tenant, name).await
    }

    /// Waits until claim `name` is ready and bound; answers its Bucket object's name.
    pub async fn wait_claim_ready(&self, tenant: &CosiTenant, name: &str) -> String {
        let claims = self.version.api(&tenant.client, "BucketClaim", Some(&tenant.namespace));
        let version = self.version;
        let ready = wait_for(&claims, name, |c| {
            version.claim_ready(c).then(|| version.claim_bucket(c)).flatten()
        });
        ready.await.unwrap_or_else(|last| panic!("claim {name} not ready: {last}\n{}", self.logs()))
    }

    /// A tenant's access `name` to claim `claim` with `mode`, its Secret `name`-creds; waits
    /// until it is granted and reads the Secret as a pod would.
    pub async fn access(
        &self,
        tenant: &CosiTenant,
        name: &str,
        claim: &str,
        mode: &str,
    ) -> S3Access {
        self.request_access(tenant, name, claim, mode).await;
        let accesses = self.version.api(&tenant.client, "BucketAccess", Some(&tenant.namespace));
        let version = self.version;
        let granted = wait_for(&accesses, name, |a| version.access_ready(a).then_some(()));
        granted
            .await
            .unwrap_or_else(|last| panic!("access {name} not granted: {last}\n{}", self.logs()));
        let secret = format!("{name}-creds");
        version.wait_access_secret(&tenant.client, &tenant.namespace, &secret).await
    }

    /// Creates a tenant's access `name` to claim `claim` with `mode` and returns at once.
    pub async fn request_access(&self, tenant: &CosiTenant, name: &str, claim: &str, mode: &str) {
        let accesses = self.version.api(&tenant.client, "BucketAccess", Some(&tenant.namespace));
        let secret = format!("{name}-creds");
        let object =
            self.version.access(&tenant.namespace, name, &self.access_class, claim, &secret, mode);
        create(&accesses, &object).await.unwrap();
    }

    /// The directory a bucket lives in on the driver's disk.
    pub fn bucket_dir(&self, bucket: &str) -> PathBuf {
        self.root.path().join("buckets").join(bucket)
    }
}

/// Polls object `name` until `check` yields a value, for up to three minutes (the v0.2.2
/// sidecar requeues a failed call with backoff); the error carries the last status seen.
pub async fn wait_for<T>(
    api: &Api<DynamicObject>,
    name: &str,
    check: impl Fn(&DynamicObject) -> Option<T>,
) -> Result<T, String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    let mut last = String::from("never seen");
    loop {
        if let Ok(object) = api.get(name).await {
            if let Some(value) = check(&object) {
                return Ok(value);
            }
            last = format!("{} status {}", object.name_any(), object.data["status"]);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(last);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// An S3 client made from nothing but an access Secret.
pub fn s3_client(access: &S3Access) -> S3 {
    let credentials = Credentials::new(
        &access.access_key_id,
        &access.secret_access_key,
        None,
        None,
        "cosi-access",
    );
    let http = aws_smithy_http_client::Builder::new().build_http();
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .http_client(http)
        .region(Region::new(access.region.clone()))
        .endpoint_url(&access.endpoint)
        .credentials_provider(credentials)
        .force_path_style(true)
        .build();
    S3::from_conf(config)
}
