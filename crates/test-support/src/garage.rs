//! A real Garage cluster on loopback: `garage server` processes built by
//! `tests/garage/build.sh` (found through [`GARAGE_BIN_ENV`]), each with its own metadata and
//! data directories, sqlite metadata, one shared RPC secret, an S3 API and an admin API with a
//! token; connected and given a layout (replication factor 3) by [`GarageCluster::start`] with
//! Garage's own CLI, as an operator would. Nodes can be killed and restarted.

use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

use crate::{free_port, free_port_on, unique_suffix};

/// The environment variable naming the `garage` binary.
pub const GARAGE_BIN_ENV: &str = "BUCKET_PROVISIONER_GARAGE_BIN";

/// The S3 region the cluster answers to.
pub const GARAGE_REGION: &str = "garage";

/// How long a node may take to start, or the cluster to become healthy.
const STARTUP: Duration = Duration::from_secs(60);

/// The `garage` binary, from [`GARAGE_BIN_ENV`].
pub fn garage_bin() -> Result<PathBuf> {
    let path = std::env::var_os(GARAGE_BIN_ENV).map(PathBuf::from).with_context(|| {
        format!("{GARAGE_BIN_ENV} is not set: run tests/garage/build.sh (make test does)")
    })?;
    if !path.is_file() {
        bail!("{GARAGE_BIN_ENV}={} is not a file", path.display());
    }
    Ok(path)
}

/// One `garage server` process and its ports.
pub struct GarageNode {
    config: PathBuf,
    log: PathBuf,
    /// RPC port (node to node).
    pub rpc_port: u16,
    /// S3 API port.
    pub s3_port: u16,
    /// Admin API port.
    pub admin_port: u16,
    /// Garage's node id.
    pub id: String,
    child: Option<Child>,
}

impl GarageNode {
    /// `http://127.0.0.1:<port>` of its S3 API.
    pub fn s3_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.s3_port)
    }

    /// `http://127.0.0.1:<port>` of its admin API.
    pub fn admin_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.admin_port)
    }

    /// Whether its process runs.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }
}

/// A Garage cluster of several nodes on loopback, stopped (SIGKILL) when dropped.
pub struct GarageCluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    /// Its nodes, in the order they were started.
    pub nodes: Vec<GarageNode>,
    /// The admin token of every node.
    pub admin_token: String,
}

impl GarageCluster {
    /// Starts `count` nodes with replication factor `count.min(3)`, connects them and applies
    /// a layout giving each 1 GB in a zone of its own; returns once every node says the
    /// cluster is healthy.
    pub async fn start(count: usize) -> Result<Self> {
        Self::start_listening(count, Ipv4Addr::LOCALHOST).await
    }

    /// [`GarageCluster::start`] with the S3 and admin APIs listening on `address` (node to
    /// node traffic stays on loopback): `0.0.0.0` for pods on a node's bridge to reach them.
    pub async fn start_listening(count: usize, address: Ipv4Addr) -> Result<Self> {
        let bin = garage_bin()?;
        let dir = tempfile::Builder::new().prefix("garage-").tempdir()?;
        let rpc_secret: String = (0..4).map(|_| format!("{:016x}", rand_u64())).collect();
        let admin_token = format!("admin-{}-{:x}", unique_suffix(), rand_u64());
        let mut nodes = Vec::new();
        for i in 0..count {
            let node_dir = dir.path().join(format!("node{i}"));
            std::fs::create_dir_all(node_dir.join("meta"))?;
            std::fs::create_dir_all(node_dir.join("data"))?;
            let rpc_port = free_port()?;
            let (s3_port, admin_port) =
                (free_port_on(address.into())?, free_port_on(address.into())?);
            let config = node_dir.join("garage.toml");
            std::fs::write(
                &config,
                format!(
                    "metadata_dir = \"{meta}\"\n\
                     data_dir = \"{data}\"\n\
                     db_engine = \"sqlite\"\n\
                     replication_factor = {replication}\n\
                     rpc_bind_addr = \"127.0.0.1:{rpc_port}\"\n\
                     rpc_public_addr = \"127.0.0.1:{rpc_port}\"\n\
                     rpc_secret = \"{rpc_secret}\"\n\
                     [s3_api]\n\
                     s3_region = \"{GARAGE_REGION}\"\n\
                     api_bind_addr = \"{address}:{s3_port}\"\n\
                     [admin]\n\
                     api_bind_addr = \"{address}:{admin_port}\"\n\
                     admin_token = \"{admin_token}\"\n",
                    meta = node_dir.join("meta").display(),
                    data = node_dir.join("data").display(),
                    replication = count.min(3),
                ),
            )?;
            std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600))?;
            nodes.push(GarageNode {
                log: node_dir.join("garage.log"),
                config,
                rpc_port,
                s3_port,
                admin_port,
                id: String::new(),
                child: None,
            });
        }
        let mut cluster = GarageCluster { dir, bin, nodes, admin_token };
        for i in 0..count {
            cluster.spawn(i)?;
        }
        for i in 0..count {
            let node = &cluster.nodes[i];
            wait_for_port(node.admin_port, &node.log).await?;
            let out = cluster.cli(i, &["node", "id", "-q"]).await?;
            cluster.nodes[i].id = out.trim().split('@').next().unwrap_or_default().to_string();
        }
        for i in 1..count {
            let peer = format!("{}@127.0.0.1:{}", cluster.nodes[i].id, cluster.nodes[i].rpc_port);
            cluster.cli(0, &["node", "connect", &peer]).await?;
        }
        for i in 0..count {
            let id = cluster.nodes[i].id.clone();
            cluster.cli(0, &["layout", "assign", "-z", &format!("dc{i}"), "-c", "1G", &id]).await?;
        }
        cluster.cli(0, &["layout", "apply", "--version", "1"]).await?;
        for i in 0..count {
            cluster.wait_healthy(i).await?;
        }
        Ok(cluster)
    }

    fn spawn(&mut self, i: usize) -> Result<()> {
        let node = &mut self.nodes[i];
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&node.log)?;
        let child = Command::new(&self.bin)
            .arg("-c")
            .arg(&node.config)
            .arg("server")
            .env("RUST_LOG", std::env::var("GARAGE_LOG").unwrap_or_else(|_| "warn".into()))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", self.bin.display()))?;
        node.child = Some(child);
        Ok(())
    }

    /// Runs Garage's CLI against node `i` and answers its standard output.
    pub async fn cli(&self, i: usize, args: &[&str]) -> Result<String> {
        let output = Command::new(&self.bin)
            .arg("-c")
            .arg(&self.nodes[i].config)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .await?;
        if !output.status.success() {
            bail!(
                "garage {}: {}{}",
                args.join(" "),
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Kills node `i` (SIGKILL), as a crash or a lost machine would.
    pub async fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].child.take() {
            let _ = child.kill().await;
        }
    }

    /// Starts node `i` again on its directories and ports, and waits until it reports the
    /// cluster healthy (it rejoined).
    pub async fn restart(&mut self, i: usize) -> Result<()> {
        self.kill(i).await;
        self.spawn(i)?;
        wait_for_port(self.nodes[i].admin_port, &self.nodes[i].log).await?;
        self.wait_healthy(i).await
    }

    /// Waits until node `i`'s `/v2/GetClusterHealth` says `healthy` (every storage node
    /// connected, every partition complete).
    pub async fn wait_healthy(&self, i: usize) -> Result<()> {
        let deadline = tokio::time::Instant::now() + STARTUP;
        let mut last = String::new();
        while tokio::time::Instant::now() < deadline {
            match self.get(i, "/v2/GetClusterHealth").await {
                Ok((200, body)) if body.contains("\"healthy\"") => return Ok(()),
                Ok((_, body)) => last = body,
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        bail!("garage node {i} not healthy within {STARTUP:?}: {last}; log {}", self.log_tail(i))
    }

    /// `GET path` on node `i`'s admin API with the token: (status, body).
    pub async fn get(&self, i: usize, path: &str) -> Result<(u16, String)> {
        http_get(self.nodes[i].admin_port, path, &self.admin_token).await
    }

    /// The last lines of node `i`'s log.
    pub fn log_tail(&self, i: usize) -> String {
        log_tail(&self.nodes[i].log)
    }

    /// The directory holding every node's files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    hasher.finish()
}

async fn wait_for_port(port: u16, log: &Path) -> Result<()> {
    let deadline = tokio::time::Instant::now() + STARTUP;
    while tokio::time::Instant::now() < deadline {
        if tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("garage did not listen on port {port} within {STARTUP:?}: {}", log_tail(log))
}

/// A minimal HTTP/1.0 GET with a bearer token, enough for health checks.
async fn http_get(port: u16, path: &str, token: &str) -> Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await?;
    let request = format!(
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await??;
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no HTTP status in the answer")?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((status, body))
}
