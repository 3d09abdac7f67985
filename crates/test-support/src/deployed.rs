//! The provisioners as they are deployed: the ServiceAccount and RBAC of `deploy/<backend>/`,
//! and a token the apiserver itself issued for that ServiceAccount (TokenRequest).
//!
//! Tests run provisioners with this identity by default, so they meet what a cluster enforces:
//! the permissions the manifests grant and nothing more, and the moments after an apiserver
//! start when it answers 401 and 403 until its authentication and RBAC caches have filled. An
//! administrator's `system:masters` identity is never checked by RBAC and hides both.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::Result;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::control_plane::{ControlPlane, kubeconfig_yaml};
use crate::manifests::{Apply, apply_objects, read_manifest_files};
use crate::service_account::service_account_token;

/// The namespace every manifest of `deploy/` installs into.
pub const DEPLOY_NAMESPACE: &str = "bucket-provisioner";

/// A provisioner of `deploy/`: the folder of its manifests and its ServiceAccount.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Deployed {
    /// `deploy/hostpath/`: the hostPath bucket provisioner.
    HostPath,
    /// `deploy/s3/`: the S3 + IAM bucket provisioner.
    S3,
    /// `deploy/hostpath-volumes/`: the hostPath volume provisioner.
    HostPathVolumes,
    /// `deploy/garage/`: the Garage bucket provisioner.
    Garage,
    /// `deploy/cosi/hostpath/`: the hostPath COSI driver and the upstream sidecar beside it.
    CosiHostPath,
    /// `deploy/cosi/s3/`: the S3 + IAM COSI driver and the upstream sidecar beside it.
    CosiS3,
    /// `deploy/cosi/garage/`: the Garage COSI driver and the upstream sidecar beside it.
    CosiGarage,
}

impl Deployed {
    /// The folder under `deploy/`.
    pub fn folder(self) -> &'static str {
        match self {
            Deployed::HostPath => "hostpath",
            Deployed::S3 => "s3",
            Deployed::HostPathVolumes => "hostpath-volumes",
            Deployed::Garage => "garage",
            Deployed::CosiHostPath => "cosi/hostpath",
            Deployed::CosiS3 => "cosi/s3",
            Deployed::CosiGarage => "cosi/garage",
        }
    }

    /// Its ServiceAccount in [`DEPLOY_NAMESPACE`].
    pub fn service_account(self) -> &'static str {
        match self {
            Deployed::HostPath => "hostpath-bucket-provisioner",
            Deployed::S3 => "s3-bucket-provisioner",
            Deployed::HostPathVolumes => "hostpath-volume-provisioner",
            Deployed::Garage => "garage-bucket-provisioner",
            Deployed::CosiHostPath => "hostpath-cosi-driver",
            Deployed::CosiS3 => "s3-cosi-driver",
            Deployed::CosiGarage => "garage-cosi-driver",
        }
    }

    /// The user name RBAC sees for it.
    pub fn user(self) -> String {
        format!("system:serviceaccount:{DEPLOY_NAMESPACE}:{}", self.service_account())
    }

    /// The manifests that give it its identity and permissions: the namespace and the RBAC.
    pub fn rbac_manifests(self) -> Vec<PathBuf> {
        let dir = deploy_dir().join(self.folder());
        ["00-namespace.yaml", "10-rbac.yaml"].iter().map(|file| dir.join(file)).collect()
    }
}

/// The repository's `deploy/` folder.
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// A provisioner's deployed identity on one control plane: a kubeconfig holding its
/// ServiceAccount token, for the provisioner's `--kubeconfig`, and a client of its own.
#[derive(Clone, Debug)]
pub struct Identity {
    /// A kubeconfig that authenticates as the ServiceAccount.
    pub kubeconfig: PathBuf,
    /// The user name RBAC sees.
    pub user: String,
    /// The ServiceAccount token itself, for kubeconfigs that reach the apiserver another way.
    pub token: String,
}

impl Identity {
    /// A client acting as the ServiceAccount.
    pub async fn client(&self) -> Client {
        let file = Kubeconfig::read_from(&self.kubeconfig).expect("the identity's kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
            .await
            .expect("the identity's kubeconfig is valid");
        Client::try_from(config).expect("a client from the identity's kubeconfig")
    }
}

/// The deployed identity of `which` on `plane`: applies its namespace and RBAC from `deploy/`
/// (server-side apply, so again is harmless) and asks the apiserver for a ServiceAccount token.
/// Made once per control plane and provisioner within a test process.
pub async fn deployed_identity(plane: &ControlPlane, which: Deployed) -> Result<Identity> {
    static MADE: Mutex<Option<HashMap<(String, Deployed), Identity>>> = Mutex::new(None);
    let key = (plane.server().to_owned(), which);
    if let Some(identity) = MADE.lock().unwrap().get_or_insert_default().get(&key) {
        return Ok(identity.clone());
    }
    let admin = plane.client().await;
    install_rbac(&admin, which).await?;
    let token = service_account_token(&admin, DEPLOY_NAMESPACE, which.service_account()).await?;
    let kubeconfig = plane.file_path(&format!("kubeconfig-{}", which.service_account()));
    // Written aside and renamed into place: tests of one binary may make the identity at the
    // same time, and one of them may be reading the file while another writes it.
    let written = kubeconfig.with_extension(format!("tmp-{}", crate::unique_suffix()));
    std::fs::write(&written, kubeconfig_yaml(plane.server(), &token))?;
    std::fs::rename(&written, &kubeconfig)?;
    let identity = Identity { kubeconfig, user: which.user(), token };
    MADE.lock().unwrap().get_or_insert_default().insert(key, identity.clone());
    Ok(identity)
}

/// Applies `which`'s namespace and RBAC manifests for real.
pub async fn install_rbac(admin: &Client, which: Deployed) -> Result<()> {
    let objects = read_manifest_files(&which.rbac_manifests())?;
    apply_objects(admin, &objects, Apply::ForReal).await
}
