//! Test support: a real control plane ([`ControlPlane`]) and helpers that keep tests isolated
//! from each other on it (their own namespace, uniquely named cluster objects).

pub mod bench;
mod claim_tenant;
mod claims;
mod control_plane;
pub mod cosi;
pub mod cosi_e2e;
pub mod cosi_hostile;
mod cosi_identity;
mod cosi_objects;
pub mod cosi_world;
mod deployed;
mod fault_proxy;
pub mod garage;
mod harness;
pub mod hostile_tenant;
mod manifests;
mod ports;
mod rbac_refusals;
pub mod reference;
mod scoped_identity;
mod service_account;
pub mod source_files;
pub mod standalone_requests;
mod supervised;
mod tls_proxy;
pub mod tools;
mod tripwire;
pub mod volumes;

use std::future::Future;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};

pub use claim_tenant::claim_tenant;
pub use claims::{
    bucket_class, create_claim, delete_claim_and_wait, parameters, ready, wait_claim_gone,
    wait_for_claim,
};
pub use control_plane::{
    BIN_DIR_ENV, ControlPlane, Options, TokenUser, binaries_dir, unique_suffix,
};
pub use cosi_identity::CosiTenant;
pub use cosi_objects::S3Access;
pub use deployed::{
    DEPLOY_NAMESPACE, Deployed, Identity, deploy_dir, deployed_identity, install_rbac,
};
pub use fault_proxy::{Fault, FaultProxy, RequestKind};
pub use harness::Harness;
pub use manifests::{
    Apply, KUSTOMIZATION, apply_manifests, apply_objects, read_manifest_files, read_manifests,
};
pub use ports::{free_port, free_port_on};
pub use rbac_refusals::rbac_refusals;
pub use scoped_identity::cluster_role_identity;
pub use supervised::Supervised;
pub use tls_proxy::TlsProxy;
pub use tripwire::Tripwire;

/// How long helpers wait for the cluster to reach an expected state.
pub const WAIT: Duration = Duration::from_secs(60);

/// Sets up logging for a test once; `RUST_LOG` chooses the level (default: warnings).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
}

/// A client of the shared control plane with the CRDs installed and Established.
pub async fn client_with_crds() -> Client {
    init_tracing();
    let client = ControlPlane::shared().client().await;
    install_crds(&client).await.expect("installing the CRDs");
    client
}

/// Applies the generated CRDs (server-side apply, so it is idempotent) and waits until each is
/// Established.
pub async fn install_crds(client: &Client) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("bucket-provisioner-tests").force();
    for file in bucket_api::crd_files() {
        let name = file.crd.name_any();
        crds.patch(&name, &params, &Patch::Apply(&file.crd)).await?;
        let established = await_condition(crds.clone(), &name, conditions::is_crd_established());
        if tokio::time::timeout(WAIT, established).await.is_err() {
            bail!("CRD {name} was not Established within {WAIT:?}");
        }
    }
    Ok(())
}

/// A command for a provisioner binary under test: killed when dropped, quiet unless
/// `PROVISIONER_LOG` (a `RUST_LOG` filter) asks to see its log.
pub fn program(path: &str) -> tokio::process::Command {
    let log = std::env::var("PROVISIONER_LOG").ok();
    let mut command = tokio::process::Command::new(path);
    command
        .env("RUST_LOG", log.as_deref().unwrap_or("warn,kube_client::client::tls=error"))
        .stdout(if log.is_some() { Stdio::inherit() } else { Stdio::null() })
        .kill_on_drop(true);
    command
}

/// Creates a namespace of its own for one test and returns its name.
pub async fn test_namespace(client: &Client, prefix: &str) -> String {
    let name = format!("{prefix}-{}", unique_suffix());
    create_namespace(client, &name).await;
    name
}

/// Creates namespace `name`.
pub async fn create_namespace(client: &Client, name: &str) {
    let namespace = Namespace {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..Default::default() },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
}

/// Polls `check` until it yields a value, or panics with `what` after [`WAIT`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {WAIT:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
