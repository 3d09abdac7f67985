//! A real Kubernetes control plane for tests: etcd, kube-apiserver and kube-controller-manager
//! (garbage collector, namespace, PersistentVolume binder and protection, ClusterRole aggregation
//! controllers), built by
//! `tests/controlplane/build.sh`.
//! [`Options::pods`] adds what a node's pods need.
//!
//! The processes run under a [`Supervised`], so however the test process ends they stop and their
//! working directory is removed: nothing outlives a suite.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::{Supervised, free_port, free_port_on};

/// Environment variable naming a directory that already holds the three binaries.
pub const BIN_DIR_ENV: &str = "BUCKET_PROVISIONER_CONTROLPLANE_BIN";

const ADMIN_TOKEN_USER: &str = "admin";
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// The Service range; its first address is the `kubernetes` Service.
const SERVICE_CIDR: &str = "10.0.0.0/24";
const KUBERNETES_SERVICE_IP: &str = "10.0.0.1";

/// How a control plane is started; [`ControlPlane::start`] uses the defaults (loopback, no pods).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The address the apiserver listens on and advertises (default 127.0.0.1). Pods on a bridge
    /// reach an apiserver only on an address outside the loopback range.
    pub address: Option<Ipv4Addr>,
    /// Serve pods: ServiceAccount admission (tokens in pods), a CA of its own whose certificate
    /// the controller manager publishes to every namespace (`kube-root-ca.crt`), and the
    /// controllers that run workloads (service accounts, deployments, replica sets, daemon sets,
    /// endpoint slices, and node lifecycle, which lifts the not-ready taint a kubelet registers
    /// with).
    pub pods: bool,
    /// More users for the token file, e.g. a kubelet's.
    pub tokens: Vec<TokenUser>,
    /// Record every request of the users in `tokens` (not the administrator's) in an audit log
    /// ([`ControlPlane::audit_log`]): who asked for what, to count a program's requests.
    pub audit: bool,
}

/// One line of the apiserver's token file.
#[derive(Clone, Debug)]
pub struct TokenUser {
    /// The bearer token.
    pub token: String,
    /// The user name it authenticates as.
    pub user: String,
    /// The groups of that user.
    pub groups: Vec<String>,
}

/// A running control plane. Dropping it stops the processes and removes its files.
pub struct ControlPlane {
    kubeconfig_path: PathBuf,
    kubeconfig: Kubeconfig,
    server: String,
    ca_path: Option<PathBuf>,
    audit_log: Option<PathBuf>,
    processes: Supervised,
}

impl ControlPlane {
    /// The control plane shared by every test of this process, started on first use.
    ///
    /// Tests isolate themselves with their own namespaces and uniquely named cluster objects.
    pub fn shared() -> &'static ControlPlane {
        static SHARED: OnceLock<ControlPlane> = OnceLock::new();
        SHARED.get_or_init(|| ControlPlane::start().expect("starting the test control plane"))
    }

    /// Starts a new control plane and waits until the apiserver is ready.
    pub fn start() -> Result<ControlPlane> {
        Self::start_with(&Options::default())
    }

    /// Starts a new control plane as `options` say and waits until the apiserver is ready.
    pub fn start_with(options: &Options) -> Result<ControlPlane> {
        let bin = binaries_dir()?;
        let dir = tempfile::Builder::new().prefix("bucket-controlplane-").tempdir()?.keep();
        let result = Self::start_in(&bin, &dir, options);
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        result
    }

    fn start_in(bin: &Path, dir: &Path, options: &Options) -> Result<ControlPlane> {
        let address = options.address.unwrap_or(Ipv4Addr::LOCALHOST);
        let etcd_port = free_port()?;
        let peer_port = free_port()?;
        let api_port = free_port_on(address.into())?;
        let token = format!("token-{}-{}", std::process::id(), unique_suffix());

        let mut tokens = format!("{token},{ADMIN_TOKEN_USER},{ADMIN_TOKEN_USER},system:masters\n");
        for user in &options.tokens {
            let groups = user.groups.join(",");
            tokens.push_str(&format!("{},{},{},\"{groups}\"\n", user.token, user.user, user.user));
        }
        std::fs::write(dir.join("tokens.csv"), tokens)?;
        let sa_key = dir.join("sa.key");
        let openssl = Command::new("openssl")
            .args(["genrsa", "-out"])
            .arg(&sa_key)
            .arg("2048")
            .stderr(Stdio::null())
            .status()
            .context("running openssl to make the service-account signing key")?;
        if !openssl.success() {
            bail!("openssl genrsa failed");
        }
        // Pods verify the apiserver (by the `kubernetes` Service's address) against the CA that
        // kube-root-ca.crt carries, so it needs a certificate from a CA of ours.
        let ca_path = if options.pods { Some(serving_certificate(dir, address)?) } else { None };

        let server = format!("https://{address}:{api_port}");
        let kubeconfig_yaml = kubeconfig_yaml(&server, &token);
        let kubeconfig_path = dir.join("kubeconfig");
        std::fs::write(&kubeconfig_path, &kubeconfig_yaml)?;
        let kubeconfig: Kubeconfig = serde_yaml::from_str(&kubeconfig_yaml)?;

        let d = dir.display();
        let etcd = [
            format!("{}/etcd", bin.display()),
            "--name=etcd".into(),
            format!("--data-dir={d}/etcd"),
            format!("--listen-client-urls=http://127.0.0.1:{etcd_port}"),
            format!("--advertise-client-urls=http://127.0.0.1:{etcd_port}"),
            format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-cluster=etcd=http://127.0.0.1:{peer_port}"),
            "--unsafe-no-fsync=true".into(),
            "--log-level=warn".into(),
        ];
        let apiserver = [
            format!("{}/kube-apiserver", bin.display()),
            format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
            format!("--cert-dir={d}/certs"),
            format!("--bind-address={address}"),
            format!("--advertise-address={address}"),
            format!("--secure-port={api_port}"),
            format!("--token-auth-file={d}/tokens.csv"),
            "--authorization-mode=RBAC".into(),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            format!("--service-account-key-file={}", sa_key.display()),
            format!("--service-account-signing-key-file={}", sa_key.display()),
            format!("--service-cluster-ip-range={SERVICE_CIDR}"),
            "--allow-privileged=true".into(),
            "--enable-priority-and-fairness=false".into(),
            "--shutdown-delay-duration=0s".into(),
            "--profiling=false".into(),
        ];
        let mut apiserver = apiserver.to_vec();
        let audit_log = if options.audit {
            let users: Vec<String> =
                options.tokens.iter().map(|t| format!("\"{}\"", t.user)).collect();
            let policy = format!(
                "apiVersion: audit.k8s.io/v1\nkind: Policy\n\
                 omitStages: [RequestReceived, ResponseStarted]\nrules:\n\
                 - level: Metadata\n  users: [{}]\n- level: None\n",
                users.join(", ")
            );
            std::fs::write(dir.join("audit-policy.yaml"), policy)?;
            apiserver.push(format!("--audit-policy-file={d}/audit-policy.yaml"));
            apiserver.push(format!("--audit-log-path={d}/audit.log"));
            apiserver.push("--audit-log-format=json".into());
            Some(dir.join("audit.log"))
        } else {
            None
        };
        // The PV binder binds claims to the volumes provisioners make for them; the protection
        // controllers lift the finalizers admission puts on every claim and volume; aggregation
        // fills the `admin`, `edit` and `view` roles tenants are given.
        let mut controllers = "garbagecollector,namespace,persistentvolume-binder-controller,\
            persistentvolume-protection-controller,persistentvolumeclaim-protection-controller,\
            clusterrole-aggregation-controller"
            .to_string();
        let mut controller_manager_extra = Vec::new();
        match &ca_path {
            Some(ca) => {
                apiserver.push(format!("--tls-cert-file={d}/apiserver.crt"));
                apiserver.push(format!("--tls-private-key-file={d}/apiserver.key"));
                controllers.push_str(
                    ",serviceaccount-controller,root-ca-certificate-publisher-controller,\
                     deployment-controller,replicaset-controller,daemonset-controller,\
                     endpointslice-controller,node-lifecycle-controller",
                );
                controller_manager_extra.push(format!("--root-ca-file={}", ca.display()));
            }
            None => apiserver.push("--disable-admission-plugins=ServiceAccount".into()),
        }
        let mut controller_manager = vec![
            format!("{}/kube-controller-manager", bin.display()),
            format!("--kubeconfig={}", kubeconfig_path.display()),
            format!("--controllers={controllers}"),
            "--leader-elect=false".into(),
            "--secure-port=0".into(),
            "--concurrent-gc-syncs=5".into(),
        ];
        controller_manager.extend(controller_manager_extra);
        let processes = Supervised::start(
            dir,
            &[
                ("etcd", etcd.to_vec()),
                ("kube-apiserver", apiserver),
                ("kube-controller-manager", controller_manager),
            ],
            &[],
        )?;
        let plane =
            ControlPlane { kubeconfig_path, kubeconfig, server, ca_path, audit_log, processes };
        plane.wait_ready()?;
        Ok(plane)
    }

    /// A client authenticated as a cluster administrator.
    pub async fn client(&self) -> Client {
        let config = kube::Config::from_custom_kubeconfig(
            self.kubeconfig.clone(),
            &KubeConfigOptions::default(),
        )
        .await
        .expect("the generated kubeconfig is valid");
        Client::try_from(config).expect("a client from the generated kubeconfig")
    }

    /// Path of a kubeconfig file for programs under test (administrator credentials).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// Kills kube-apiserver (etcd and the controller manager keep running) and waits until it no
    /// longer answers: an apiserver outage.
    pub fn stop_apiserver(&mut self) -> Result<()> {
        self.processes.stop("kube-apiserver")?;
        let deadline = Instant::now() + READY_TIMEOUT;
        while std::net::TcpStream::connect(self.apiserver_address()?).is_ok() {
            if Instant::now() > deadline {
                bail!("kube-apiserver still answers after being stopped");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Starts kube-apiserver again after [`ControlPlane::stop_apiserver`], on the same address,
    /// and waits until it is ready.
    pub fn start_apiserver(&mut self) -> Result<()> {
        self.processes.start_again("kube-apiserver")?;
        self.wait_ready()
    }

    fn apiserver_address(&self) -> Result<std::net::SocketAddr> {
        Ok(self.server.trim_start_matches("https://").parse()?)
    }

    /// The audit log (JSON lines) of a control plane started with [`Options::audit`].
    pub fn audit_log(&self) -> Option<&Path> {
        self.audit_log.as_deref()
    }

    /// Writes a kubeconfig that authenticates with `token` (one of [`Options::tokens`]) and
    /// answers its path.
    pub fn kubeconfig_for_token(&self, token: &str) -> Result<PathBuf> {
        let path = self.processes.dir().join(format!("kubeconfig-{}", unique_suffix()));
        std::fs::write(&path, kubeconfig_yaml(&self.server, token))?;
        Ok(path)
    }

    /// A path for a file of this control plane's own, removed with it.
    pub fn file_path(&self, name: &str) -> PathBuf {
        self.processes.dir().join(name)
    }

    /// The apiserver's URL, `https://ADDRESS:PORT`.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The CA that signed the apiserver's certificate, when started with [`Options::pods`].
    pub fn ca_path(&self) -> Option<&Path> {
        self.ca_path.as_deref()
    }

    /// The last lines of one component's log (`etcd`, `kube-apiserver`, `kube-controller-manager`).
    pub fn log_tail(&self, component: &str, lines: usize) -> String {
        self.processes.log_tail(component, lines)
    }

    fn wait_ready(&self) -> Result<()> {
        let kubeconfig = self.kubeconfig.clone();
        // The caller may be inside a tokio runtime, so the wait runs on a thread of its own.
        let ready = std::thread::spawn(move || -> Result<()> {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(async move {
                let config =
                    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                        .await?;
                let client = Client::try_from(config)?;
                let deadline = Instant::now() + READY_TIMEOUT;
                loop {
                    let request = http::Request::get("/readyz").body(Vec::new())?;
                    match client.request_text(request).await {
                        Ok(body) if body.trim() == "ok" => return Ok(()),
                        _ if Instant::now() > deadline => bail!("apiserver not ready in time"),
                        _ => tokio::time::sleep(Duration::from_millis(250)).await,
                    }
                }
            })
        })
        .join()
        .map_err(|_| anyhow!("readiness check panicked"))?;
        ready.map_err(|e| {
            anyhow!(
                "{e}\n--- kube-apiserver log ---\n{}\n--- etcd log ---\n{}",
                self.log_tail("kube-apiserver", 30),
                self.log_tail("etcd", 15)
            )
        })
    }
}

/// Finds (building on first use) the directory holding etcd, kube-apiserver and
/// kube-controller-manager.
pub fn binaries_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os(BIN_DIR_ENV) {
        return Ok(PathBuf::from(dir));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/controlplane/build.sh");
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

pub(crate) fn kubeconfig_yaml(server: &str, token: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: {server}
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: {token}
contexts:
- name: test
  context:
    cluster: test
    user: admin
current-context: test
"
    )
}

/// Runs `openssl` with the words of `fixed` and then the `(option, path)` pairs (paths may hold
/// any character).
fn openssl(fixed: &str, paths: &[(&str, &Path)]) -> Result<()> {
    let mut command = Command::new("openssl");
    command.args(fixed.split_whitespace());
    for (option, path) in paths {
        command.arg(option).arg(path);
    }
    let status =
        command.stdout(Stdio::null()).stderr(Stdio::null()).status().context("running openssl")?;
    if !status.success() {
        bail!("openssl {fixed} failed");
    }
    Ok(())
}

/// A CA (`ca.crt`) and an apiserver certificate it signed (`apiserver.crt`, `apiserver.key`)
/// for every name and address pods and tests use. Returns the CA's path.
fn serving_certificate(dir: &Path, address: Ipv4Addr) -> Result<PathBuf> {
    let [ca_key, ca, key, csr, cert, ext] =
        ["ca.key", "ca.crt", "apiserver.key", "apiserver.csr", "apiserver.crt", "apiserver.ext"]
            .map(|name| dir.join(name));
    openssl(
        "req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=bucket-provisioner-test-ca",
        &[("-keyout", &ca_key), ("-out", &ca)],
    )?;
    openssl(
        "req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver",
        &[("-keyout", &key), ("-out", &csr)],
    )?;
    std::fs::write(
        &ext,
        format!(
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n\
             extendedKeyUsage=serverAuth\nsubjectAltName=IP:{address},IP:127.0.0.1,\
             IP:{KUBERNETES_SERVICE_IP},DNS:kubernetes,DNS:kubernetes.default,\
             DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost\n"
        ),
    )?;
    openssl(
        "x509 -req -days 2 -CAcreateserial",
        &[("-in", &csr), ("-CA", &ca), ("-CAkey", &ca_key), ("-extfile", &ext), ("-out", &cert)],
    )?;
    Ok(ca)
}

/// A short string that differs between calls and processes, for unique names.
pub fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{:04x}{n:x}", (nanos ^ std::process::id()) & 0xffff)
}
