//! The hostPath S3 endpoint side by side with MinIO and versitygw on this machine: the same
//! client (aws-sdk-s3 over loopback), the same loads, each server a process of its own whose CPU
//! time (utime + stime of /proc/<pid>/stat, every thread) is read before and after each load.
//! `make bench` builds the others from their pinned Go modules (tests/minio/build.sh,
//! tests/versitygw/build.sh), passes them in `BUCKET_PROVISIONER_MINIO_BIN` and
//! `BUCKET_PROVISIONER_VERSITYGW_BIN`, and appends the table to `bench-results.txt`; a server
//! whose binary is not given is left out, and the table says so.
//!
//! The endpoint runs as this program started again with `--serve-endpoint DIR`, so that its CPU
//! time is its own and not the client's.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_s3::Client;
use aws_sdk_s3::config::{Credentials, Region};
use aws_sdk_s3::primitives::ByteStream;
use hostpath_provisioner::BucketStore;
use tokio::io::AsyncWriteExt;

const SMALL: usize = 4 << 10;
const SMALL_COUNT: usize = 800;
const PARALLEL_CLIENTS: usize = 8;
const LARGE: u64 = 256 << 20;
const BUCKET: &str = "bench";
const GIB: f64 = (1u64 << 30) as f64;

/// One measured load: how fast, and the server's CPU seconds per GiB moved.
struct Figure {
    rate: f64,
    unit: &'static str,
    cpu_per_gib: f64,
}

/// A server under test, running.
struct Running {
    child: Child,
    s3: Client,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client(port: u16, key: &str, secret: &str) -> Client {
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .region(Region::new("us-east-1"))
        .endpoint_url(format!("http://127.0.0.1:{port}"))
        .credentials_provider(Credentials::new(key, secret, None, None, "bench"))
        .force_path_style(true)
        .build();
    Client::from_conf(config)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// CPU seconds (user + system, all threads) of process `pid` so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name may hold spaces: fields are counted after its closing parenthesis.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / clock_ticks()
}

fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        let out = Command::new("getconf").arg("CLK_TCK").output().ok();
        out.and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok()).unwrap_or(100.0)
    })
}

/// Waits until `s3` answers and makes the bucket, for servers that start empty.
async fn make_bucket(s3: &Client, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match s3.create_bucket().bucket(BUCKET).send().await {
            Ok(_) => return,
            Err(e) if Instant::now() > deadline => panic!("{name} never took a bucket: {e:?}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// This program again, serving a store in `dir` as the endpoint does; its port and key come
/// on its first line.
async fn start_endpoint(dir: &Path) -> Running {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .arg("--serve-endpoint")
        .arg(dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    let [port, key, secret] = words[..] else { panic!("the endpoint said {line:?}") };
    Running { child, s3: client(port.parse().unwrap(), key, secret) }
}

async fn start_minio(bin: &Path, dir: &Path) -> Running {
    let (port, console) = (free_port(), free_port());
    let child = Command::new(bin)
        .args(["server", "--quiet", "--address"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--console-address")
        .arg(format!("127.0.0.1:{console}"))
        .arg(dir)
        .env("MINIO_ROOT_USER", "benchadmin")
        .env("MINIO_ROOT_PASSWORD", "bench-secret-key")
        .env("MINIO_BROWSER", "off")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let running = Running { child, s3: client(port, "benchadmin", "bench-secret-key") };
    make_bucket(&running.s3, "minio").await;
    running
}

async fn start_versitygw(bin: &Path, dir: &Path) -> Running {
    let port = free_port();
    let child = Command::new(bin)
        .args(["--quiet", "--access", "benchadmin", "--secret", "bench-secret-key", "--port"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("posix")
        .arg(dir)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let running = Running { child, s3: client(port, "benchadmin", "bench-secret-key") };
    make_bucket(&running.s3, "versitygw").await;
    running
}

/// Runs `load` against the server and reads the server's CPU time around it.
async fn measured<F: Future<Output = (f64, u64)>>(
    server: &Running,
    unit: &'static str,
    load: F,
) -> Figure {
    let pid = server.child.id();
    let before = cpu_seconds(pid);
    let (rate, bytes) = load.await;
    let cpu = cpu_seconds(pid) - before;
    Figure { rate, unit, cpu_per_gib: cpu / (bytes as f64 / GIB) }
}

/// `count` 4 KiB PUTs (or GETs of what the PUTs wrote) under `prefix`, from `clients` clients at
/// once; operations per second and bytes moved.
async fn small(s3: &Client, prefix: &str, clients: usize, count: usize, get: bool) -> (f64, u64) {
    let body = vec![7u8; SMALL];
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (s3, body, prefix) = (s3.clone(), body.clone(), prefix.to_owned());
            tokio::spawn(async move {
                for i in (c..count).step_by(clients) {
                    let key = format!("{prefix}/{i}");
                    if get {
                        let object = s3.get_object().bucket(BUCKET).key(key).send().await.unwrap();
                        let read = object.body.collect().await.unwrap().into_bytes();
                        assert_eq!(read.len(), SMALL);
                    } else {
                        let object = s3.put_object().bucket(BUCKET).key(key);
                        object.body(ByteStream::from(body.clone())).send().await.unwrap();
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    (count as f64 / started.elapsed().as_secs_f64(), (count * SMALL) as u64)
}

async fn large_put(s3: &Client, source: &Path) -> (f64, u64) {
    let started = Instant::now();
    let body = ByteStream::from_path(source).await.unwrap();
    s3.put_object().bucket(BUCKET).key("large.bin").body(body).send().await.unwrap();
    ((LARGE >> 20) as f64 / started.elapsed().as_secs_f64(), LARGE)
}

async fn large_get(s3: &Client) -> (f64, u64) {
    let started = Instant::now();
    let mut object = s3.get_object().bucket(BUCKET).key("large.bin").send().await.unwrap();
    let mut read = 0u64;
    while let Some(bytes) = object.body.try_next().await.unwrap() {
        read += bytes.len() as u64;
    }
    assert_eq!(read, LARGE);
    ((LARGE >> 20) as f64 / started.elapsed().as_secs_f64(), LARGE)
}

/// The loads, in order, against one server.
async fn run_loads(server: &Running, source: &Path) -> Vec<Figure> {
    let s3 = &server.s3;
    let n = PARALLEL_CLIENTS;
    vec![
        measured(server, "ops/s", small(s3, "one", 1, SMALL_COUNT, false)).await,
        measured(server, "ops/s", small(s3, "one", 1, SMALL_COUNT, true)).await,
        measured(server, "ops/s", small(s3, "many", n, SMALL_COUNT, false)).await,
        measured(server, "ops/s", small(s3, "many", n, SMALL_COUNT, true)).await,
        measured(server, "MiB/s", large_put(s3, source)).await,
        measured(server, "MiB/s", large_get(s3)).await,
    ]
}

const LOADS: [&str; 6] = [
    "PUT 4 KiB, 1 client",
    "GET 4 KiB, 1 client",
    "PUT 4 KiB, 8 clients",
    "GET 4 KiB, 8 clients",
    "PUT 256 MiB",
    "GET 256 MiB",
];

/// Serves a fresh store in `dir` on a free port until killed, after printing the port and a key.
async fn serve_endpoint(dir: PathBuf) {
    let store = Arc::new(BucketStore::open(dir, "bench").unwrap());
    let creator = hostpath_provisioner::Creator { user_id: "bench", delete_with_claim: true };
    store.create_bucket(BUCKET, creator).await.unwrap();
    let key = store.issue_key("bench-user", BUCKET).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{port} {} {}", key.access_key_id, key.secret_access_key).unwrap();
    stdout.flush().unwrap();
    hostpath_provisioner::serve(listener, store, std::future::pending()).await;
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let mut append = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--serve-endpoint" => return serve_endpoint(args.next().unwrap().into()).await,
            "--append" => append = args.next(),
            _ => {}
        }
    }
    let scratch = tempfile::tempdir().unwrap();
    let source = scratch.path().join("large.bin");
    let mut file = tokio::fs::File::create(&source).await.unwrap();
    let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    for _ in 0..LARGE >> 20 {
        file.write_all(&chunk).await.unwrap();
    }
    file.sync_all().await.unwrap();

    let mut columns: Vec<(String, Option<Vec<Figure>>)> = Vec::new();
    let endpoint_dir = scratch.path().join("endpoint");
    let endpoint = start_endpoint(&endpoint_dir).await;
    columns.push(("endpoint".into(), Some(run_loads(&endpoint, &source).await)));
    drop(endpoint);
    std::fs::remove_dir_all(&endpoint_dir).unwrap();
    for (name, var) in [
        ("minio", "BUCKET_PROVISIONER_MINIO_BIN"),
        ("versitygw", "BUCKET_PROVISIONER_VERSITYGW_BIN"),
    ] {
        let Some(bin) = std::env::var_os(var).filter(|b| !b.is_empty()) else {
            columns.push((format!("{name} ({var} not set)"), None));
            continue;
        };
        let dir = scratch.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let server = match name {
            "minio" => start_minio(Path::new(&bin), &dir).await,
            _ => start_versitygw(Path::new(&bin), &dir).await,
        };
        columns.push((name.into(), Some(run_loads(&server, &source).await)));
        drop(server);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    let mut out = format!(
        "\nSide by side on this machine ({} cores, release build): the same aws-sdk-s3 client \
         over loopback and the same loads against each server; CPU = the server process's \
         utime + stime per GiB moved\n",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
    write!(out, "{:<22}", "load").unwrap();
    for (name, _) in &columns {
        write!(out, " | {name:<28}").unwrap();
    }
    out.push('\n');
    for (i, load) in LOADS.iter().enumerate() {
        write!(out, "{load:<22}").unwrap();
        for (_, figures) in &columns {
            match figures {
                Some(figures) => {
                    let f = &figures[i];
                    let cell = format!("{:.0} {} {:.2} CPU-s/GiB", f.rate, f.unit, f.cpu_per_gib);
                    write!(out, " | {cell:<28}").unwrap();
                }
                None => write!(out, " | {:<28}", "not measured").unwrap(),
            }
        }
        out.push('\n');
    }
    print!("{out}");
    if let Some(path) = append {
        let mut file = std::fs::OpenOptions::new().append(true).create(true).open(&path).unwrap();
        file.write_all(out.as_bytes()).unwrap();
        println!("results appended to {path}");
    }
}
