//! The hostPath S3 endpoint side by side with MinIO and versitygw on this machine: the same
//! client (aws-sdk-s3 over loopback), the same loads, each server a process of its own whose CPU
//! time (utime + stime of /proc/<pid>/stat, every thread) is read before and after each load.
//! `make bench` builds the others from their pinned Go modules (tests/minio/build.sh,
//! tests/versitygw/build.sh), passes them in `BUCKET_PROVISIONER_MINIO_BIN` and
//! `BUCKET_PROVISIONER_VERSITYGW_BIN`, and appends the table to `bench-results.txt`; a server
//! whose binary is not given is left out, and the table says so.
//!
//! The endpoint runs as this program started again with `--serve-endpoint DIR`, so that its CPU
//! time is its own and not the client's. `--only TEXT` runs just the loads whose name holds
//! TEXT (e.g. `--only "PUT 256"`), for a quick look at one of them.
//!
//! The overwrite loads PUT the same keys again and again, then GET them: on a plain bucket, and
//! on a second bucket of each server with versioning Enabled (PutBucketVersioning), where every
//! PUT keeps the previous object as a noncurrent version. versitygw keeps versions only when
//! started with `--versioning-dir`, which it always is here. A server refusing versioning gets
//! "not supported" in those rows and its answer under the table, rather than failing the run.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_s3::Client;
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{BucketVersioningStatus, VersioningConfiguration};
use s3_endpoint::BucketStore;
use tokio::io::AsyncWriteExt;

mod support;
use support::{client, cpu_times, free_port, median};

const SMALL: usize = 4 << 10;
const SMALL_COUNT: usize = 800;
const LARGE: u64 = 256 << 20;
const BUCKET: &str = "bench";
/// The bucket of the versioned loads, with versioning Enabled.
const VERSIONED: &str = "bench-versioned";
/// Keys the overwrite loads write over and over: each load PUTs every one [`SMALL_COUNT`] /
/// this many times.
const OVERWRITTEN_KEYS: usize = 100;
const GIB: f64 = (1u64 << 30) as f64;

/// One measured load: how fast, and the server's CPU seconds per GiB moved.
struct Figure {
    rate: f64,
    unit: &'static str,
    cpu_per_gib: f64,
    /// The part of `cpu_per_gib` spent in the server's own code rather than the kernel's.
    user_per_gib: f64,
}

/// A server under test, running.
struct Running {
    child: Child,
    s3: Client,
    /// A client of [`VERSIONED`], versioning Enabled; or why the server would not have it.
    versioned: Result<Client, String>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `s3` answers and makes `bucket`, for servers that start empty.
async fn make_bucket(s3: &Client, name: &str, bucket: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match s3.create_bucket().bucket(bucket).send().await {
            Ok(_) => return,
            Err(e) if Instant::now() > deadline => panic!("{name} never took a bucket: {e:?}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// What a server answered, for the notes under the table.
fn answer<E: ProvideErrorMetadata + std::error::Error + 'static>(e: &SdkError<E>) -> String {
    match (e.code(), e.message()) {
        (Some(code), message) => format!("{code}: {}", message.unwrap_or("(no message)")),
        _ => DisplayErrorContext(e).to_string(),
    }
}

/// Turns versioning on for [`VERSIONED`] through `s3` and reads it back: the client, or what
/// the server answered instead.
async fn enable_versioning(s3: Client) -> Result<Client, String> {
    let enabled = VersioningConfiguration::builder().status(BucketVersioningStatus::Enabled);
    let request = s3.put_bucket_versioning().bucket(VERSIONED);
    let put = request.versioning_configuration(enabled.build()).send().await;
    put.map_err(|e| format!("PutBucketVersioning answered {}", answer(&e)))?;
    let read = s3.get_bucket_versioning().bucket(VERSIONED).send().await;
    let read = read.map_err(|e| format!("GetBucketVersioning answered {}", answer(&e)))?;
    match read.status() {
        Some(BucketVersioningStatus::Enabled) => Ok(s3),
        other => Err(format!("GetBucketVersioning answered {other:?} after Enabled was put")),
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
    let [port, key, secret, versioned_key, versioned_secret] = words[..] else {
        panic!("the endpoint said {line:?}")
    };
    let port = port.parse().unwrap();
    let versioned = enable_versioning(client(port, versioned_key, versioned_secret)).await;
    Running { child, s3: client(port, key, secret), versioned }
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
    let s3 = client(port, "benchadmin", "bench-secret-key");
    make_bucket(&s3, "minio", BUCKET).await;
    make_bucket(&s3, "minio", VERSIONED).await;
    let versioned = enable_versioning(s3.clone()).await;
    Running { child, s3, versioned }
}

/// versitygw's posix backend on `dir`, keeping versions in `versions` (it has none without).
async fn start_versitygw(bin: &Path, dir: &Path, versions: &Path) -> Running {
    let port = free_port();
    let child = Command::new(bin)
        .args(["--quiet", "--access", "benchadmin", "--secret", "bench-secret-key", "--port"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["posix", "--versioning-dir"])
        .arg(versions)
        .arg(dir)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let s3 = client(port, "benchadmin", "bench-secret-key");
    make_bucket(&s3, "versitygw", BUCKET).await;
    make_bucket(&s3, "versitygw", VERSIONED).await;
    let versioned = enable_versioning(s3.clone()).await;
    Running { child, s3, versioned }
}

/// Runs `load` against the server and reads the server's CPU time around it.
async fn measured<F: Future<Output = (f64, u64)>>(
    server: &Running,
    unit: &'static str,
    load: F,
) -> Figure {
    let pid = server.child.id();
    let (user, system) = cpu_times(pid);
    let (rate, bytes) = load.await;
    let (user_after, system_after) = cpu_times(pid);
    let gib = bytes as f64 / GIB;
    let user_per_gib = (user_after - user) / gib;
    Figure { rate, unit, cpu_per_gib: user_per_gib + (system_after - system) / gib, user_per_gib }
}

/// Where a load of small objects goes: its bucket, key prefix, and how many keys its
/// operations share (as many as there are operations, or fewer for overwrites).
#[derive(Clone)]
struct Keys {
    bucket: &'static str,
    prefix: String,
    count: usize,
}

/// `count` 4 KiB PUTs (or GETs of what the PUTs wrote) to `keys`, from `clients` clients at
/// once; operations per second and bytes moved. A PUT to [`VERSIONED`] must answer a version id,
/// so that what is measured is a versioned write.
async fn small(s3: &Client, keys: &Keys, clients: usize, count: usize, get: bool) -> (f64, u64) {
    let body = vec![7u8; SMALL];
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (s3, body, keys) = (s3.clone(), body.clone(), keys.clone());
            tokio::spawn(async move {
                for i in (c..count).step_by(clients) {
                    let key = format!("{}/{}", keys.prefix, i % keys.count);
                    let bucket = keys.bucket;
                    if get {
                        let object = s3.get_object().bucket(bucket).key(key).send().await.unwrap();
                        let read = object.body.collect().await.unwrap().into_bytes();
                        assert_eq!(read.len(), SMALL);
                    } else {
                        let object = s3.put_object().bucket(bucket).key(key);
                        let put = object.body(ByteStream::from(body.clone())).send().await.unwrap();
                        let version = put.version_id().filter(|v| *v != "null");
                        assert_eq!(bucket == VERSIONED, version.is_some(), "{put:?}");
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

async fn large_gets(s3: &Client) -> (f64, u64) {
    let started = Instant::now();
    for _ in 0..LARGE_GETS {
        let mut object = s3.get_object().bucket(BUCKET).key("large.bin").send().await.unwrap();
        let mut read = 0u64;
        while let Some(bytes) = object.body.try_next().await.unwrap() {
            read += bytes.len() as u64;
        }
        assert_eq!(read, LARGE);
    }
    let bytes = LARGE * LARGE_GETS;
    ((bytes >> 20) as f64 / started.elapsed().as_secs_f64(), bytes)
}

/// One load of the table.
#[derive(Clone, Copy)]
enum Load {
    /// [`SMALL_COUNT`] 4 KiB PUTs (or GETs of them) from this many clients at once.
    Small { clients: usize, get: bool },
    /// As `Small`, over [`OVERWRITTEN_KEYS`] keys only; on [`VERSIONED`] if `versioned`.
    Overwrite { clients: usize, get: bool, versioned: bool },
    /// One 256 MiB PUT.
    LargePut,
    /// [`LARGE_GETS`] GETs of the 256 MiB object, one after the other.
    LargeGet,
}

/// GETs of the large object per round: one is over in a tenth of a second, shorter than the
/// CPU clock's resolution allows to measure well.
const LARGE_GETS: u64 = 4;

const LOADS: [(&str, Load); 16] = [
    ("PUT 4 KiB, 1 client", Load::Small { clients: 1, get: false }),
    ("GET 4 KiB, 1 client", Load::Small { clients: 1, get: true }),
    ("PUT 4 KiB, 8 clients", Load::Small { clients: 8, get: false }),
    ("GET 4 KiB, 8 clients", Load::Small { clients: 8, get: true }),
    ("PUT 4 KiB, 16 clients", Load::Small { clients: 16, get: false }),
    ("GET 4 KiB, 16 clients", Load::Small { clients: 16, get: true }),
    ("PUT 256 MiB", Load::LargePut),
    ("GET 256 MiB", Load::LargeGet),
    ("PUT 4 KiB same keys, 1 client", overwrite(1, false, false)),
    ("GET 4 KiB same keys, 1 client", overwrite(1, true, false)),
    ("PUT 4 KiB same keys, 8 clients", overwrite(8, false, false)),
    ("GET 4 KiB same keys, 8 clients", overwrite(8, true, false)),
    ("PUT 4 KiB versioned, 1 client", overwrite(1, false, true)),
    ("GET 4 KiB versioned, 1 client", overwrite(1, true, true)),
    ("PUT 4 KiB versioned, 8 clients", overwrite(8, false, true)),
    ("GET 4 KiB versioned, 8 clients", overwrite(8, true, true)),
];

const fn overwrite(clients: usize, get: bool, versioned: bool) -> Load {
    Load::Overwrite { clients, get, versioned }
}

/// Rounds of every load against every server. The disk of a shared machine speeds up and
/// slows down over minutes, so the servers take turns within each round, each round starting
/// with the next one, and the table gives each figure's median and range.
const ROUNDS: usize = 3;

/// Runs `load` against `server` in round `round`, measuring the server's CPU time around it;
/// `None` for a versioned load on a server without versioning. The file system holding every
/// server's data is synced first: a server that answers before its writes reach the disk
/// would otherwise leave that work to whichever load runs next.
async fn run_load(server: &Running, source: &Path, load: Load, round: usize) -> Option<Figure> {
    let disk = std::fs::File::open(source.parent().unwrap()).unwrap();
    rustix::fs::syncfs(&disk).unwrap();
    let s3 = &server.s3;
    let figure = match load {
        Load::Small { clients, get } => {
            // Each round and client count writes keys of its own, so every PUT makes an object.
            let keys =
                Keys { bucket: BUCKET, prefix: format!("r{round}-c{clients}"), count: SMALL_COUNT };
            measured(server, "ops/s", small(s3, &keys, clients, SMALL_COUNT, get)).await
        }
        Load::Overwrite { clients, get, versioned } => {
            // Each round and client count overwrites keys of its own: every PUT replaces an
            // object (or, versioned, adds a version) written by this load.
            let prefix = format!("r{round}-o{clients}");
            let (s3, bucket) = match versioned {
                true => (server.versioned.as_ref().ok()?, VERSIONED),
                false => (s3, BUCKET),
            };
            let keys = Keys { bucket, prefix, count: OVERWRITTEN_KEYS };
            measured(server, "ops/s", small(s3, &keys, clients, SMALL_COUNT, get)).await
        }
        Load::LargePut => measured(server, "MiB/s", large_put(s3, source)).await,
        Load::LargeGet => measured(server, "MiB/s", large_gets(s3)).await,
    };
    Some(figure)
}

/// The median and range of one load's figures over the rounds.
fn cell(figures: &[Figure]) -> String {
    let rates: Vec<f64> = figures.iter().map(|f| f.rate).collect();
    let (low, high) = rates.iter().fold((f64::MAX, 0f64), |(l, h), r| (l.min(*r), h.max(*r)));
    let cpu = median(figures.iter().map(|f| f.cpu_per_gib).collect());
    let user = median(figures.iter().map(|f| f.user_per_gib).collect());
    let unit = figures[0].unit;
    format!("{:.0} {unit} ({low:.0}-{high:.0}), {cpu:.2} ({user:.2} user)", median(rates))
}

/// Serves a fresh store in `dir` on a free port until killed, after printing the port and a key.
async fn serve_endpoint(dir: PathBuf) {
    let store = Arc::new(BucketStore::open(dir, "bench").unwrap());
    let mut keys = String::new();
    for (bucket, user) in [(BUCKET, "bench-user"), (VERSIONED, "bench-versioned-user")] {
        let creator = s3_endpoint::Creator { user_id: user, delete_with_claim: true };
        store.create_bucket(bucket, creator).await.unwrap();
        let key = store.issue_key(user, bucket).await.unwrap();
        write!(keys, " {} {}", key.access_key_id, key.secret_access_key).unwrap();
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{port}{keys}").unwrap();
    stdout.flush().unwrap();
    s3_endpoint::serve(listener, store, std::future::pending()).await;
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (mut append, mut only) = (None, String::new());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--serve-endpoint" => return serve_endpoint(args.next().unwrap().into()).await,
            "--append" => append = args.next(),
            "--only" => only = args.next().unwrap_or_default(),
            _ => {}
        }
    }
    let loads: Vec<usize> = (0..LOADS.len()).filter(|i| LOADS[*i].0.contains(&only)).collect();
    let scratch = tempfile::tempdir().unwrap();
    let source = scratch.path().join("large.bin");
    let mut file = tokio::fs::File::create(&source).await.unwrap();
    let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    for _ in 0..LARGE >> 20 {
        file.write_all(&chunk).await.unwrap();
    }
    file.sync_all().await.unwrap();

    // Every server runs from the start, each on a directory of its own on the same disk.
    let mut servers: Vec<(String, Option<Running>)> = Vec::new();
    servers.push(("endpoint".into(), Some(start_endpoint(&scratch.path().join("endpoint")).await)));
    for (name, var) in [
        ("minio", "BUCKET_PROVISIONER_MINIO_BIN"),
        ("versitygw", "BUCKET_PROVISIONER_VERSITYGW_BIN"),
    ] {
        let Some(bin) = std::env::var_os(var).filter(|b| !b.is_empty()) else {
            servers.push((format!("{name} ({var} not set)"), None));
            continue;
        };
        let dir = scratch.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let server = match name {
            "minio" => start_minio(Path::new(&bin), &dir).await,
            _ => {
                let versions = scratch.path().join("versitygw-versions");
                std::fs::create_dir_all(&versions).unwrap();
                start_versitygw(Path::new(&bin), &dir, &versions).await
            }
        };
        servers.push((name.into(), Some(server)));
    }
    let running: Vec<usize> = (0..servers.len()).filter(|i| servers[*i].1.is_some()).collect();
    // figures[server][load]: one figure per round.
    let mut figures: Vec<Vec<Vec<Figure>>> =
        servers.iter().map(|_| LOADS.iter().map(|_| Vec::new()).collect()).collect();
    for round in 0..ROUNDS {
        for turn in 0..running.len() {
            let index = running[(round + turn) % running.len()];
            let server = servers[index].1.as_ref().unwrap();
            for &load in &loads {
                if let Some(figure) = run_load(server, &source, LOADS[load].1, round).await {
                    figures[index][load].push(figure);
                }
            }
        }
        println!("round {} of {ROUNDS} done", round + 1);
    }
    // Why a server has no versioned figures, said under the table.
    let unversioned: Vec<(String, String)> = servers
        .iter()
        .filter_map(|(name, server)| {
            let why = server.as_ref()?.versioned.as_ref().err()?;
            Some((name.clone(), why.clone()))
        })
        .collect();
    for (_, server) in &mut servers {
        drop(server.take());
    }

    let mut out = format!(
        "\nSide by side on this machine ({} cores, release build): the same aws-sdk-s3 client \
         over loopback and the same loads against each server, {ROUNDS} rounds taking turns; \
         each cell is the median rate (lowest-highest) and the median of the server process's \
         CPU (utime + stime) in seconds per GiB moved, with the median of its user part (the \
         rest is the kernel's: copies, TCP, and on loopback the receiving side's TCP too, \
         charged to the sender). \"same keys\": {SMALL_COUNT} PUTs over {OVERWRITTEN_KEYS} keys \
         (or GETs of them) in a plain bucket, each PUT replacing an object; \"versioned\": the \
         same in a bucket with versioning Enabled, each PUT adding a version; versitygw runs \
         with --versioning-dir throughout\n",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
    write!(out, "{:<30}", "load").unwrap();
    for (name, _) in &servers {
        write!(out, " | {name:<44}").unwrap();
    }
    out.push('\n');
    for &i in &loads {
        write!(out, "{:<30}", LOADS[i].0).unwrap();
        for (server, (name, _)) in servers.iter().enumerate() {
            let versioned = matches!(LOADS[i].1, Load::Overwrite { versioned: true, .. });
            let text = match figures[server][i].is_empty() {
                true if versioned && unversioned.iter().any(|(n, _)| n == name) => {
                    "not supported (see below)".to_owned()
                }
                true => "not measured".to_owned(),
                false => cell(&figures[server][i]),
            };
            write!(out, " | {text:<44}").unwrap();
        }
        out.push('\n');
    }
    for (name, why) in &unversioned {
        writeln!(out, "{name}: versioning not supported: {why}").unwrap();
    }
    print!("{out}");
    if let Some(path) = append {
        let mut file = std::fs::OpenOptions::new().append(true).create(true).open(&path).unwrap();
        file.write_all(out.as_bytes()).unwrap();
        println!("results appended to {path}");
    }
}
