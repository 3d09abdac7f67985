//! A real Kubernetes node on this machine for the end-to-end tests, and helpers to run pods on it.
//!
//! `tests/node/node.sh` runs containerd, runc and the CNI plugins (Debian's packages) with the
//! kubelet, kube-proxy, kube-scheduler and CoreDNS (`tests/node/build.sh`) beside a control plane
//! from `test-support` that serves pods. The images are the provisioner's, built from the
//! `Dockerfile` by `make image`, and the test images of `tests/node/images.sh`; `make e2e` builds
//! them all. The node needs root, and takes itself down (processes, mounts, cgroups, network
//! namespaces, iptables rules, sysctls) when the test process ends, however it ends.

use std::collections::BTreeMap;
use std::future::Future;
use std::io::{BufRead, BufReader, Lines, Write};
use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapEnvSource, Container, EnvFromSource, EnvVar, Node as KubeNode, Pod,
    PodSecurityContext, PodSpec, SeccompProfile, SecretEnvSource, SecurityContext,
};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use kube::api::{Api, DynamicObject, LogParams, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use test_support::{ControlPlane, Options, Supervised, TokenUser, unique_suffix};

/// Environment variable naming the directory that holds the node's binaries (`build.sh`).
pub const NODE_BIN_ENV: &str = "BUCKET_PROVISIONER_NODE_BIN";
/// Environment variable naming the directory of image archives (`make e2e` sets it).
pub const IMAGES_ENV: &str = "BUCKET_PROVISIONER_IMAGES";
/// The node's name; the apiserver reaches the kubelet through it on 127.0.0.1.
pub const NODE_NAME: &str = "localhost";
/// The node's address on the pod bridge: the apiserver, CoreDNS and host services listen here.
pub const NODE_IP: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 1);
const POD_CIDR: &str = "10.213.0.0/24";
const SERVICE_CIDR: &str = "10.0.0.0/24";
const BRIDGE: &str = "bpnode0";
/// How long pods may take to start and finish.
pub const POD_WAIT: Duration = Duration::from_secs(180);

/// The references of the images the node has imported.
#[derive(Clone, Debug)]
pub struct Images {
    /// The provisioner image, from the `Dockerfile`.
    pub provisioner: String,
    /// The consumer application (`examples/consumer.rs`).
    pub consumer: String,
    /// A shell image, for init containers.
    pub busybox: String,
    /// The pod sandbox image.
    pub pause: String,
    /// The upstream COSI sidecar, v0.2.2 (`objectstorage.k8s.io/v1alpha1`).
    pub cosi_sidecar: String,
    /// The upstream COSI sidecar from main (`objectstorage.k8s.io/v1alpha2`).
    pub cosi_sidecar_v1alpha2: String,
}

impl Images {
    fn from_dir(dir: &Path) -> Result<Images> {
        let read = |name: &str| -> Result<String> {
            let tar = dir.join(format!("{name}.tar"));
            if !tar.is_file() {
                bail!("{} is missing: `make e2e` builds the images", tar.display());
            }
            let reference = std::fs::read_to_string(dir.join(format!("{name}.ref")))
                .with_context(|| format!("the reference of {}", tar.display()))?;
            Ok(reference.trim().to_string())
        };
        Ok(Images {
            provisioner: read("bucket-provisioner")?,
            consumer: read("consumer")?,
            busybox: read("busybox")?,
            pause: read("pause")?,
            cosi_sidecar: read("cosi-sidecar")?,
            cosi_sidecar_v1alpha2: read("cosi-sidecar-v1alpha2")?,
        })
    }
}

/// A running node with its control plane. Dropping it stops everything and restores the host.
pub struct Node {
    plane: ControlPlane,
    dir: PathBuf,
    images: Images,
    stdin: Mutex<Option<ChildStdin>>,
    supervisor: Mutex<Child>,
}

impl Node {
    /// The node shared by every test of this process, started on first use.
    pub fn shared() -> &'static Node {
        static SHARED: OnceLock<Node> = OnceLock::new();
        SHARED.get_or_init(|| Node::start().unwrap_or_else(|e| panic!("starting the node: {e:#}")))
    }

    /// Starts a control plane and a node, and waits until the node is Ready.
    pub fn start() -> Result<Node> {
        require_root()?;
        let images_dir = std::env::var_os(IMAGES_ENV).map(PathBuf::from).ok_or_else(|| {
            anyhow!("{IMAGES_ENV} is not set: run the node tests with `make e2e`")
        })?;
        let images = Images::from_dir(&images_dir)?;
        let bin = node_binaries()?;
        let dir = std::env::temp_dir().join("bucket-provisioner-node");
        let started = std::time::Instant::now();

        let mut supervisor = Command::new("bash")
            .arg(script("node.sh"))
            .arg("run")
            .env("NODE_DIR", &dir)
            .env("NODE_BIN", &bin)
            .env("NODE_IMAGES", &images_dir)
            .env("NODE_BRIDGE", BRIDGE)
            .env("NODE_BRIDGE_IP", NODE_IP.to_string())
            .env("POD_CIDR", POD_CIDR)
            .env("SERVICE_CIDR", SERVICE_CIDR)
            .env("PAUSE_IMAGE", &images.pause)
            .env("NODE_NAME", NODE_NAME)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // Its progress shows with the tests' output, and keeps that output open until the
            // host is restored.
            .stderr(Stdio::inherit())
            // Its own process group: signals meant for the test run's group must not stop it
            // half way through restoring the host.
            .process_group(0)
            .spawn()
            .context("starting tests/node/node.sh")?;
        let mut stdin = supervisor.stdin.take().expect("piped");
        let mut lines = BufReader::new(supervisor.stdout.take().expect("piped")).lines();
        expect_line(&mut lines, "prepared")?;

        let kubelet_token = format!("kubelet-{}", unique_suffix());
        let plane = ControlPlane::start_with(&Options {
            address: Some(NODE_IP),
            pods: true,
            tokens: vec![TokenUser {
                token: kubelet_token.clone(),
                user: format!("system:node:{NODE_NAME}"),
                groups: vec!["system:nodes".into()],
            }],
            ..Default::default()
        })?;
        std::fs::copy(plane.kubeconfig_path(), dir.join("admin.kubeconfig"))?;
        std::fs::write(dir.join("kubelet.kubeconfig"), kubeconfig(plane.server(), &kubelet_token))?;
        block_on(|| bind_kubelet(&plane))?;

        writeln!(stdin, "start").context("telling the node to start")?;
        expect_line(&mut lines, "started")?;
        block_on(|| wait_node_ready(&plane))?;
        eprintln!("node: {NODE_NAME} Ready {:.0?} after starting", started.elapsed());
        Ok(Node {
            plane,
            dir,
            images,
            stdin: Mutex::new(Some(stdin)),
            supervisor: Mutex::new(supervisor),
        })
    }

    /// A client authenticated as a cluster administrator.
    pub async fn client(&self) -> Client {
        self.plane.client().await
    }

    /// The control plane.
    pub fn plane(&self) -> &ControlPlane {
        &self.plane
    }

    /// The images the node holds.
    pub fn images(&self) -> &Images {
        &self.images
    }

    /// The last lines of one node program's log (`kubelet`, `containerd`, `kube-proxy`,
    /// `kube-scheduler`, `coredns`).
    pub fn log_tail(&self, program: &str, lines: usize) -> String {
        let text =
            std::fs::read_to_string(self.dir.join(format!("{program}.log"))).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        drop(self.stdin.lock().map(|mut s| s.take()));
        if let Ok(mut supervisor) = self.supervisor.lock() {
            let _ = supervisor.wait();
        }
    }
}

fn expect_line(lines: &mut Lines<BufReader<ChildStdout>>, wanted: &str) -> Result<()> {
    match lines.next() {
        Some(Ok(line)) if line == wanted => Ok(()),
        Some(Ok(line)) => bail!("the node supervisor said {line:?} instead of {wanted:?}"),
        _ => bail!("the node supervisor stopped before {wanted:?}; see its output above"),
    }
}

/// Runs an async step on a runtime of its own: callers may be inside a runtime or not.
fn block_on<'a, T: Send, F: Future<Output = Result<T>> + Send + 'a>(
    step: impl FnOnce() -> F + Send + 'a,
) -> Result<T> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                runtime.block_on(step())
            })
            .join()
            .map_err(|_| anyhow!("a node start-up step panicked"))?
    })
}

fn require_root() -> Result<()> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let uid =
        status.lines().find_map(|l| l.strip_prefix("Uid:")).unwrap_or("").split_whitespace().next();
    if uid != Some("0") {
        bail!("the node tests run a kubelet and containerd and need root (CI runs as root)");
    }
    Ok(())
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
}

/// The directory with kubelet, kube-proxy, kube-scheduler, coredns and pause, built on first use.
fn node_binaries() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os(NODE_BIN_ENV) {
        return Ok(PathBuf::from(dir));
    }
    let output = Command::new("bash")
        .arg(script("build.sh"))
        .stderr(Stdio::inherit())
        .output()
        .context("running tests/node/build.sh")?;
    if !output.status.success() {
        bail!("tests/node/build.sh failed; see its output above");
    }
    let stdout = String::from_utf8(output.stdout)?;
    let dir = stdout.lines().last().ok_or_else(|| anyhow!("build.sh printed no directory"))?;
    Ok(PathBuf::from(dir.trim()))
}

fn kubeconfig(server: &str, token: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: node
  cluster:
    server: {server}
    insecure-skip-tls-verify: true
users:
- name: kubelet
  user:
    token: {token}
contexts:
- name: node
  context:
    cluster: node
    user: kubelet
current-context: node
"
    )
}

/// The kubelet's user gets the permissions the node role grants.
async fn bind_kubelet(plane: &ControlPlane) -> Result<()> {
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta { name: Some("e2e-node".into()), ..Default::default() },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: "system:node".into(),
        },
        subjects: Some(vec![Subject {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "User".into(),
            name: format!("system:node:{NODE_NAME}"),
            ..Default::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(plane.client().await)
        .create(&PostParams::default(), &binding)
        .await?;
    Ok(())
}

async fn wait_node_ready(plane: &ControlPlane) -> Result<()> {
    let nodes: Api<KubeNode> = Api::all(plane.client().await);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let node = nodes.get_opt(NODE_NAME).await?;
        let ready = node.as_ref().and_then(|n| n.status.as_ref()?.conditions.as_ref()).is_some_and(
            |conditions| conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"),
        );
        if ready {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            bail!("node {NODE_NAME} not Ready within 120s: {node:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// helm, from `$BUCKET_PROVISIONER_HELM_BIN` or built by `tests/helm/build.sh`.
pub fn helm_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("BUCKET_PROVISIONER_HELM_BIN") {
        return path.into();
    }
    let output =
        Command::new(script("../helm/build.sh")).output().expect("running tests/helm/build.sh");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    PathBuf::from(String::from_utf8_lossy(&output.stdout).lines().last().unwrap().trim())
}

/// Runs helm against the node's cluster and answers its output; panics with it when it fails.
pub fn helm(node: &Node, args: &[&str]) -> String {
    let output = Command::new(helm_bin())
        .args(args)
        .env("KUBECONFIG", node.plane().kubeconfig_path())
        // helm keeps its caches and repositories there; none are used, nothing is left behind.
        .env("HELM_CACHE_HOME", std::env::temp_dir().join("bucket-provisioner-helm/cache"))
        .env("HELM_CONFIG_HOME", std::env::temp_dir().join("bucket-provisioner-helm/config"))
        .env("HELM_DATA_HOME", std::env::temp_dir().join("bucket-provisioner-helm/data"))
        .output()
        .expect("running helm");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "helm {args:?} failed:\n{stdout}{stderr}");
    println!("--- helm {} ---\n{stdout}", args[0]);
    stdout
}

/// The node's provisioner image as the chart's `--set` values (repository and tag).
pub fn image_values(node: &Node) -> String {
    let image = &node.images().provisioner;
    let (repository, tag) = image.rsplit_once(':').expect("the image has a tag");
    format!("image.repository={repository},image.tag={tag}")
}

/// Points every container of a pod template at the node's images, as a user sets the image
/// reference before applying: the provisioner's own, a shell for `busybox`, and the upstream
/// COSI sidecar built from source. Anything else could only come from a registry, which the node
/// cannot reach.
pub fn set_images(object: &mut DynamicObject, images: &Images) -> Result<()> {
    let Some(spec) = object.data.pointer_mut("/spec/template/spec") else { return Ok(()) };
    for list in ["initContainers", "containers"] {
        for container in spec.get_mut(list).and_then(|c| c.as_array_mut()).into_iter().flatten() {
            let image = container["image"].as_str().unwrap_or_default().to_string();
            let repository = image.split(':').next().unwrap_or_default();
            let ours = match repository.rsplit('/').next().unwrap_or_default() {
                "bucket-provisioner" => &images.provisioner,
                "busybox" => &images.busybox,
                "objectstorage-sidecar" => &images.cosi_sidecar,
                _ => bail!("image {image:?} would have to be pulled from a registry"),
            };
            container["image"] = ours.clone().into();
        }
    }
    Ok(())
}

/// Waits until Deployment `name` has all its replicas updated and available, and returns its
/// pods' names.
pub async fn wait_rollout(client: &Client, ns: &str, name: &str) -> Result<Vec<String>> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let deadline = tokio::time::Instant::now() + POD_WAIT;
    loop {
        let deployment = deployments.get(name).await?;
        let wanted = deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let status = deployment.status.clone().unwrap_or_default();
        let selector = deployment
            .spec
            .as_ref()
            .and_then(|s| s.selector.match_labels.clone())
            .unwrap_or_default()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let listed = pods.list(&kube::api::ListParams::default().labels(&selector)).await?;
        let running: Vec<&Pod> =
            listed.items.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
        let ready = running.iter().filter(|p| pod_ready(p)).count() as i32;
        if status.observed_generation >= deployment.metadata.generation
            && status.updated_replicas == Some(wanted)
            && status.available_replicas == Some(wanted)
            && running.len() as i32 == wanted
            && ready == wanted
        {
            return Ok(running.iter().map(|p| p.name_any()).collect());
        }
        if tokio::time::Instant::now() > deadline {
            let described: Vec<String> =
                listed.items.iter().map(|p| format!("{}: {:?}", p.name_any(), p.status)).collect();
            bail!(
                "Deployment {ns}/{name} not rolled out within {POD_WAIT:?}: {status:?}\n{}",
                described.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Whether the pod's Ready condition is True.
pub fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A pod that runs the consumer application with the claim's Secret and ConfigMap as its
/// environment (as `examples/manifests/20-consumer.yaml` does), plus `env` and `args`.
pub fn consumer_pod(
    name: &str,
    image: &str,
    claim: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Pod {
    Pod {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(PodSpec {
            restart_policy: Some("Never".into()),
            automount_service_account_token: Some(false),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            containers: vec![Container {
                name: "app".into(),
                image: Some(image.into()),
                args: Some(args.iter().map(|a| a.to_string()).collect()),
                env_from: Some(vec![
                    EnvFromSource {
                        secret_ref: Some(SecretEnvSource { name: claim.into(), optional: None }),
                        ..Default::default()
                    },
                    EnvFromSource {
                        config_map_ref: Some(ConfigMapEnvSource {
                            name: claim.into(),
                            optional: None,
                        }),
                        ..Default::default()
                    },
                ]),
                env: Some(
                    env.iter()
                        .map(|(k, v)| EnvVar {
                            name: k.to_string(),
                            value: Some(v.to_string()),
                            ..Default::default()
                        })
                        .collect(),
                ),
                security_context: Some(SecurityContext {
                    allow_privilege_escalation: Some(false),
                    read_only_root_filesystem: Some(true),
                    capabilities: Some(Capabilities {
                        drop: Some(vec!["ALL".into()]),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// How a pod that runs to completion ended.
#[derive(Debug)]
pub struct Finished {
    /// `Succeeded` or `Failed`.
    pub phase: String,
    /// What its container printed.
    pub logs: String,
}

/// Creates `pod` in `ns`, waits until it has finished, and returns its phase and output.
pub async fn run_to_completion(client: &Client, ns: &str, pod: &Pod) -> Result<Finished> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let name = pod.name_any();
    pods.create(&PostParams::default(), pod)
        .await
        .with_context(|| format!("creating pod {name}"))?;
    let deadline = tokio::time::Instant::now() + POD_WAIT;
    let (phase, status) = loop {
        let current = pods.get(&name).await?;
        let phase = current.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            break (phase, current.status);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("pod {ns}/{name} still {phase:?} after {POD_WAIT:?}: {:?}", current.status);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    // A pod the kubelet refused (evicted, rejected at admission) ends Failed with no container:
    // its reason says why, where its logs cannot.
    let logs = pods.logs(&name, &LogParams::default()).await.with_context(|| {
        let (reason, message) = status.map(|s| (s.reason, s.message)).unwrap_or_default();
        format!(
            "pod {ns}/{name} ended {phase} with no logs: reason {reason:?}, message {message:?}"
        )
    })?;
    Ok(Finished { phase, logs })
}

/// What a pod serves at `path` on `port`, fetched through the apiserver's pod proxy.
pub async fn pod_get(
    client: &Client,
    ns: &str,
    pod: &str,
    port: u16,
    path: &str,
) -> Result<String> {
    let request =
        http::Request::get(format!("/api/v1/namespaces/{ns}/pods/{pod}:{port}/proxy{path}"))
            .body(Vec::new())?;
    Ok(client.request_text(request).await?)
}

/// The command line of process `pid`, its program first.
pub fn process_args(pid: u32) -> Vec<String> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args = cmdline.split(|b| *b == 0).filter(|a| !a.is_empty());
    args.map(|a| String::from_utf8_lossy(a).into_owned()).collect()
}

/// Whether process `pid` is the hostPath S3 endpoint running apart (`--serve-store`).
pub fn is_split_endpoint(pid: u32) -> bool {
    process_args(pid).iter().any(|a| a.starts_with("--serve-store"))
}

/// The processes on this machine running `program` inside a Kubernetes pod (the kubelet's
/// cgroups), as (pid, real uid, environment).
pub fn pod_processes(program: &str) -> Vec<(u32, u32, BTreeMap<String, String>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let path = entry.path();
        let Ok(cmdline) = std::fs::read(path.join("cmdline")) else { continue };
        let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
        if Path::new(&*String::from_utf8_lossy(argv0)).file_name().is_none_or(|n| n != program) {
            continue;
        }
        let in_pod =
            std::fs::read_to_string(path.join("cgroup")).is_ok_and(|c| c.contains("kubepods"));
        let status = std::fs::read_to_string(path.join("status")).unwrap_or_default();
        let uid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|u| u.split_whitespace().next()?.parse().ok());
        let environ = std::fs::read(path.join("environ")).unwrap_or_default();
        let env = environ
            .split(|b| *b == 0)
            .filter_map(|kv| {
                let kv = String::from_utf8_lossy(kv);
                let (k, v) = kv.split_once('=')?;
                Some((k.to_string(), v.to_string()))
            })
            .collect();
        if let (true, Some(uid)) = (in_pod, uid) {
            found.push((pid, uid, env));
        }
    }
    found
}

/// An S3 client for `endpoint` signing with the given keys.
pub fn s3_client(endpoint: &str, key: &str, secret: &str) -> aws_sdk_s3::Client {
    // A request sent to a pod that is gone fails rather than waits for TCP to give up.
    let timeouts = aws_sdk_s3::config::timeout::TimeoutConfig::builder()
        .operation_attempt_timeout(Duration::from_secs(10))
        .build();
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .timeout_config(timeouts)
        .region(aws_sdk_s3::config::Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .force_path_style(true)
        .credentials_provider(aws_sdk_s3::config::Credentials::new(key, secret, None, None, "e2e"))
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// moto's S3 and IAM server on the node's bridge address, so pods reach it, with IAM
/// authorization enforced from its fourth request on.
pub struct Moto {
    /// `http://NODE_IP:PORT`.
    pub endpoint: String,
    /// The port it listens on.
    pub port: u16,
    /// Keys of a user allowed everything.
    pub admin: (String, String),
    _process: Supervised,
}

impl Moto {
    /// Starts moto (from the venv `tests/moto/install.sh` makes) and creates its administrator.
    pub async fn start() -> Result<Moto> {
        let venv = moto_venv()?;
        let dir = std::env::temp_dir().join(format!("moto-e2e-{}", unique_suffix()));
        std::fs::create_dir_all(&dir)?;
        let argv = vec![
            venv.join("bin/moto_server").display().to_string(),
            "-H".into(),
            NODE_IP.to_string(),
            "-p".into(),
            "0".into(),
        ];
        // Path-style requests only: pods name it by its Service, whose first label moto would
        // otherwise take for a bucket.
        let env =
            [("INITIAL_NO_AUTH_ACTION_COUNT", "3"), ("S3_IGNORE_SUBDOMAIN_BUCKETNAME", "true")];
        let process = Supervised::start(&dir, &[("moto", argv)], &env)?;
        let marker = format!("Running on http://{NODE_IP}:");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let port = loop {
            let log = std::fs::read_to_string(process.log("moto")).unwrap_or_default();
            let port = log
                .split(&marker)
                .nth(1)
                .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok());
            if let Some(port) = port {
                break port;
            }
            if tokio::time::Instant::now() > deadline {
                bail!("moto did not start:\n{}", process.log_tail("moto", 30));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let endpoint = format!("http://{NODE_IP}:{port}");
        let mut moto =
            Moto { endpoint, port, admin: ("bootstrap".into(), "x".into()), _process: process };
        // The three requests moto serves without authorization make its administrator.
        let iam = moto.iam();
        iam.create_user().user_name("admin").send().await?;
        iam.put_user_policy()
            .user_name("admin")
            .policy_name("everything")
            .policy_document(
                r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#,
            )
            .send()
            .await?;
        let key = iam.create_access_key().user_name("admin").send().await?;
        let key = key.access_key().ok_or_else(|| anyhow!("moto returned no key"))?;
        moto.admin = (key.access_key_id().into(), key.secret_access_key().into());
        Ok(moto)
    }

    /// An IAM client signing as the administrator.
    pub fn iam(&self) -> aws_sdk_iam::Client {
        let config = aws_sdk_iam::Config::builder()
            .behavior_version_latest()
            .region(aws_sdk_iam::config::Region::new("us-east-1"))
            .endpoint_url(&self.endpoint)
            .credentials_provider(aws_sdk_iam::config::Credentials::new(
                &self.admin.0,
                &self.admin.1,
                None,
                None,
                "e2e",
            ))
            .http_client(aws_smithy_http_client::Builder::new().build_http())
            .build();
        aws_sdk_iam::Client::from_conf(config)
    }

    /// An S3 client signing as the administrator.
    pub fn s3(&self) -> aws_sdk_s3::Client {
        s3_client(&self.endpoint, &self.admin.0, &self.admin.1)
    }

    /// Makes user `name` allowed what `policy` allows, and returns a key of it.
    pub async fn user(&self, name: &str, policy: &str) -> Result<(String, String)> {
        let iam = self.iam();
        iam.create_user().user_name(name).send().await?;
        iam.put_user_policy()
            .user_name(name)
            .policy_name("e2e")
            .policy_document(policy)
            .send()
            .await?;
        let key = iam.create_access_key().user_name(name).send().await?;
        let key = key.access_key().ok_or_else(|| anyhow!("moto returned no key"))?;
        Ok((key.access_key_id().into(), key.secret_access_key().into()))
    }
}

fn moto_venv() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("BUCKET_PROVISIONER_MOTO_VENV").map(PathBuf::from)
        && dir.join("bin/moto_server").is_file()
    {
        return Ok(dir);
    }
    let output = Command::new("bash")
        .arg(script("../moto/install.sh"))
        .stderr(Stdio::inherit())
        .output()
        .context("running tests/moto/install.sh")?;
    if !output.status.success() {
        bail!("tests/moto/install.sh failed; see its output above");
    }
    let stdout = String::from_utf8(output.stdout)?;
    Ok(PathBuf::from(stdout.lines().last().unwrap_or_default().trim()))
}
