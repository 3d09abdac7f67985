//! The upstream COSI (Container Object Storage Interface) controller and sidecar on a real
//! control plane, built by `tests/cosi/build.sh` at v0.2.2 (`objectstorage.k8s.io/v1alpha1`) and
//! main (`v1alpha2`).
//!
//! [`Cosi::start`] starts a control plane of its own (both versions define the same CRD names,
//! so one control plane holds one version), installs that version's CRDs and runs the upstream
//! controller with the upstream RBAC. [`Cosi::sidecar`] runs the upstream sidecar beside a
//! driver's socket with the identity of a `deploy/cosi/` ServiceAccount and the RBAC applied from
//! there, never as an administrator. Both run under a [`Supervised`], so nothing outlives a test.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};

pub use crate::cosi_identity::GROUP;
use crate::cosi_identity::{service_account_kubeconfig, upstream_controller_rbac};
use crate::manifests::{Apply, apply_objects, read_manifest_files};
use crate::{ControlPlane, Deployed, Supervised, WAIT, deployed_identity, free_port};

/// Environment variable naming the directory `tests/cosi/build.sh` printed.
pub const COSI_DIR_ENV: &str = "BUCKET_PROVISIONER_COSI_DIR";

const APPROVAL_ANNOTATION: &str = "api-approved.kubernetes.io";
const APPROVAL_KEP: &str = "https://github.com/kubernetes/enhancements/tree/master/keps/sig-storage/1979-object-storage-support";

/// The namespace the upstream controller runs in (its RBAC binds a ServiceAccount there).
const CONTROLLER_NAMESPACE: &str = "default";
/// The upstream controller's ServiceAccount, as its RBAC names it.
const CONTROLLER_ACCOUNT: &str = "controller-sa";

/// One of the two COSI versions under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CosiVersion {
    /// `objectstorage.k8s.io/v1alpha1`, released as v0.2.2.
    V1Alpha1,
    /// `objectstorage.k8s.io/v1alpha2`, the upstream main branch.
    V1Alpha2,
}

impl CosiVersion {
    /// Both versions.
    pub const ALL: [CosiVersion; 2] = [CosiVersion::V1Alpha1, CosiVersion::V1Alpha2];

    /// The API version, `v1alpha1` or `v1alpha2` (also the build's folder name).
    pub fn version(self) -> &'static str {
        match self {
            CosiVersion::V1Alpha1 => "v1alpha1",
            CosiVersion::V1Alpha2 => "v1alpha2",
        }
    }

    /// The folder holding this version's controller, sidecar, `crd/` and `controller-rbac.yaml`.
    pub fn dir(self) -> Result<PathBuf> {
        Ok(cosi_dir()?.join(self.version()))
    }

    /// The resource of COSI kind `kind` (`Bucket`, `BucketClaim`, ...) in this version.
    pub fn resource(self, kind: &str) -> ApiResource {
        let plural = match kind {
            "BucketClass" => "bucketclasses".to_owned(),
            "BucketAccessClass" => "bucketaccessclasses".to_owned(),
            "BucketAccess" => "bucketaccesses".to_owned(),
            other => format!("{}s", other.to_lowercase()),
        };
        ApiResource {
            group: GROUP.into(),
            version: self.version().into(),
            api_version: format!("{GROUP}/{}", self.version()),
            kind: kind.into(),
            plural,
        }
    }

    /// An API of COSI kind `kind`: namespaced when `namespace` is given, else cluster-wide.
    pub fn api(self, client: &Client, kind: &str, namespace: Option<&str>) -> Api<DynamicObject> {
        let resource = self.resource(kind);
        match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        }
    }

    /// An object of COSI kind `kind` named `name`, with `data` (its `spec` and such) merged in.
    pub fn object(
        self,
        kind: &str,
        name: &str,
        namespace: Option<&str>,
        data: serde_json::Value,
    ) -> DynamicObject {
        let mut object = DynamicObject::new(name, &self.resource(kind)).data(data);
        object.metadata.namespace = namespace.map(Into::into);
        object
    }
}

/// Finds (building on first use) the directory `tests/cosi/build.sh` fills.
pub fn cosi_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os(COSI_DIR_ENV) {
        return Ok(PathBuf::from(dir));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/cosi/build.sh");
    let output = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !output.status.success() {
        bail!("{} failed; see its output above", script.display());
    }
    let stdout = String::from_utf8(output.stdout)?;
    let dir = stdout.lines().last().ok_or_else(|| anyhow!("build.sh printed no directory"))?;
    Ok(PathBuf::from(dir.trim()))
}

/// A control plane of its own with one COSI version's CRDs and the upstream controller running.
pub struct Cosi {
    /// The version it serves.
    pub version: CosiVersion,
    // Declared before the plane: the controller stops before its apiserver does.
    controller: Supervised,
    plane: ControlPlane,
}

impl Cosi {
    /// Starts a control plane with `version` installed on it ([`install_upstream`]).
    pub async fn start(version: CosiVersion) -> Result<Cosi> {
        let plane = ControlPlane::start()?;
        let controller = install_upstream(&plane, version).await?;
        Ok(Cosi { version, controller, plane })
    }

    /// Stops kube-apiserver, starts it again, and restarts the upstream controller, which exits
    /// when it loses its leader lease in the outage (in a cluster, its pod restarts).
    pub fn restart_apiserver(&mut self) -> Result<()> {
        self.plane.stop_apiserver()?;
        self.plane.start_apiserver()?;
        self.controller.stop("controller")?;
        self.controller.start_again("controller")
    }

    /// Its control plane.
    pub fn plane(&self) -> &ControlPlane {
        &self.plane
    }

    /// An administrator's client of its control plane.
    pub async fn client(&self) -> Client {
        self.plane.client().await
    }

    /// The last lines of the upstream controller's log.
    pub fn controller_log(&self, lines: usize) -> String {
        self.controller.log_tail("controller", lines)
    }

    /// Starts the upstream sidecar for the driver listening on unix socket `socket` (a path
    /// ending in `.sock`), acting as `deployed`'s ServiceAccount (a `deploy/cosi/` one) with the
    /// RBAC of its folder applied.
    pub async fn sidecar(&self, deployed: Deployed, socket: &Path) -> Result<Sidecar> {
        let identity = deployed_identity(&self.plane, deployed).await?;
        let sidecar = self.version.dir()?.join("sidecar").display().to_string();
        let kubeconfig = identity.kubeconfig.display().to_string();
        let endpoint = format!("unix://{}", socket.display());
        let mut argv = vec![
            "env".to_owned(),
            format!("KUBECONFIG={kubeconfig}"),
            format!("POD_NAMESPACE={}", crate::DEPLOY_NAMESPACE),
        ];
        match self.version {
            CosiVersion::V1Alpha1 => {
                argv.push(sidecar);
                argv.push(format!("--kubeconfig={kubeconfig}"));
                argv.push(format!("--driver-addr={endpoint}"));
                argv.push("--debug".into());
                argv.push("--v=4".into());
            }
            CosiVersion::V1Alpha2 => {
                // Its only way to be told the driver's address.
                argv.push(format!("COSI_ENDPOINT={endpoint}"));
                argv.push(sidecar);
                argv.push(format!("--kubeconfig={kubeconfig}"));
                argv.push(format!("--health-probe-bind-address=127.0.0.1:{}", free_port()?));
                argv.push("--metrics-bind-address=0".into());
            }
        }
        let logs = tempfile::Builder::new().prefix("cosi-sidecar-").tempdir()?.keep();
        let processes = Supervised::start(&logs, &[("sidecar", argv)], &[])?;
        Ok(Sidecar { processes })
    }
}

/// The upstream sidecar, running until dropped.
pub struct Sidecar {
    processes: Supervised,
}

impl Sidecar {
    /// Kills the sidecar and starts it again with the same arguments, as a pod restart would.
    pub fn restart(&mut self) -> Result<()> {
        self.processes.stop("sidecar")?;
        self.processes.start_again("sidecar")
    }

    /// The last lines of its log.
    pub fn log(&self, lines: usize) -> String {
        self.processes.log_tail("sidecar", lines)
    }

    /// Every line of its log.
    pub fn full_log(&self) -> String {
        std::fs::read_to_string(self.processes.log("sidecar")).unwrap_or_default()
    }
}

/// Installs `version`'s CRDs on `plane` and starts its upstream controller under the upstream
/// RBAC (applied from the same source), as an operator installs COSI on a cluster; the
/// controller runs until the answer is dropped.
pub async fn install_upstream(plane: &ControlPlane, version: CosiVersion) -> Result<Supervised> {
    let dir = version.dir()?;
    let admin = plane.client().await;
    install_cosi_crds(&admin, &dir.join("crd")).await?;
    upstream_controller_rbac(&admin, &dir.join("controller-rbac.yaml")).await?;
    let kubeconfig =
        service_account_kubeconfig(plane, CONTROLLER_NAMESPACE, CONTROLLER_ACCOUNT).await?;
    let controller = dir.join("controller").display().to_string();
    let kubeconfig = kubeconfig.display().to_string();
    let mut argv = vec![
        "env".to_owned(),
        format!("KUBECONFIG={kubeconfig}"),
        // v1alpha1's controller always elects a leader, with a Lease in this namespace.
        format!("POD_NAMESPACE={CONTROLLER_NAMESPACE}"),
        controller,
        format!("--kubeconfig={kubeconfig}"),
    ];
    match version {
        CosiVersion::V1Alpha1 => argv.push("--v=4".into()),
        CosiVersion::V1Alpha2 => {
            // Its probe port defaults to :8081, which a second one on this host would take.
            argv.push(format!("--health-probe-bind-address=127.0.0.1:{}", free_port()?));
            argv.push("--metrics-bind-address=0".into());
            // Its default development logger panics on its own log line when it binds a static
            // Bucket (an odd number of key-value arguments), so static Buckets are never bound
            // (upstream defect); production logging only reports the line.
            argv.push("--zap-devel=false".into());
        }
    }
    let logs = tempfile::Builder::new().prefix("cosi-controller-").tempdir()?.keep();
    Supervised::start(&logs, &[("controller", argv)], &[])
}

/// Applies the CRDs in `dir` (server-side apply) and waits until each is Established.
pub async fn install_cosi_crds(client: &Client, dir: &Path) -> Result<()> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut objects = read_manifest_files(&files)?;
    for (_, crd) in &mut objects {
        // v0.2.2's CRD files lack the approval annotation a `*.k8s.io` group must carry; its
        // kustomization adds it (commonAnnotations), as `kubectl apply -k` would here.
        crd.annotations_mut()
            .entry(APPROVAL_ANNOTATION.to_owned())
            .or_insert_with(|| APPROVAL_KEP.to_owned());
    }
    apply_objects(client, &objects, Apply::ForReal).await?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (_, crd) in &objects {
        let name = crd.name_any();
        let established = await_condition(crds.clone(), &name, conditions::is_crd_established());
        if tokio::time::timeout(WAIT, established).await.is_err() {
            bail!("CRD {name} was not Established within {WAIT:?}");
        }
    }
    // Discovery of a new group can lag its CRDs being Established.
    tokio::time::sleep(Duration::from_millis(500)).await;
    Ok(())
}

/// Stand-ins of the COSI CRDs the driver reads for its tenancy check (Bucket and BucketAccess,
/// served at v1alpha1 and v1alpha2, any fields allowed), for tests of the driver alone;
/// [`install_cosi_crds`] installs upstream's real ones. Already there is fine.
pub async fn install_stand_in_crds(client: &Client) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (kind, plural, scope) in
        [("Bucket", "buckets", "Cluster"), ("BucketAccess", "bucketaccesses", "Namespaced")]
    {
        let version = |name: &str, storage: bool| {
            serde_json::json!({
                "name": name, "served": true, "storage": storage,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            })
        };
        let name = format!("{plural}.objectstorage.k8s.io");
        let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "annotations": {APPROVAL_ANNOTATION: APPROVAL_KEP}},
            "spec": {
                "group": "objectstorage.k8s.io",
                "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
                "scope": scope,
                "versions": [version("v1alpha1", true), version("v1alpha2", false)]
            }
        }))?;
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(anyhow!("creating CRD {name}: {e}")),
        }
        let established = await_condition(crds.clone(), &name, conditions::is_crd_established());
        if tokio::time::timeout(WAIT, established).await.is_err() {
            bail!("CRD {name} was not Established within {WAIT:?}");
        }
    }
    Ok(())
}

/// Creates `object` through `api`, naming it in the error.
pub async fn create(api: &Api<DynamicObject>, object: &DynamicObject) -> Result<DynamicObject> {
    api.create(&PostParams::default(), object)
        .await
        .with_context(|| format!("creating {:?}", object.name_any()))
}
