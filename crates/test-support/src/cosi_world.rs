//! One COSI world for any driver binary: a control plane with one COSI version's CRDs and the
//! upstream controller, the driver serving COSI on a socket with the identity of its
//! `deploy/cosi/<backend>/` folder (`--cosi-only`, as deployed), the upstream sidecar beside it
//! with the same identity, and the classes tenants use.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::cosi::{Cosi, CosiVersion, Sidecar, create};
use crate::unique_suffix;
use crate::{
    CosiTenant, Deployed, S3Access, Supervised, deployed_identity, free_port, rbac_refusals,
};

/// How long a step of a COSI object's life may take (a claim or an access ready, a deletion
/// carried out): the controller and the sidecar each requeue a failed step with a backoff that
/// grows to minutes, so a loaded machine is slow, not wrong.
pub const COSI_WAIT: Duration = Duration::from_secs(300);

/// How long RBAC may take to serve the driver's identity again after an apiserver restart.
const RBAC_WARM_UP: Duration = Duration::from_secs(60);

/// Once RBAC serves the identity again, how long a refusal it answered just before may still
/// take to reach a log (a loaded machine can hold a process between reply and write).
const LOG_SETTLE: Duration = Duration::from_secs(2);

/// A driver binary and the arguments of its backend; the world adds the identity, the socket,
/// the driver name, `--cosi-only`, no leader election, and the store as the Deployment of the
/// driver's `deploy/cosi/` folder names it.
pub struct DriverBinary {
    /// The executable (`env!("CARGO_BIN_EXE_...")`).
    pub program: PathBuf,
    /// The backend's own arguments (hostPath's root and S3 listener, ...).
    pub args: Vec<String>,
    /// The test's store, by `--cosi-parameter` key: each value replaces the one the Deployment
    /// gives that key, and a key it does not name is added (an S3 endpoint for moto). What the
    /// Deployment names and the test does not (the Secret of the store's credentials, ...)
    /// stays as deployed.
    pub store: BTreeMap<String, String>,
}

/// The `--cosi-parameter` entries of the driver container of `deployed`'s Deployment, by key.
pub fn deployed_store(deployed: Deployed) -> Result<BTreeMap<String, String>> {
    let dir = crate::deploy_dir().join(deployed.folder());
    let objects = crate::read_manifests(&dir)?;
    let deployment = objects
        .iter()
        .map(|(_, object)| object)
        .find(|o| o.types.as_ref().is_some_and(|t| t.kind == "Deployment"))
        .with_context(|| format!("no Deployment in {}", dir.display()))?;
    let containers = deployment.data["spec"]["template"]["spec"]["containers"].as_array();
    let driver = containers
        .into_iter()
        .flatten()
        .find(|c| c["name"] == "driver")
        .with_context(|| format!("no driver container in {}", dir.display()))?;
    let mut store = BTreeMap::new();
    for arg in driver["args"].as_array().into_iter().flatten().filter_map(|a| a.as_str()) {
        if let Some(entry) = arg.strip_prefix("--cosi-parameter=") {
            let (key, value) = entry.split_once('=').with_context(|| format!("{arg:?}"))?;
            store.insert(key.to_owned(), value.to_owned());
        }
    }
    Ok(store)
}

/// A running world; everything stops when it is dropped.
pub struct CosiWorld {
    // Declared first: the sidecar and the driver stop before their apiserver.
    sidecar: Sidecar,
    driver: Supervised,
    /// The version it serves.
    pub version: CosiVersion,
    /// The upstream controller and its control plane.
    pub cosi: Cosi,
    /// An administrator's client, for what an operator does.
    pub admin: Client,
    /// The `driverName` the driver serves and the classes name.
    pub driver_name: String,
    /// A BucketClass that deletes buckets with their claim.
    pub delete_class: String,
    /// A BucketClass that keeps them.
    pub retain_class: String,
    /// A BucketAccessClass handing out keys.
    pub access_class: String,
    /// A BucketAccessClass handing out read-only keys (`accessMode`, v1alpha1's only way to
    /// ask a mode; v1alpha2 asks it per claim).
    pub read_only_class: String,
    /// The driver's unix socket.
    pub socket: PathBuf,
    _socket_dir: tempfile::TempDir,
    /// A client acting as the identity the driver and the sidecar share.
    identity: Client,
    /// Byte ranges of the sidecar's and the driver's logs written while RBAC warmed up after
    /// each apiserver restart.
    warm_ups: Vec<WarmUp>,
}

/// The parts of the logs written from an apiserver restart until RBAC served the driver's
/// identity again.
struct WarmUp {
    sidecar: Range<usize>,
    driver: Range<usize>,
}

impl CosiWorld {
    /// Starts the control plane and controller of `version`, `driver` as `deployed`'s
    /// ServiceAccount (a `deploy/cosi/` one), the sidecar beside it, and the classes; `prefix`
    /// starts the driver and class names.
    pub async fn start(
        version: CosiVersion,
        deployed: Deployed,
        prefix: &str,
        driver: DriverBinary,
    ) -> Result<CosiWorld> {
        let cosi = Cosi::start(version).await?;
        let admin = cosi.client().await;
        let identity = deployed_identity(cosi.plane(), deployed).await?;
        let socket_dir = tempfile::Builder::new().prefix("cosi-socket-").tempdir()?;
        let socket = socket_dir.path().join("cosi.sock");
        let suffix = unique_suffix();
        let driver_name = format!("{prefix}.test.cosi.bucket-provisioner.io-{suffix}");
        let mut argv = vec![driver.program.display().to_string()];
        argv.extend(driver.args);
        if !driver.store.is_empty() {
            let mut store = deployed_store(deployed)?;
            store.extend(driver.store);
            argv.extend(store.iter().map(|(k, v)| format!("--cosi-parameter={k}={v}")));
        }
        argv.extend([
            format!("--kubeconfig={}", identity.kubeconfig.display()),
            format!("--metrics-address=127.0.0.1:{}", free_port()?),
            format!("--cosi-endpoint=unix://{}", socket.display()),
            format!("--cosi-driver-name={driver_name}"),
            "--cosi-only".into(),
            "--leader-elect=false".into(),
        ]);
        let filter = std::env::var("PROVISIONER_LOG")
            .unwrap_or_else(|_| "warn,kube_client::client::tls=error".into());
        let logs = tempfile::Builder::new().prefix("cosi-driver-").tempdir()?.keep();
        let driver = Supervised::start(&logs, &[("driver", argv)], &[("RUST_LOG", &filter)])?;
        let sidecar = cosi.sidecar(deployed, &socket).await?;

        let delete_class = format!("{prefix}-delete-{suffix}");
        let retain_class = format!("{prefix}-retain-{suffix}");
        let access_class = format!("{prefix}-keys-{suffix}");
        let classes = version.api(&admin, "BucketClass", None);
        for (name, policy) in [(&delete_class, "Delete"), (&retain_class, "Retain")] {
            create(&classes, &version.bucket_class(name, &driver_name, policy, json!({}))).await?;
        }
        let read_only_class = format!("{prefix}-read-only-{suffix}");
        let access_classes = version.api(&admin, "BucketAccessClass", None);
        create(&access_classes, &version.access_class(&access_class, &driver_name, json!({})))
            .await?;
        if version == CosiVersion::V1Alpha1 {
            let read_only = json!({ "accessMode": "ReadOnly" });
            let class = version.access_class(&read_only_class, &driver_name, read_only);
            create(&access_classes, &class).await?;
        }
        Ok(CosiWorld {
            sidecar,
            driver,
            version,
            cosi,
            admin,
            driver_name,
            delete_class,
            retain_class,
            access_class,
            read_only_class,
            socket,
            _socket_dir: socket_dir,
            identity: identity.client().await,
            warm_ups: Vec::new(),
        })
    }

    /// A new tenant: a namespace of its own and an identity whose rights end there.
    pub async fn tenant(&self, prefix: &str) -> CosiTenant {
        CosiTenant::new(self.cosi.plane(), prefix).await.expect("a COSI tenant")
    }

    /// Kills the sidecar and starts it again, as a pod restart would.
    pub fn restart_sidecar(&mut self) {
        self.sidecar.restart().expect("restarting the sidecar");
    }

    /// An apiserver outage: kube-apiserver stopped and started again. The upstream controller
    /// and sidecar, which exit when they lose their leader lease, are restarted as their pods
    /// would be; the driver is left alone, as the one under test. Returns once RBAC serves the
    /// driver's identity again: what the sidecar and the driver logged until then is the
    /// warm-up, whose refusals [`CosiWorld::assert_never_forbidden`] tolerates.
    pub async fn restart_apiserver(&mut self) {
        let from = (self.sidecar_log().len(), self.driver_log().len());
        self.cosi.restart_apiserver().expect("restarting kube-apiserver");
        self.sidecar.restart().expect("restarting the sidecar");
        self.wait_rbac_serves_identity().await;
        tokio::time::sleep(LOG_SETTLE).await;
        self.warm_ups.push(WarmUp {
            sidecar: from.0..self.sidecar_log().len(),
            driver: from.1..self.driver_log().len(),
        });
    }

    /// Waits until the identity of the driver and the sidecar may list Buckets again, as both
    /// do first; a refusal for longer than [`RBAC_WARM_UP`] is a permission missing.
    async fn wait_rbac_serves_identity(&self) {
        let buckets = self.version.api(&self.identity, "Bucket", None);
        let deadline = tokio::time::Instant::now() + RBAC_WARM_UP;
        loop {
            match buckets.list(&ListParams::default().limit(1)).await {
                Ok(_) => return,
                Err(e) if tokio::time::Instant::now() > deadline => {
                    panic!("RBAC still refuses the driver's identity after the restart: {e}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// Kills the driver and starts it again, as a container restart would.
    pub fn restart_driver(&mut self) {
        self.driver.stop("driver").expect("stopping the driver");
        self.driver.start_again("driver").expect("starting the driver again");
    }

    /// Everything the sidecar logged.
    pub fn sidecar_log(&self) -> String {
        self.sidecar.full_log()
    }

    /// Whether the driver logged a `PERMISSION_DENIED` answer to `call` naming `namespace`.
    pub fn driver_refused(&self, call: &str, namespace: &str) -> bool {
        self.driver_log()
            .lines()
            .any(|l| l.contains(call) && l.contains("PermissionDenied") && l.contains(namespace))
    }

    /// Everything the driver logged.
    pub fn driver_log(&self) -> String {
        std::fs::read_to_string(self.driver.log("driver")).unwrap_or_default()
    }

    /// Waits until `check` holds, for up to [`COSI_WAIT`]; a timeout shows [`Self::logs`].
    pub async fn until(&self, what: &str, mut check: impl AsyncFnMut() -> bool) {
        let deadline = tokio::time::Instant::now() + COSI_WAIT;
        while !check().await {
            if tokio::time::Instant::now() > deadline {
                panic!("timed out after {COSI_WAIT:?} waiting for {what}\n{}", self.logs());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// What the driver and the upstream pieces said, for a failing assertion.
    pub fn logs(&self) -> String {
        format!(
            "--- driver ---\n{}\n--- sidecar ---\n{}\n--- controller ---\n{}",
            self.driver.log_tail("driver", 60),
            self.sidecar.log(40),
            self.cosi.controller_log(20)
        )
    }

    /// Panics if the sidecar or the driver was refused anything by the RBAC of its folder,
    /// save while RBAC warmed up after an apiserver restart (when it refuses everyone): a
    /// permission missing is refused again once RBAC is up, and that still fails.
    pub fn assert_never_forbidden(&self) {
        let sidecar: Vec<_> = self.warm_ups.iter().map(|w| w.sidecar.clone()).collect();
        let driver: Vec<_> = self.warm_ups.iter().map(|w| w.driver.clone()).collect();
        for (who, log, warm_ups) in
            [("sidecar", self.sidecar_log(), sidecar), ("driver", self.driver_log(), driver)]
        {
            let refusals = rbac_refusals(&log, &warm_ups);
            assert!(
                refusals.is_empty(),
                "{who} was refused by RBAC:\n{}\n--- {who}'s log ---\n{log}",
                refusals.join("\n")
            );
        }
    }

    /// A tenant's claim `name` of class `class`; waits until its bucket is ready and answers
    /// the Bucket object's name.
    pub async fn claim(&self, tenant: &CosiTenant, name: &str, class: &str) -> String {
        let claims = self.version.api(&tenant.client, "BucketClaim", Some(&tenant.namespace));
        create(&claims, &self.version.claim(&tenant.namespace, name, class)).await.unwrap();
        self.wait_claim_ready(tenant, name).await
    }

    /// Waits until claim `name` is ready, bound and protected by the controller's finalizer (so
    /// that deleting it asks for its Bucket's deletion); answers its Bucket object's name.
    pub async fn wait_claim_ready(&self, tenant: &CosiTenant, name: &str) -> String {
        let claims = self.version.api(&tenant.client, "BucketClaim", Some(&tenant.namespace));
        let version = self.version;
        let ready = wait_for(&claims, name, COSI_WAIT, |c| {
            let settled = version.claim_ready(c) && version.claim_protected(c);
            settled.then(|| version.claim_bucket(c)).flatten()
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
        self.access_of_class(tenant, name, claim, mode, &self.access_class).await
    }

    /// [`CosiWorld::access`] through BucketAccessClass `class`.
    pub async fn access_of_class(
        &self,
        tenant: &CosiTenant,
        name: &str,
        claim: &str,
        mode: &str,
        class: &str,
    ) -> S3Access {
        let accesses = self.version.api(&tenant.client, "BucketAccess", Some(&tenant.namespace));
        let secret = format!("{name}-creds");
        let object = self.version.access(&tenant.namespace, name, class, claim, &secret, mode);
        create(&accesses, &object).await.unwrap();
        let version = self.version;
        let granted =
            wait_for(&accesses, name, COSI_WAIT, |a| version.access_ready(a).then_some(()));
        granted
            .await
            .unwrap_or_else(|last| panic!("access {name} not granted: {last}\n{}", self.logs()));
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

    /// Makes this driver's v1alpha1 BucketAccessClass of `authenticationType: IAM` and answers
    /// its name.
    pub async fn iam_access_class(&self) -> String {
        let name = format!("{}-iam", self.access_class);
        let mut class = self.version.access_class(&name, &self.driver_name, json!({}));
        class.data["authenticationType"] = "IAM".into();
        create(&self.version.api(&self.admin, "BucketAccessClass", None), &class)
            .await
            .expect("the IAM BucketAccessClass");
        name
    }

    /// Makes ServiceAccount `name` in `namespace`, as the administrator.
    pub async fn service_account(&self, namespace: &str, name: &str) {
        use k8s_openapi::api::core::v1::ServiceAccount;
        let accounts: Api<ServiceAccount> = Api::namespaced(self.admin.clone(), namespace);
        let account = serde_json::from_value(json!({ "metadata": { "name": name } }));
        let params = kube::api::PostParams::default();
        accounts.create(&params, &account.expect("a ServiceAccount")).await.expect("created");
    }

    /// A tenant's v1alpha1 access `name` of class `class` (one of IAM) to claim `claim` for its
    /// ServiceAccount `account`, credentials in Secret `secret`; waits until it is granted and
    /// answers its `status.accountID`.
    pub async fn iam_access(
        &self,
        tenant: &CosiTenant,
        name: &str,
        (class, claim, secret): (&str, &str, &str),
        account: &str,
    ) -> String {
        let accesses = self.version.api(&tenant.client, "BucketAccess", Some(&tenant.namespace));
        let mut access = self.version.access(&tenant.namespace, name, class, claim, secret, "");
        access.data["spec"]["serviceAccountName"] = account.into();
        create(&accesses, &access).await.expect("the IAM access");
        wait_for(&accesses, name, COSI_WAIT, |a| {
            let granted = a.data.pointer("/status/accessGranted").and_then(|v| v.as_bool());
            let id = a.data.pointer("/status/accountID").and_then(|v| v.as_str());
            granted.filter(|g| *g).and(id).map(str::to_owned)
        })
        .await
        .unwrap_or_else(|last| panic!("the IAM access was not granted: {last}\n{}", self.logs()))
    }

    /// The Bucket object `name`, as an administrator reads it.
    pub async fn bucket_object(&self, name: &str) -> Option<DynamicObject> {
        let buckets = self.version.api(&self.admin, "Bucket", None);
        buckets.get_opt(name).await.expect("reading a Bucket")
    }

    /// The id the driver answered for Bucket object `name` (its `status.bucketID`).
    pub async fn bucket_id(&self, name: &str) -> String {
        let bucket = self.bucket_object(name).await.expect("the Bucket exists");
        let id = bucket.data["status"]["bucketID"].as_str().unwrap_or_default().to_owned();
        assert!(!id.is_empty(), "Bucket {name} has no bucketID: {}", bucket.data["status"]);
        id
    }

    /// A static Bucket an operator makes (v1alpha2): `bucket_id` is the store's name of a
    /// bucket that already exists, reserved for claim `claim` of `tenant`, with `deletion`;
    /// then the tenant's claim binding it. Waits until the claim is ready; answers the Bucket
    /// object's name.
    pub async fn static_bucket(
        &self,
        tenant: &CosiTenant,
        claim: &str,
        bucket_id: &str,
        deletion: &str,
    ) -> String {
        assert_eq!(self.version, CosiVersion::V1Alpha2, "existingBucketID as v1alpha2 spells it");
        let name = format!("static-{}", unique_suffix());
        let spec = json!({ "spec": {
            "driverName": self.driver_name, "deletionPolicy": deletion, "protocols": ["S3"],
            "bucketClaimRef": { "name": claim, "namespace": tenant.namespace },
            "existingBucketID": bucket_id,
        }});
        let buckets = self.version.api(&self.admin, "Bucket", None);
        create(&buckets, &self.version.object("Bucket", &name, None, spec)).await.unwrap();
        let claims = self.version.api(&tenant.client, "BucketClaim", Some(&tenant.namespace));
        let binding = self.version.claim_of_existing(&tenant.namespace, claim, &name);
        create(&claims, &binding).await.unwrap();
        let bound = self.wait_claim_ready(tenant, claim).await;
        assert_eq!(bound, name, "the claim is bound to the operator's Bucket");
        name
    }
}

/// Polls object `name` until `check` yields a value, for up to `wait`; the error carries the
/// last status seen.
pub async fn wait_for<T>(
    api: &Api<DynamicObject>,
    name: &str,
    wait: Duration,
    check: impl Fn(&DynamicObject) -> Option<T>,
) -> Result<T, String> {
    let deadline = tokio::time::Instant::now() + wait;
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
